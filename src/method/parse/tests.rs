use super::*;

#[test]
fn scores_accept_only_zero_half_one() {
    for (reply, want) in [
        ("fine \\boxed{1}", Some(1.0)),
        ("\\boxed{1.0}", Some(1.0)),
        ("\\boxed{0}", Some(0.0)),
        ("\\boxed{0.50}", Some(0.5)),
        ("\\boxed{.5}", Some(0.5)),
        ("\\boxed{\\frac{1}{2}}", Some(0.5)),
        ("\\boxed{\\frac12}", Some(0.5)),
        ("\\boxed{ 1/2 }", Some(0.5)),
        ("\\boxed{$1$}", Some(1.0)),
        ("\\boxed{\\text{0}}", Some(0.0)),
        ("\\boxed{0.7}", None),
        ("\\boxed{2}", None),
        ("\\boxed{correct}", None),
        ("\\boxed{-1}", None),
        ("\\boxed{1.2.3}", None),
        ("score: 1", None),
        ("<think>\\boxed{1}</think> no score outside", None),
        ("<think>\\boxed{0}</think> visible \\boxed{1}", Some(1.0)),
        // The answer rule's: `\fbox` counts, and a score box cut off is no score (the
        // step scored before it is not the verdict).
        ("\\fbox{1}", Some(1.0)),
        ("Step 1: \\boxed{1}. Overall: \\boxed{", None),
        ("\\boxed{0.5} then \\boxed{1", None),
    ] {
        assert_eq!(parse_score(reply), want, "{reply}");
    }
}

#[test]
fn json_found_in_fences_prose_and_after_think() {
    let fenced = "Here you go:\n```json\n{\"updated_guidelines\": [\"induction\"]}\n```\nDone.";
    assert_eq!(
        parse_guideline_reply(fenced),
        Some(vec!["induction".to_string()])
    );
    let prose = "Sure {not json} and then {\"updated_guidelines\": [\"a\", \"b\",]} thanks";
    assert_eq!(
        parse_guideline_reply(prose),
        Some(vec!["a".into(), "b".into()])
    );
    let think =
        "<think>{\"updated_guidelines\": [\"wrong\"]}</think>{\"updated_guidelines\": [\"right\"]}";
    assert_eq!(
        parse_guideline_reply(think),
        Some(vec!["right".to_string()])
    );
    let nested = "{\"result\": {\"updated_guidelines\": [\"deep\"]}}";
    assert_eq!(
        parse_guideline_reply(nested),
        Some(vec!["deep".to_string()])
    );
    let braces_in_strings = "{\"updated_guidelines\": [\"use \\\\boxed{x} }\"]}";
    assert_eq!(
        parse_guideline_reply(braces_in_strings),
        Some(vec!["use \\boxed{x} }".to_string()])
    );
    let unclosed_fence = "```json\n{\"updated_guidelines\": [\"x\"]}";
    assert_eq!(
        parse_guideline_reply(unclosed_fence),
        Some(vec!["x".to_string()])
    );
}

#[test]
fn json_failures_are_none() {
    assert_eq!(parse_guideline_reply("no json at all"), None);
    assert_eq!(parse_guideline_reply("{\"other\": [1]}"), None);
    assert_eq!(
        parse_guideline_reply("{\"updated_guidelines\": \"not a list\"}"),
        None
    );
    assert_eq!(
        parse_guideline_reply("{\"updated_guidelines\": [\"cut off"),
        None
    );
    assert_eq!(
        parse_experience_reply("<think>{\"verified_anchors\": [\"a\"]}"),
        None
    );
}

#[test]
fn experience_items_are_prefixed_once() {
    let reply = r#"```json
{"verified_anchors": ["T(2) = 3", "Anchor: f is even", ""], "error_avoidance_heuristics": ["heuristic: check n=1", 5]}
```"#;
    assert_eq!(
        parse_experience_reply(reply),
        Some(vec![
            "Anchor: T(2) = 3".to_string(),
            "Anchor: f is even".into(),
            "Heuristic: check n=1".into(),
            "Heuristic: 5".into(),
        ])
    );
    assert_eq!(
        parse_experience_reply("{\"verified_anchors\": [], \"error_avoidance_heuristics\": []}"),
        Some(vec![])
    );
    assert_eq!(
        parse_experience_reply("{\"error_avoidance_heuristics\": [\"x\"]}"),
        Some(vec!["Heuristic: x".to_string()])
    );
}
