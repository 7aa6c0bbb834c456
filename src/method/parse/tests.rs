use super::*;

#[test]
fn strip_think_removes_blocks_unclosed_and_stray_close() {
    assert_eq!(
        strip_think("<think>secret</think>Answer \\boxed{3}"),
        "Answer \\boxed{3}"
    );
    assert_eq!(
        strip_think("a <think>x</think> b <think>y</think> c"),
        "a  b  c"
    );
    assert_eq!(
        strip_think("visible <think>cut off while thinking \\boxed{9}"),
        "visible"
    );
    assert_eq!(
        strip_think("reasoning without opening tag</think>\nfinal"),
        "final"
    );
    assert_eq!(strip_think("plain text"), "plain text");
    assert_eq!(strip_think("<think>only thinking"), "");
}

/// The plain `str::find` form of `strip_think`, kept as the reference its faster form
/// (memchr search, borrowed result) must match.
fn strip_think_reference(text: &str) -> String {
    let mut rest = text;
    if let Some(close) = rest.find(THINK_CLOSE) {
        let open = rest.find(THINK_OPEN);
        if open.is_none_or(|o| o > close) {
            rest = &rest[close + THINK_CLOSE.len()..];
        }
    }
    let mut out = String::with_capacity(rest.len());
    while let Some(open) = rest.find(THINK_OPEN) {
        out.push_str(&rest[..open]);
        let after = &rest[open + THINK_OPEN.len()..];
        match after.find(THINK_CLOSE) {
            Some(close) => rest = &after[close + THINK_CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

#[test]
fn strip_think_matches_the_reference_on_every_arrangement_of_tags() {
    let pieces = [
        "<think>",
        "</think>",
        " ",
        "é",
        "x\\boxed{1}",
        "\n",
        "<thi",
        "nk>",
        "</",
        "∑ ",
    ];
    let mut checked = 0;
    // Every sequence of up to five pieces (10^5 texts): tags split, doubled, unbalanced.
    let mut text = String::new();
    for n in 0..100_000u32 {
        text.clear();
        let mut k = n;
        for _ in 0..5 {
            text.push_str(pieces[(k % 10) as usize]);
            k /= 10;
        }
        assert_eq!(strip_think(&text), strip_think_reference(&text), "{text:?}");
        checked += 1;
    }
    assert_eq!(checked, 100_000);
}

#[test]
fn strip_think_borrows_a_reply_without_blocks() {
    let reply = "  Answer \\boxed{3}\n";
    assert!(matches!(
        strip_think(reply),
        Cow::Borrowed("Answer \\boxed{3}")
    ));
    assert!(matches!(
        strip_think("why</think> final "),
        Cow::Borrowed("final")
    ));
    assert!(matches!(strip_think("a<think>b</think>c"), Cow::Owned(_)));
}

#[test]
fn last_boxed_handles_nesting_and_truncation() {
    assert_eq!(
        last_boxed("x \\boxed{1} y \\boxed{\\frac{a}{b}}"),
        Some("\\frac{a}{b}")
    );
    assert_eq!(last_boxed("\\boxed {  42 }"), Some("42"));
    assert_eq!(last_boxed("\\boxed{7} then \\boxed{unfinished"), Some("7"));
    assert_eq!(last_boxed("no box"), None);
    assert_eq!(last_boxed("\\boxed{}"), Some(""));
}

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
