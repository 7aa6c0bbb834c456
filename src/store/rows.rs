//! What the engine hands the store writer: one variant per kind of fact.

use std::sync::Arc;

use tmas_actors::strategy::{BankVersion, CallKey, CallOutcome};
use tmas_client::wire::ModelRequest;
use tokio::sync::oneshot;

use crate::eval::judge::JudgeRecord;
use crate::method::result::{Branch, CandidateStatus, PromptMode};
use crate::record::ProblemRecord;

/// One finished model call (success or a failure after the client's retries).
#[derive(Debug, Clone)]
pub struct CallRow {
    pub key: CallKey,
    /// `key` in display form: the primary key of `calls`.
    pub key_text: Arc<str>,
    pub group: Arc<str>,
    /// What was asked: a chat request (messages, sampling, streaming) or an embeddings
    /// request (its inputs).
    pub request: ModelRequest,
    pub outcome: CallOutcome,
    /// When the call was asked of the store's executor (before any wait for a slot:
    /// `completed_at_ms - latency_ms - asked_at_ms` is the time it waited to be sent).
    pub asked_at_ms: i64,
    pub completed_at_ms: i64,
}

/// A problem of the run's dataset selection, in dataset order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemRow {
    pub problem_id: String,
    pub ordinal: i64,
    pub question: String,
    pub reference_answer: String,
    /// Proof problems: the dataset's reference proof and grading guidelines, which the
    /// proof grader needs again when a resumed run judges the problem.
    pub reference_solution: Option<String>,
    pub grading_guidelines: Option<String>,
}

/// A status change of one problem (`pending`, `done`, `failed`).
#[derive(Debug, Clone)]
pub struct StatusRow {
    pub problem_id: String,
    pub status: &'static str,
    pub error: Option<String>,
}

/// One judged iteration of a problem, stored as soon as its judging ends, before the
/// problem is done: the `candidates` and `judge_verdicts` rows of that iteration, which
/// replace any the store held for it. So an interrupted run keeps every iteration it
/// judged (its tables and exports count them), and a resume that judges the iteration
/// again (replaying its judge calls) writes the same rows over them.
#[derive(Debug, Clone)]
pub struct JudgedIterationRows {
    pub problem_id: Arc<str>,
    pub iteration: u32,
    /// The iteration's candidates, by index (no texts: `calls` holds them).
    pub candidates: Vec<CandidateRow>,
    /// `judgments[i]` of `candidates[i]` (`None`: its solution call failed).
    pub judgments: Vec<Option<JudgeRecord>>,
}

/// A `candidates` row (what the table keeps of a candidate, without its texts).
#[derive(Debug, Clone)]
pub struct CandidateRow {
    pub index: u32,
    pub branch: Branch,
    pub mode: PromptMode,
    pub status: CandidateStatus,
    pub scores: Vec<f64>,
    pub average_score: Option<f64>,
    pub fully_verified: bool,
}

impl CandidateRow {
    pub fn of(c: &crate::method::CandidateResult) -> Self {
        Self {
            index: c.index,
            branch: c.branch,
            mode: c.mode,
            status: c.status,
            scores: c.scores.clone(),
            average_score: c.average_score,
            fully_verified: c.fully_verified,
        }
    }
}

/// A write request; `Done` carries the judged problem, which the writer spreads over
/// `candidates`, `verifications`, `summaries`, `judge_verdicts` and `problems`.
#[derive(Debug)]
pub enum Fact {
    Call(Box<CallRow>),
    Bank {
        problem_id: String,
        iteration: Option<u32>,
        version: BankVersion,
    },
    Problems(Vec<ProblemRow>),
    Status(StatusRow),
    /// A judged problem and the iteration count T it was run with. The writer stores it
    /// as `problems.record_json` without the texts its calls hold
    /// ([`super::record_texts`]) and spreads it over the per-candidate tables; `record`
    /// is shared with the engine, which writes the run directory's files, not copied.
    Done {
        record: Arc<ProblemRecord>,
        iterations: u32,
    },
    /// A judged iteration of a problem not yet done ([`JudgedIterationRows`]).
    Judged(Box<JudgedIterationRows>),
    Meta(Vec<(String, String)>),
    /// The trace holding a problem's spans in this session (`super::traces`).
    Trace {
        problem_id: Arc<str>,
        trace_id: String,
        at_ms: i64,
    },
    /// Calls stored as failures by an earlier session that a resumed problem no longer
    /// makes (its path changed once the failed calls were answered): nothing rests on them
    /// any more, so they leave the store and its failure accounting. Only rows still
    /// failures are removed.
    DropFailedCalls(Vec<Arc<str>>),
    /// Nothing to write: the acknowledgement says everything sent before it is committed.
    Flush,
    /// Commit, checkpoint the WAL into the main file and stop the writer.
    Close,
}

/// Why the store could not commit a batch (shared by every fact of that batch).
pub type WriteResult = Result<(), Arc<str>>;

/// A fact and, optionally, who waits for its commit.
#[derive(Debug)]
pub struct Envelope {
    pub fact: Fact,
    pub ack: Option<oneshot::Sender<WriteResult>>,
}

/// Hex SHA-256 of a text (the digest of the prompt templates in `meta`; prompts in the
/// store are keyed by [`super::chunks::prompt_id`] instead).
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn one_message_is_stored_verbatim_several_as_json() {
        use tmas_client::wire::{ChatMessage, prompt_text};
        let one = [ChatMessage::user("hi")];
        assert_eq!(&*prompt_text(&one), "hi");
        let two = [ChatMessage::system("s"), ChatMessage::user("u")];
        let text = prompt_text(&two);
        assert!(
            text.starts_with('[') && text.contains("\"system\""),
            "{text}"
        );
    }
}
