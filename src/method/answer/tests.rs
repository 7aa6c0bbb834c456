use super::*;

/// The replies on which the strategies' and the evaluator's former copies of this rule
/// disagreed, with the one answer both now read. In the comments: what the strategies'
/// copy (`method`) and the evaluator's copy (`eval`) returned.
#[test]
fn the_replies_the_former_copies_disagreed_on_have_one_answer() {
    let cases: &[(&str, Option<&str>)] = &[
        // A final box cut off: method 7, eval none.
        ("\\boxed{7} then \\boxed{unfinished", None),
        ("x \\boxed{1} y \\boxed{\\frac{1}{2", None),
        ("\\boxed{3}\n\nSo the answer is \\boxed{", None),
        // `\fbox`: method none, eval 8 / 9.
        ("\\fbox{8}", Some("8")),
        ("\\boxed{1} and finally \\fbox{9}", Some("9")),
        // An empty last box: method "", eval none.
        ("\\boxed{}", None),
        ("\\boxed{3} then \\boxed{ }", None),
        // Escaped braces are literal: method "a \", eval "a \} b".
        ("\\boxed{a \\} b}", Some("a \\} b")),
        // Text before a think block: method 5, eval none.
        ("\\boxed{5}<think>check again</think>confirmed", Some("5")),
        // Text between blocks: method 5, eval none.
        (
            "<think>a</think>So \\boxed{5}.<think>double-check</think>Yes.",
            Some("5"),
        ),
        // A think block left open after a closed one (cut off while thinking again):
        // method 1, eval 2 (the box inside the unclosed block).
        (
            "<think>a</think>answer \\boxed{1} <think>maybe \\boxed{2}",
            Some("1"),
        ),
        // A `</think>` outside any block, after a closed block or a first stray one:
        // everything before it is reasoning. Method 1 and 2 (it honoured only a leading
        // stray `</think>`), eval none.
        ("<think>a</think>\\boxed{1}</think>no box after", None),
        ("draft \\boxed{1}</think>final \\boxed{2}</think>", None),
    ];
    for (reply, want) in cases {
        assert_eq!(final_answer(reply).as_deref(), *want, "reply: {reply:?}");
    }
}

#[test]
fn final_answer_table() {
    let cases: &[(&str, Option<&str>)] = &[
        ("The answer is \\boxed{42}.", Some("42")),
        ("\\boxed{1} then \\boxed{2}", Some("2")),
        ("\\boxed{\\frac{1}{2}}", Some("\\frac{1}{2}")),
        ("\\boxed{\\{1, 2\\}}", Some("\\{1, 2\\}")),
        ("\\boxed {7}", Some("7")),
        ("\\boxed {  42 }", Some("42")),
        ("\\fbox{3} and finally \\boxed{ 10 }", Some("10")),
        ("no box here", None),
        ("\\boxed{a{b{c}}d}", Some("a{b{c}}d")),
        ("\\boxed{\\boxed{4}}", Some("4")),
        ("\\boxedsymbol and \\boxed{5}", Some("5")),
        ("\\boxed{5} and \\boxedsymbol", Some("5")),
        ("<think>\\boxed{1}</think>So \\boxed{2}", Some("2")),
        ("<think>maybe \\boxed{1}</think>no final box", None),
        ("<think>truncated \\boxed{1}", None),
        (
            "reasoning without opening tag \\boxed{1}</think>\n\\boxed{2}",
            Some("2"),
        ),
        ("", None),
    ];
    for (reply, want) in cases {
        assert_eq!(final_answer(reply).as_deref(), *want, "reply: {reply:?}");
    }
}

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
    assert_eq!(strip_think("a<think>b</think>c"), "ac");
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

/// Visible text is a fixed point: a stored solution (already visible text) judged again
/// gives the answer its reply gave.
#[test]
fn the_visible_text_of_a_reply_has_the_replys_answer() {
    for reply in [
        "<think>a</think>So \\boxed{5}.<think>b</think>Yes.",
        "\\boxed{5}<think>check</think> confirmed ",
        "<think>a</think>answer \\boxed{1} <think>maybe \\boxed{2}",
        "draft</think>final \\boxed{2}",
        "<think>a</think>\\boxed{1}</think>tail \\boxed{3}",
        "\\boxed{7} then \\boxed{unfinished",
    ] {
        let visible = visible_text(&Arc::from(reply));
        assert_eq!(strip_think(&visible), &*visible, "{reply:?}");
        assert_eq!(final_answer(&visible), final_answer(reply), "{reply:?}");
    }
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
    assert!(matches!(
        strip_think("<think>reasoning</think>\n answer"),
        Cow::Borrowed("answer")
    ));
    assert!(matches!(strip_think("a<think>b</think>c"), Cow::Owned(_)));
}

#[test]
fn visible_text_shares_a_reply_with_nothing_to_remove() {
    let reply: Arc<str> = Arc::from("Answer \\boxed{3}");
    assert!(Arc::ptr_eq(&visible_text(&reply), &reply));
    let padded: Arc<str> = Arc::from(" Answer \\boxed{3}");
    assert_eq!(&*visible_text(&padded), "Answer \\boxed{3}");
}

/// The searches as they would be written with `str` methods: the reference the memchr
/// forms must agree with.
mod reference {
    use super::super::{BOX_COMMANDS, THINK_CLOSE, THINK_OPEN};

    pub fn strip_think(text: &str) -> String {
        let mut kept = String::new();
        let mut rest = text;
        loop {
            let open = rest.find(THINK_OPEN);
            let close = rest.find(THINK_CLOSE);
            match (close, open) {
                (Some(close), _) if open.is_none_or(|o| close < o) => {
                    kept.clear();
                    rest = &rest[close + THINK_CLOSE.len()..];
                }
                (_, Some(open)) => {
                    kept.push_str(&rest[..open]);
                    match close {
                        Some(close) => rest = &rest[close + THINK_CLOSE.len()..],
                        None => break,
                    }
                }
                (_, None) => {
                    kept.push_str(rest);
                    break;
                }
            }
        }
        kept.trim().to_string()
    }

    pub fn last_box_argument_start(text: &str) -> Option<usize> {
        BOX_COMMANDS
            .iter()
            .flat_map(|command| {
                text.match_indices(command).filter_map(move |(pos, _)| {
                    let after = pos + command.len();
                    let rest = &text[after..];
                    let trimmed = rest.trim_start();
                    trimmed
                        .starts_with('{')
                        .then(|| after + (rest.len() - trimmed.len()))
                })
            })
            .max()
    }
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
        assert_eq!(
            strip_think(&text),
            reference::strip_think(&text),
            "{text:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 100_000);
}

#[test]
fn the_box_search_agrees_with_the_str_methods_on_every_arrangement() {
    const PIECES: [&str; 12] = [
        "<think>",
        "</think>",
        "\\boxed",
        "\\fbox",
        "{",
        "}",
        " ",
        "\n",
        "x",
        "é",
        "\\boxedsymbol",
        "<think",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..100_000 {
        let mut text = String::new();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 14) as usize;
        for k in 0..len {
            let i = (state >> (4 * (k % 15))) as usize % PIECES.len();
            text.push_str(PIECES[i]);
        }
        assert_eq!(
            last_box_argument_start(&text),
            reference::last_box_argument_start(&text),
            "{text:?}"
        );
        // Whatever the input, the answer is found without a panic.
        let _ = final_answer(&text);
    }
}
