//! The guideline judge, sans-IO: the prompt asking whether a rollout's strategy is already
//! in the guideline bank, and the verdict parsed from its reply. Template:
//! `config/prompts/guideline_judge.md` (placeholders `{question}`, `{guidelines}`,
//! `{response}`); the reply ends with `\boxed{novel}` or `\boxed{repeated}`.

use crate::method::answer::{last_boxed, strip_think};
use crate::method::prompts::bullet_list;
use crate::method::{PromptSet, TemplateKind};

/// The guideline-judge prompt. The response goes in without its `<think>` block: the
/// judge compares strategies, and a reasoning trace only adds noise and length.
pub fn prompt(
    prompts: &PromptSet,
    question: &str,
    guidelines: &[String],
    response: &str,
) -> String {
    prompts.render(
        TemplateKind::GuidelineJudge,
        &[question, &bullet_list(guidelines), &strip_think(response)],
    )
}

/// `Some(true)` = novel, `Some(false)` = repeated, `None` = the reply says neither. The
/// last `\boxed{}` of the visible text decides; without one, a last line that is exactly
/// one of the words.
pub fn parse_reply(reply: &str) -> Option<bool> {
    let visible = strip_think(reply);
    let text = match last_boxed(&visible) {
        Some(boxed) => boxed,
        None => visible.lines().rev().find(|l| !l.trim().is_empty())?,
    };
    let mut word = text.trim();
    for wrapper in ["\\text{", "\\textbf{", "\\mathrm{"] {
        if let Some(inner) = word.strip_prefix(wrapper).and_then(|w| w.strip_suffix('}')) {
            word = inner;
        }
    }
    let word = word
        .trim_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '.' | '!' | ':' | '"'))
        .to_ascii_lowercase();
    match word.as_str() {
        "novel" | "new" => Some(true),
        "repeated" | "not novel" | "already tried" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lists_the_bank_and_strips_think() {
        let prompts = PromptSet::builtin().unwrap();
        let p = prompt(
            &prompts,
            "Find n.",
            &["Tried induction on n".to_owned()],
            "<think>scratch</think>Strategy: parity\n\\boxed{3}",
        );
        assert!(p.contains("Find n."));
        assert!(p.contains("<guideline_bank>\n- Tried induction on n\n</guideline_bank>"));
        assert!(p.contains("<response>\nStrategy: parity\n\\boxed{3}\n</response>"));
        assert!(!p.contains("scratch"));
        let empty = prompt(&prompts, "Q", &[], "R");
        assert!(empty.contains("(none yet)"));
    }

    #[test]
    fn reply_parsing() {
        let cases: &[(&str, Option<bool>)] = &[
            ("It uses parity.\n\\boxed{novel}", Some(true)),
            ("\\boxed{Repeated}", Some(false)),
            (
                "\\boxed{novel} on reflection \\boxed{repeated}",
                Some(false),
            ),
            (
                "<think>\\boxed{repeated}</think>\\boxed{\\text{novel}}",
                Some(true),
            ),
            ("Analysis\n**Repeated**", Some(false)),
            ("\\boxed{maybe}", None),
            ("", None),
        ];
        for (reply, expected) in cases {
            assert_eq!(parse_reply(reply), *expected, "reply: {reply:?}");
        }
    }
}
