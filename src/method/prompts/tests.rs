use super::*;

#[test]
fn builtin_templates_load_and_render() {
    let set = PromptSet::builtin().expect("built-in templates are valid");
    let style = set.render(TemplateKind::SolutionStyleAnswer, &[]);
    assert!(style.contains("\\boxed{}"));
    let p = set.render(TemplateKind::Solution, &["What is 1+1?", &style, ""]);
    assert!(p.contains("What is 1+1?"));
    assert!(!p.contains("{question}") && !p.contains("{style}"));
    assert!(
        set.template(TemplateKind::Judge)
            .text()
            .contains("{reference}")
    );
    let j = set.judge("Q?", "42", "41");
    assert!(j.contains("<reference_answer>42</reference_answer>"));
    assert!(j.contains("<candidate_answer>41</candidate_answer>"));
    // Literal braces survive: the JSON example and \boxed{} are not placeholders.
    let e = set.render(TemplateKind::Experience, &["Q", "a", "h", "r"]);
    assert!(e.contains("{\"verified_anchors\": [\"...\"]"));
    let v = set.render(TemplateKind::Verification, &["Q", "S", "F"]);
    assert!(v.contains("\\boxed{0.5}"));
}

#[test]
fn every_kind_has_its_builtin_file_and_required_placeholders() {
    for kind in TemplateKind::ALL {
        let text = kind.builtin_text();
        for (name, required) in kind.placeholders() {
            if *required {
                assert!(
                    text.contains(&format!("{{{name}}}")),
                    "{} lacks {{{name}}}",
                    kind.file_name()
                );
            }
        }
        assert_eq!(TemplateKind::from_name(kind.name()), Some(kind));
        assert_eq!(TemplateKind::ALL[kind as usize], kind);
    }
}

#[test]
fn missing_placeholder_names_file_and_placeholder() {
    let err = Template::parse(
        TemplateKind::Verification,
        "my/verify.md",
        "Check {solution} please",
    )
    .expect_err("question is required");
    let msg = err.to_string();
    assert!(
        msg.contains("my/verify.md") && msg.contains("{question}"),
        "{msg}"
    );
    assert!(matches!(
        err,
        PromptError::MissingPlaceholder {
            placeholder: "question",
            ..
        }
    ));
}

#[test]
fn placeholder_of_another_kind_is_rejected() {
    let err = Template::parse(
        TemplateKind::SolutionExplore,
        "x.md",
        "{question} {style} {guidelines} {rollouts}",
    )
    .expect_err("explore prompts never get rollouts");
    let msg = err.to_string();
    assert!(
        msg.contains("x.md") && msg.contains("{rollouts}") && msg.contains("{guidelines}"),
        "{msg}"
    );
}

#[test]
fn override_file_is_loaded_and_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("judge.md");
    std::fs::write(&good, "R={reference} C={candidate} \\boxed{yes}").expect("write");
    let mut o = PromptOverrides::new();
    o.insert("judge".into(), good);
    let set = PromptSet::load(&o).expect("valid override");
    assert_eq!(set.judge("q", "1", "2"), "R=1 C=2 \\boxed{yes}");

    let bad = dir.path().join("summary.md");
    std::fs::write(&bad, "{question} {solution}").expect("write");
    let mut o = PromptOverrides::new();
    o.insert("summary".into(), bad.clone());
    let msg = PromptSet::load(&o)
        .expect_err("missing verifications")
        .to_string();
    assert!(
        msg.contains(&bad.display().to_string()) && msg.contains("{verifications}"),
        "{msg}"
    );

    let mut o = PromptOverrides::new();
    o.insert("solutoin".into(), dir.path().join("nope.md"));
    assert!(
        PromptSet::load(&o)
            .expect_err("unknown")
            .to_string()
            .contains("solutoin")
    );

    let mut o = PromptOverrides::new();
    o.insert("solution".into(), dir.path().join("absent.md"));
    assert!(
        PromptSet::load(&o)
            .expect_err("unreadable")
            .to_string()
            .contains("absent.md")
    );
}

#[test]
fn rendering_fills_repeated_and_adjacent_placeholders() {
    let t = Template::parse(TemplateKind::Rollout, "t", "{index}{summary}|{summary}{").expect("ok");
    assert_eq!(t.fill(&["1", "S"]), "1S|S{");
}

#[test]
fn bullet_list_one_item_per_line() {
    assert_eq!(bullet_list(&["a", " b\nc "]), "- a\n- b c");
    assert_eq!(bullet_list::<&str>(&[]), "(none yet)");
}
