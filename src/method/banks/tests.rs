use super::*;

fn items(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

#[test]
fn item_similarity_normalizes_case_punctuation_and_prefix() {
    assert_eq!(item_similarity("Induction on n.", "induction ON n"), 1.0);
    assert_eq!(item_similarity("Anchor: x = 1", "Anchor: x=1"), 1.0);
    assert_eq!(item_similarity("alpha beta", "gamma delta"), 0.0);
    assert!((item_similarity("alpha beta gamma", "alpha beta delta") - 0.5).abs() < 1e-12);
    assert_eq!(item_similarity("", "!!"), 1.0);
}

#[test]
fn anchors_and_heuristics_are_never_duplicates_of_each_other() {
    assert_eq!(item_similarity("Anchor: x = 1", "Heuristic: x = 1"), 0.0);
    assert_eq!(item_similarity("Anchor: x = 1", "x = 1"), 0.0);
    assert_eq!(
        item_similarity("Heuristic: check n = 0", "Heuristic: check n=0"),
        1.0
    );
}

#[test]
fn rejection_kinds_round_trip_through_the_reasons() {
    let merge = AppendOnlyMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let current = items(&["induction on n", "generating functions for the sequence"]);
    let out = merge.merge(
        &current,
        items(&[
            "generating functions for the whole sequence",
            "",
            "case split on parity",
            "case split on the parity",
        ]),
        None,
    );
    let kinds: Vec<RejectionKind> = out
        .rejected
        .iter()
        .map(|r| RejectionKind::of(&r.reason))
        .collect();
    assert_eq!(
        kinds,
        vec![
            RejectionKind::Rewrite,
            RejectionKind::Empty,
            RejectionKind::Duplicate,
            RejectionKind::Dropped
        ]
    );
    let out = DedupReplaceMerge {
        rule: DuplicateRule::lexical(0.7),
    }
    .merge(&current, vec![], None);
    assert_eq!(
        RejectionKind::of(&out.rejected[0].reason),
        RejectionKind::NoUsableEntries
    );
    assert_eq!(RejectionKind::of("something else"), RejectionKind::Other);
}

#[test]
fn append_only_keeps_dropped_and_rewritten_entries() {
    let merge = AppendOnlyMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let current = items(&["induction on n", "generating functions for the sequence"]);
    // The model drops the first entry, rewrites the second and adds a new one.
    let proposed = items(&[
        "generating functions for the whole sequence",
        "case split on the parity of n",
    ]);
    let out = merge.merge(&current, proposed, None);
    assert_eq!(
        out.items,
        items(&[
            "induction on n",
            "generating functions for the sequence",
            "case split on the parity of n"
        ])
    );
    let reasons: Vec<(&str, &str)> = out
        .rejected
        .iter()
        .map(|r| (r.item.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|(i, r)| *i == "generating functions for the whole sequence"
                && r.contains("rewrites existing entry"))
    );
    assert!(
        reasons
            .iter()
            .any(|(i, r)| *i == "induction on n" && r.contains("dropped"))
    );
}

#[test]
fn append_only_rejects_near_duplicates_at_threshold() {
    let current = items(&["alpha beta gamma delta"]);
    // Similarity with "alpha beta gamma epsilon" = 3/5 = 0.6; with
    // "alpha beta gamma delta epsilon": 4/5 = 0.8.
    let low = AppendOnlyMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let out = low.merge(
        &current,
        items(&[
            "alpha beta gamma delta",
            "alpha beta gamma epsilon",
            "alpha beta gamma delta epsilon",
        ]),
        None,
    );
    assert_eq!(
        out.items,
        items(&["alpha beta gamma delta", "alpha beta gamma epsilon"])
    );
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].item, "alpha beta gamma delta epsilon");
    assert!(out.rejected[0].reason.contains("duplicates"));
    // Exactly at the threshold counts as a duplicate.
    let at = AppendOnlyMerge {
        rule: DuplicateRule::lexical(0.6),
    };
    let out = at.merge(
        &current,
        items(&["alpha beta gamma delta", "alpha beta gamma epsilon"]),
        None,
    );
    assert_eq!(out.items, items(&["alpha beta gamma delta"]));
}

#[test]
fn a_different_number_or_sign_is_a_new_entry() {
    let merge = DedupReplaceMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let out = merge.merge(
        &[],
        items(&[
            "Anchor: T(2) = 3",
            "Anchor: T(3) = 2",
            "Anchor: x = -3 is a root",
            "Anchor: x = 3 is a root",
            "Heuristic: n is even",
            "Heuristic: n is not even",
        ]),
        None,
    );
    assert_eq!(out.items.len(), 6, "{:?}", out.rejected);
}

#[test]
fn append_only_with_repeat_of_everything_adds_nothing_and_rejects_nothing() {
    let merge = AppendOnlyMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let current = items(&["x y", "z w"]);
    let out = merge.merge(&current, current.clone(), None);
    assert_eq!(out.items, current);
    assert!(out.rejected.is_empty());
    let out = merge.merge(&[], items(&["  new one  ", ""]), None);
    assert_eq!(out.items, items(&["new one"]));
    assert_eq!(out.rejected.len(), 1);
}

#[test]
fn dedup_replace_takes_new_list_deduplicated_within_each_kind() {
    let merge = DedupReplaceMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let current = items(&["Anchor: old fact"]);
    let out = merge.merge(
        &current,
        items(&[
            "Anchor: T(2) = 3",
            "Anchor: t(2)=3",
            "Heuristic: T(2) = 3",
            "Heuristic: check small cases",
        ]),
        None,
    );
    // The same formula as an anchor and as a heuristic are two items.
    assert_eq!(
        out.items,
        items(&[
            "Anchor: T(2) = 3",
            "Heuristic: T(2) = 3",
            "Heuristic: check small cases"
        ])
    );
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].item, "Anchor: t(2)=3");
}

#[test]
fn dedup_replace_keeps_previous_on_empty() {
    let merge = DedupReplaceMerge {
        rule: DuplicateRule::lexical(0.7),
    };
    let current = items(&["Anchor: keep me"]);
    let out = merge.merge(&current, vec![], None);
    assert_eq!(out.items, current);
    assert_eq!(out.rejected.len(), 1);
    let out = merge.merge(&current, items(&["  ", ""]), None);
    assert_eq!(out.items, current);
}

#[test]
fn split_experience_strips_prefixes() {
    let bank = items(&["Anchor: a", "Heuristic: h", "bare"]);
    let (a, h) = split_experience(&bank);
    assert_eq!(a, vec!["a"]);
    assert_eq!(h, vec!["h", "bare"]);
}

#[test]
fn policies_are_named_after_the_banks() {
    let p = tmas_merge_policies(DuplicateRule::lexical(0.7));
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_ref()).collect();
    assert_eq!(names, vec![EXPERIENCE_BANK, GUIDELINE_BANK]);
}
