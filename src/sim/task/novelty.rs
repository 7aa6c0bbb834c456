//! The guideline judge of Hybrid-RL scoring: a response's strategy against the guideline
//! bank. The simulator's solutions open with `Strategy: NAME`; the response counts as
//! repeating the bank when the bank text names that strategy.

use super::scan::between;
use crate::sim::options::STRATEGY_NAMES;

/// `\boxed{novel}` or `\boxed{repeated}` for a prompt with `<guideline_bank>` and
/// `<response>` sections (`config/prompts/guideline_judge.md`).
pub fn guideline_judge(prompt: &str) -> String {
    let (Some(bank), Some(response)) = (
        between(prompt, "<guideline_bank>", "</guideline_bank>"),
        between(prompt, "<response>", "</response>"),
    ) else {
        return "The prompt lacks a <guideline_bank> or <response> section.".to_owned();
    };
    let Some(strategy) = response_strategy(response) else {
        return "The solution names no strategy I know; it is not in the list.\n\\boxed{novel}"
            .to_owned();
    };
    if bank.to_ascii_lowercase().contains(strategy) {
        format!("The solution uses {strategy}, which the list already holds.\n\\boxed{{repeated}}")
    } else {
        format!("The solution uses {strategy}, which the list does not hold.\n\\boxed{{novel}}")
    }
}

/// The strategy named on the response's `Strategy:` line, else the first one it mentions.
fn response_strategy(response: &str) -> Option<&'static str> {
    let lower = response.to_ascii_lowercase();
    let named = lower
        .lines()
        .find_map(|l| l.trim().strip_prefix("strategy:"))
        .and_then(|rest| STRATEGY_NAMES.into_iter().find(|s| rest.contains(s)));
    named.or_else(|| STRATEGY_NAMES.into_iter().find(|s| lower.contains(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(bank: &str, response: &str) -> String {
        guideline_judge(&format!(
            "<guideline_bank>\n{bank}\n</guideline_bank>\n<response>\n{response}\n</response>"
        ))
    }

    #[test]
    fn repeated_when_the_bank_names_the_strategy() {
        let response = "Strategy: induction on n\nApproach: modular arithmetic is not used.";
        assert!(
            ask("- Tried induction on n: small cases", response).ends_with("\\boxed{repeated}")
        );
        assert!(ask("- Tried modular arithmetic", response).ends_with("\\boxed{novel}"));
        assert!(ask("(none yet)", response).ends_with("\\boxed{novel}"));
        assert!(ask("- Tried induction on n", "no strategy here").ends_with("\\boxed{novel}"));
        assert!(!guideline_judge("no sections").contains("\\boxed"));
    }
}
