//! What a TMAS run of one problem produces: per iteration, every candidate with its
//! branch, prompt mode, solution, verifications and summary; the best candidate; the bank
//! versions; call counts and failures. Answers are not extracted or judged here (that is
//! the evaluation's job), so a stored outcome can be re-judged later.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tmas_actors::strategy::{BankVersion, CallKey, Rejection};
use tmas_client::failure::FailureKind;

use crate::role::Role;

/// The problem a strategy works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProblemInput {
    pub id: Arc<str>,
    pub question: Arc<str>,
}

/// Which way the ε-greedy choice went for a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Branch {
    Exploit,
    Explore,
}

/// Which solution prompt a candidate got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptMode {
    /// Base prompt: an exploiting candidate with no previous rollouts (plus experience if
    /// any), or an exploring one with no guideline to avoid (without experience).
    Fresh,
    /// Refine prompt with previous rollouts and experience.
    Refine,
    /// Exploration prompt: the guideline bank only.
    Explore,
}

/// How a candidate ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateStatus {
    /// Solution, verifications and summary done.
    Complete,
    /// Solution and verifications done, summary call failed or came back empty.
    SummaryFailed,
    /// The solution call failed: the candidate is dropped from the iteration's rollouts.
    SolutionFailed,
}

/// How one verification slot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    Scored,
    /// Every attempt came back without a parseable score.
    Unparseable,
    /// The call failed (after the client's retries).
    Failed,
}

/// One of a candidate's M verification slots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationRecord {
    pub index: u32,
    pub status: VerificationStatus,
    pub score: Option<f64>,
    /// The (think-stripped) text of the last reply, scored or not.
    pub text: Option<Arc<str>>,
    /// Calls made for this slot (1 + re-asks).
    pub attempts: u32,
}

/// One candidate of one iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateResult {
    pub index: u32,
    pub branch: Branch,
    /// The uniform draw compared with ε (recorded so the choice can be audited).
    pub branch_draw: f64,
    pub mode: PromptMode,
    /// Candidate indices (in the previous iteration) of the rollouts shown; empty unless
    /// the mode is `Refine`.
    pub context_rollouts: Vec<u32>,
    /// Experience items shown in the prompt.
    pub experience_items: usize,
    /// Guideline items shown in the prompt (explore only).
    pub guideline_items: usize,
    pub prompt_bytes: usize,
    pub status: CandidateStatus,
    /// The visible solution text (think block removed).
    pub solution: Option<Arc<str>>,
    /// The server stopped the solution at `max_tokens` (`finish_reason = length`).
    pub truncated: bool,
    pub verifications: Vec<VerificationRecord>,
    /// Parsed scores, in slot order.
    pub scores: Vec<f64>,
    pub average_score: Option<f64>,
    pub fully_verified: bool,
    pub summary: Option<Arc<str>>,
}

/// A memory-agent update within an iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankUpdateRecord {
    pub bank: Arc<str>,
    /// Calls made (1 + re-asks after unparseable replies).
    pub attempts: u32,
    /// Whether a usable proposal was sent to the bank (false: the bank kept its items).
    pub proposed: bool,
    /// The version the bank reported back.
    pub version: Option<BankVersion>,
    /// Items the method itself refused as near-duplicates before proposing the rest
    /// (RSE's embeddings de-duplication), with reasons like the bank's own rejections.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deduplicated: Vec<Rejection>,
    /// The banks read meaning (`method.bank_dedup = "embeddings"`) but this update's
    /// embeddings call failed: the bank merged by the lexical rule alone, rather than lose
    /// the update (the failed call is in the iteration's failures).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lexical_fallback: bool,
}

/// A call that failed or whose reply could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    pub key: CallKey,
    pub kind: FailureRecordKind,
    pub message: String,
}

/// What went wrong with a recorded call, written as one name: the call's
/// [`FailureKind`] (`timeout`, `status`, …) or what was wrong with its reply
/// (`unparseable_score`, …). The two sets of names are disjoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FailureRecordKind {
    /// Read first: a [`FailureKind`] reads any name (an unknown one as `unknown`).
    Reply(UnusableReply),
    Call(FailureKind),
}

impl From<FailureKind> for FailureRecordKind {
    fn from(kind: FailureKind) -> Self {
        FailureRecordKind::Call(kind)
    }
}

impl From<UnusableReply> for FailureRecordKind {
    fn from(why: UnusableReply) -> Self {
        FailureRecordKind::Reply(why)
    }
}

/// A call was answered, but its reply could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnusableReply {
    /// A verification without a `\boxed{0|0.5|1}` score.
    UnparseableScore,
    /// A memory agent's reply without the JSON object holding its bank's list.
    UnparseableJson,
    /// A summary with no visible text.
    EmptySummary,
}

/// Calls issued, by role, plus failures, re-asks and tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCounts {
    pub solution: u32,
    pub verification: u32,
    pub summary: u32,
    pub experience: u32,
    pub guideline: u32,
    /// Self-Refine's feedback calls.
    #[serde(default)]
    pub critique: u32,
    /// RSE's extraction calls.
    #[serde(default)]
    pub extraction: u32,
    /// Embeddings calls of the banks (`method.rse_dedup` or `method.bank_dedup` = `"embeddings"`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub embedding: u32,
    /// Calls that returned `Err` (after the client's retries).
    pub failed: u32,
    /// Re-asks after unparseable replies (included in the per-role counts).
    pub reasked: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The part of `prompt_tokens` (`completion_tokens`) estimated from text lengths
    /// because the server reported no usage for those calls.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated_prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub estimated_completion_tokens: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

impl CallCounts {
    /// Counts one call of `role` (the judges' calls are the evaluation's, counted apart
    /// from the method's).
    pub fn count(&mut self, role: Role) {
        let c = self;
        match role {
            Role::Solution => c.solution += 1,
            Role::Verification => c.verification += 1,
            Role::Summary => c.summary += 1,
            Role::Experience => c.experience += 1,
            Role::Guideline => c.guideline += 1,
            Role::Critique => c.critique += 1,
            Role::Extraction => c.extraction += 1,
            Role::Embedding => c.embedding += 1,
            Role::Judge | Role::GuidelineJudge => {}
        }
    }

    /// The calls of `role` counted (0 for the judges, which are not the method's).
    pub fn of(&self, role: Role) -> u32 {
        match role {
            Role::Solution => self.solution,
            Role::Verification => self.verification,
            Role::Summary => self.summary,
            Role::Experience => self.experience,
            Role::Guideline => self.guideline,
            Role::Critique => self.critique,
            Role::Extraction => self.extraction,
            Role::Embedding => self.embedding,
            Role::Judge | Role::GuidelineJudge => 0,
        }
    }

    /// Adds one answered call's tokens, keeping count of the estimated ones.
    pub fn add_tokens(&mut self, t: CallTokens) {
        self.prompt_tokens += t.prompt;
        self.completion_tokens += t.completion;
        if t.prompt_estimated {
            self.estimated_prompt_tokens += t.prompt;
        }
        if t.completion_estimated {
            self.estimated_completion_tokens += t.completion;
        }
    }

    pub fn total(&self) -> u32 {
        self.solution
            + self.verification
            + self.summary
            + self.experience
            + self.guideline
            + self.critique
            + self.extraction
            + self.embedding
    }

    pub fn add(&mut self, other: &CallCounts) {
        self.solution += other.solution;
        self.verification += other.verification;
        self.summary += other.summary;
        self.experience += other.experience;
        self.guideline += other.guideline;
        self.critique += other.critique;
        self.extraction += other.extraction;
        self.embedding += other.embedding;
        self.failed += other.failed;
        self.reasked += other.reasked;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.estimated_prompt_tokens += other.estimated_prompt_tokens;
        self.estimated_completion_tokens += other.estimated_completion_tokens;
    }
}

/// Calls that returned and their tokens, for one role (server `usage`; tokens estimated
/// from the texts when a server reports none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleTokens {
    pub calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl RoleTokens {
    pub fn add(&mut self, prompt_tokens: u64, completion_tokens: u64) {
        self.calls += 1;
        self.prompt_tokens += prompt_tokens;
        self.completion_tokens += completion_tokens;
    }
}

/// One iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationResult {
    pub iteration: u32,
    /// All N candidates, including failed ones, by index.
    pub candidates: Vec<CandidateResult>,
    /// Candidate with the highest average score (ties: lowest index; unscored candidates
    /// rank last). `None` only when every solution call failed.
    pub best: Option<u32>,
    /// Every solution failed: no bank update, the previous rollouts stay.
    pub skipped: bool,
    pub bank_updates: Vec<BankUpdateRecord>,
    pub calls: CallCounts,
    /// Tokens by role (the equal-budget accounting of `tmas experiment report`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tokens_by_role: std::collections::BTreeMap<Arc<str>, RoleTokens>,
    pub failures: Vec<FailureRecord>,
}

impl IterationResult {
    /// A call of the iteration was refused or cut because this process stopped (not
    /// because an endpoint failed it): the iteration is not what it will be once a resume
    /// makes that call.
    pub fn cut_by_stop(&self) -> bool {
        self.failures
            .iter()
            .any(|f| matches!(f.kind, FailureRecordKind::Call(kind) if kind.is_transient()))
    }
}

/// Told each iteration of a problem as the strategy completes it, while its texts are all
/// in memory (the engine judges it then, beside the method's later iterations). It only
/// looks: nothing it does reaches the strategy, so what the method calls and returns is
/// the same with or without one. Called on the coordinator's task, so it must not block.
pub trait IterationWatcher: Send + Sync + 'static {
    fn iteration_done(&self, problem: &ProblemInput, iteration: &IterationResult);
}

/// Which text of a candidate a [`TextRef`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Solution,
    Summary,
    /// The text of the verification at this position of the candidate's list.
    Verification(usize),
}

/// A text held elsewhere than in the outcome: (position of the iteration in
/// `TmasOutcome::iterations`, position of the candidate in its `candidates`, the field,
/// the key of the call whose reply, think-stripped, is the text). Stored as a JSON array,
/// e.g. `[0,3,"solution","p/it0/solution/c3/a0"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextRef(pub usize, pub usize, pub Field, pub String);

/// The text field `r` names in `iterations` (`None` when there is no such candidate or
/// slot).
pub fn text_mut<'a>(
    iterations: &'a mut [IterationResult],
    r: &TextRef,
) -> Option<&'a mut Option<Arc<str>>> {
    let TextRef(t, c, field, _) = r;
    let candidate = iterations.get_mut(*t)?.candidates.get_mut(*c)?;
    Some(match field {
        Field::Solution => &mut candidate.solution,
        Field::Summary => &mut candidate.summary,
        Field::Verification(v) => &mut candidate.verifications.get_mut(*v)?.text,
    })
}

/// Why the strategy stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum StopReason {
    /// All T iterations ran.
    Completed,
    /// `early_stop` was on and this candidate was fully verified.
    FullyVerified { iteration: u32, candidate: u32 },
    /// `finish` was called before the strategy finished (e.g. the run was shut down);
    /// only completed iterations are reported.
    Unfinished,
}

/// The outcome of one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TmasOutcome {
    pub problem: ProblemInput,
    pub iterations: Vec<IterationResult>,
    pub stop: StopReason,
    /// Banks as they stand at the end.
    pub experience: Vec<String>,
    pub guidelines: Vec<String>,
    pub calls: CallCounts,
    /// Texts the strategy let go while the problem ran (`TmasParams::release_texts`):
    /// those fields are `None` here and the run store holds each as the reply of the
    /// call named. Whoever reads the outcome puts them back first (the engine does before
    /// judging); never serialized, so a record on disk always has its texts or its own
    /// references (`problems.record_texts`).
    #[serde(skip)]
    pub released: Vec<TextRef>,
}

impl TmasOutcome {
    /// The text field `r` names (`None` when the outcome has no such candidate or slot).
    pub fn text_mut(&mut self, r: &TextRef) -> Option<&mut Option<Arc<str>>> {
        text_mut(&mut self.iterations, r)
    }

    /// The best candidate of each iteration (for per-iteration curves).
    pub fn best_per_iteration(&self) -> Vec<Option<&CandidateResult>> {
        self.iterations
            .iter()
            .map(|it| it.best.and_then(|b| it.candidates.get(b as usize)))
            .collect()
    }
}

/// The paper's "solved" test: at least M−2 scores (all M when `strict`), every one 1.0.
/// Needs at least one score, so M ≤ 2 with every verification lost is not "verified"
/// (the released code's `all([])` would say it is).
pub fn is_fully_verified(scores: &[f64], m: usize, strict: bool) -> bool {
    if m == 0 || scores.is_empty() {
        return false;
    }
    let needed = if strict {
        m
    } else {
        m.saturating_sub(2).max(1)
    };
    scores.len() >= needed && scores.iter().all(|s| *s == 1.0)
}

/// The tokens of one answered call and which of them are estimates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTokens {
    pub prompt: u64,
    pub completion: u64,
    /// The server reported no prompt (completion) tokens: the figure is estimated.
    pub prompt_estimated: bool,
    pub completion_estimated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fully_verified_m_minus_two_rule() {
        assert!(is_fully_verified(&[1.0; 8], 8, false));
        assert!(is_fully_verified(&[1.0; 6], 8, false));
        assert!(!is_fully_verified(&[1.0; 5], 8, false));
        assert!(!is_fully_verified(
            &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5],
            8,
            false
        ));
        assert!(!is_fully_verified(&[], 8, false));
        assert!(!is_fully_verified(&[], 0, false));
        assert!(is_fully_verified(&[1.0], 2, false));
        assert!(!is_fully_verified(&[], 2, false));
    }

    #[test]
    fn a_recorded_failure_kind_is_one_name_and_reads_back_as_written() {
        let replies = [
            (UnusableReply::UnparseableScore, "unparseable_score"),
            (UnusableReply::UnparseableJson, "unparseable_json"),
            (UnusableReply::EmptySummary, "empty_summary"),
        ];
        for (why, name) in replies {
            let kind = FailureRecordKind::from(why);
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            let back: FailureRecordKind = serde_json::from_value(name.into()).unwrap();
            assert_eq!(back, kind);
        }
        for call in FailureKind::ALL {
            let kind = FailureRecordKind::from(call);
            assert_eq!(serde_json::to_value(kind).unwrap(), call.as_str());
            let back: FailureRecordKind = serde_json::from_value(call.as_str().into()).unwrap();
            assert_eq!(back, kind, "{call}");
        }
        let newer: FailureRecordKind = serde_json::from_value("overheated".into()).unwrap();
        assert_eq!(newer, FailureKind::Unknown.into());
    }

    #[test]
    fn fully_verified_strict_needs_all() {
        assert!(!is_fully_verified(&[1.0; 6], 8, true));
        assert!(!is_fully_verified(&[1.0; 7], 8, true));
        assert!(is_fully_verified(&[1.0; 8], 8, true));
        assert!(!is_fully_verified(
            &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
            8,
            true
        ));
    }
}
