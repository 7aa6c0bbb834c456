use super::*;

fn items(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

#[test]
fn jaccard_normalizes_case_punctuation_and_prefix() {
    assert_eq!(jaccard("Induction on n!", "induction ON n"), 1.0);
    assert_eq!(jaccard("Anchor: x = 1", "Heuristic: x = 1"), 1.0);
    assert_eq!(jaccard("a b", "c d"), 0.0);
    assert!((jaccard("a b c", "a b d") - 0.5).abs() < 1e-12);
    assert_eq!(jaccard("", "!!"), 1.0);
}

#[test]
fn append_only_keeps_dropped_and_rewritten_entries() {
    let merge = AppendOnlyMerge { threshold: 0.7 };
    let current = items(&["induction on n", "generating functions for the sequence"]);
    // The model drops the first entry, rewrites the second and adds a new one.
    let proposed = items(&[
        "generating functions for the whole sequence",
        "case split on the parity of n",
    ]);
    let out = merge.merge(&current, proposed);
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
    let current = items(&["a b c d"]);
    // Jaccard("a b c d", "a b c e") = 3/5 = 0.6; with "a b c d e": 4/5 = 0.8.
    let low = AppendOnlyMerge { threshold: 0.7 };
    let out = low.merge(&current, items(&["a b c d", "a b c e", "a b c d e"]));
    assert_eq!(out.items, items(&["a b c d", "a b c e"]));
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].item, "a b c d e");
    assert!(out.rejected[0].reason.contains("duplicates"));
    // Exactly at the threshold counts as a duplicate.
    let at = AppendOnlyMerge { threshold: 0.6 };
    let out = at.merge(&current, items(&["a b c d", "a b c e"]));
    assert_eq!(out.items, items(&["a b c d"]));
}

#[test]
fn append_only_with_repeat_of_everything_adds_nothing_and_rejects_nothing() {
    let merge = AppendOnlyMerge { threshold: 0.7 };
    let current = items(&["x y", "z w"]);
    let out = merge.merge(&current, current.clone());
    assert_eq!(out.items, current);
    assert!(out.rejected.is_empty());
    let out = merge.merge(&[], items(&["  new one  ", ""]));
    assert_eq!(out.items, items(&["new one"]));
    assert_eq!(out.rejected.len(), 1);
}

#[test]
fn dedup_replace_takes_new_list_deduplicated() {
    let merge = DedupReplaceMerge { threshold: 0.7 };
    let current = items(&["Anchor: old fact"]);
    let out = merge.merge(
        &current,
        items(&[
            "Anchor: T(2) = 3",
            "Heuristic: t(2)=3",
            "Heuristic: check small cases",
        ]),
    );
    assert_eq!(
        out.items,
        items(&["Anchor: T(2) = 3", "Heuristic: check small cases"])
    );
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(out.rejected[0].item, "Heuristic: t(2)=3");
}

#[test]
fn dedup_replace_keeps_previous_on_empty() {
    let merge = DedupReplaceMerge { threshold: 0.7 };
    let current = items(&["Anchor: keep me"]);
    let out = merge.merge(&current, vec![]);
    assert_eq!(out.items, current);
    assert_eq!(out.rejected.len(), 1);
    let out = merge.merge(&current, items(&["  ", ""]));
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
    let p = tmas_merge_policies(0.7);
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_ref()).collect();
    assert_eq!(names, vec![EXPERIENCE_BANK, GUIDELINE_BANK]);
}
