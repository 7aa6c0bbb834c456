//! Records shared by the run store and the engine: what is stored about one problem, a
//! problem that ended without a result, and the calls and tokens of one role. They sit
//! below both so the store can read and write them without depending on the engine.

use serde::{Deserialize, Serialize};

use crate::eval::analyses::{Analyses, ProblemRun};
use crate::eval::judge::{FailedCandidates, JudgeRecord};
use crate::method::TmasOutcome;

/// Everything stored about one problem.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProblemRecord {
    pub problem_id: String,
    pub question: String,
    pub reference_answer: String,
    pub outcome: TmasOutcome,
    /// `judgments[iteration][candidate]`; `None` for a candidate whose solution call failed.
    pub judgments: Vec<Vec<Option<JudgeRecord>>>,
}

/// Whether a problem's stored reference answer is one. A dataset row never has an empty
/// answer (the loader refuses it), so an empty reference marks a problem that has none: a
/// request `tmas serve` recorded. Such a problem is not judged (its record has no
/// judgments), Pass@1 leaves it out rather than scoring it 0, and it gives no RL
/// training instance (there is no ground truth to reward against).
pub fn has_reference(reference_answer: &str) -> bool {
    !reference_answer.is_empty()
}

impl ProblemRecord {
    /// See [`has_reference`].
    pub fn has_reference(&self) -> bool {
        has_reference(&self.reference_answer)
    }

    /// The paper's analyses of `records` (one run), candidates without a judgment counted
    /// by `failed`, the permutation test drawn from `seed`: what `tmas report`, the
    /// experiment report and `tmas view` show.
    pub fn analyses(records: &[ProblemRecord], failed: FailedCandidates, seed: u64) -> Analyses {
        let runs: Vec<ProblemRun<'_>> = records
            .iter()
            .map(|r| ProblemRun {
                id: &r.problem_id,
                outcome: &r.outcome,
                judgments: &r.judgments,
                failed,
            })
            .collect();
        Analyses::of(&runs, seed)
    }
}

/// Calls and tokens of one role over a run (from the run store's `calls` table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleUsage {
    pub calls: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Answered calls whose tokens are estimated (the server sent no usage): the token
    /// figures are then partly estimates.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated_calls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A problem that ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedProblem {
    pub problem_id: String,
    pub error: String,
}
