//! Proof mode (`method.no_proof = false`): solution prompts that ask for a proof get a
//! proof-shaped reply, and the evaluation's proof grader (a `judge` call whose prompt holds
//! `<reference_solution>` and `<proof>`) gets a grade of 0, 0.5 or 1.
//!
//! The simulated proof is right or wrong exactly as an answer-style solution is (the same
//! strategies, facts and chances); it ends with the claim it proves in the solution's
//! usual `Final answer: \boxed{…}` line, so the verifiers and the grader can tell a
//! correct proof (the problem's reference answer) from a flawed one.

use super::problem::Problem;
use super::replies::FINAL_ANSWER;
use super::scan::{between, last_braced_after, normalize_answer};
use crate::sim::options::TaskOptions;
use crate::sim::rng::SimRng;

/// Text of the proof-style instructions that marks a solution prompt as proof mode.
pub const PROOF_STYLE_MARKER: &str = "Write a complete and rigorous proof";

/// Whether a solution prompt asks for a proof.
pub fn asks_for_proof(prompt: &str) -> bool {
    prompt.contains(PROOF_STYLE_MARKER)
}

/// Dresses an answer-style solution as a proof: an opening line, the same body and a
/// closing sentence before the final line.
pub fn as_proof(solution: String) -> String {
    let (body, last) = match solution.rfind(FINAL_ANSWER) {
        Some(at) => solution.split_at(at),
        None => (solution.as_str(), ""),
    };
    format!(
        "Proof. We prove the claim in steps; each step follows from the previous ones.\n\
         {body}This completes the proof.\n{last}"
    )
}

/// Whether a judge prompt is the proof grader's.
pub fn is_grading_prompt(prompt: &str) -> bool {
    prompt.contains("<reference_solution>") && prompt.contains("<proof>")
}

/// The grader's reply: 1 for a proof of the reference claim (0.5 at the verifiers'
/// partial rate), 0 for a flawed one or one without a conclusion.
pub fn grade(p: &Problem, prompt: &str, t: &TaskOptions, rng: &mut SimRng) -> String {
    let proof = between(prompt, "<proof>", "</proof>").unwrap_or("");
    let claim = last_braced_after(proof, FINAL_ANSWER);
    let right = claim.is_some_and(|c| normalize_answer(c) == normalize_answer(&p.answer));
    let (grade, why) = if !right {
        (
            "0",
            "The proof establishes a different claim, so a key step must fail.",
        )
    } else if rng.chance(t.verifier_partial_rate) {
        (
            "0.5",
            "The argument is right but one step is only sketched.",
        )
    } else {
        (
            "1",
            "Every step is justified and matches the reference solution.",
        )
    };
    format!("{why}\n\\boxed{{{grade}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_keep_their_final_line_and_grades_follow_the_claim() {
        let t = TaskOptions::default();
        let p = Problem::derive("proof", Some("n^2"), &t);
        let proof = as_proof(format!("Strategy: x\nstep\n{FINAL_ANSWER}n^2}}"));
        assert!(proof.starts_with("Proof."));
        assert!(proof.ends_with(&format!("This completes the proof.\n{FINAL_ANSWER}n^2}}")));
        let prompt = |body: &str| {
            format!("<reference_solution>r</reference_solution>\n<proof>\n{body}\n</proof>")
        };
        assert!(is_grading_prompt(&prompt("x")));
        let mut rng = SimRng::new(1);
        let mut grades = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let reply = grade(&p, &prompt(&proof), &t, &mut rng);
            grades.insert(reply[reply.rfind('{').unwrap_or(0)..].to_string());
        }
        assert!(
            grades.iter().all(|g| g == "{1}" || g == "{0.5}"),
            "{grades:?}"
        );
        let wrong = as_proof(format!("step\n{FINAL_ANSWER}n^3}}"));
        assert!(grade(&p, &prompt(&wrong), &t, &mut rng).ends_with("\\boxed{0}"));
        assert!(grade(&p, &prompt("no conclusion"), &t, &mut rng).ends_with("\\boxed{0}"));
        assert!(asks_for_proof(&format!(
            "... {PROOF_STYLE_MARKER}: state ..."
        )));
    }
}
