//! Failure accounting: which calls were lost (by role, endpoint and error kind, and per
//! iteration) and what that made of each problem — `complete` (every call answered),
//! `degraded` (the method went on without some calls) or `failed` (no result: the problem
//! stopped with an error, or not one of its calls was answered).
//!
//! Built from the run store at the end of every run (and by `tmas report`), so it covers
//! every session of a resumed run and says what the stored results rest on now: a call a
//! resume sent again and got answered is no longer lost.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use tmas_client::failure::FailureKind;

use crate::store::StoredProblem;
use crate::store::export::is_unfinished;
use crate::store::read::LostCallsRow;

use crate::record::FailedProblem;

/// Failed calls of one role on one endpoint with one error kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostCalls {
    pub role: String,
    /// The endpoint whose answer failed the call; `None` when no endpoint answered (an
    /// outage of the whole group).
    pub endpoint: Option<String>,
    pub kind: FailureKind,
    pub calls: u64,
    /// One of the errors, as the client reported it (status and the server's body).
    pub example: String,
}

/// How a problem's calls went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemState {
    /// Finished with every call answered.
    Complete,
    /// Finished, but the method went on without some calls.
    Degraded,
    /// No result: the problem stopped with an error, or none of its calls was answered.
    Failed,
    /// Not finished yet (the run was stopped); a resume runs it.
    Unfinished,
}

/// The run's failure accounting (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounting {
    /// Calls answered and calls lost (failed after the client's retries), over the store.
    pub calls_answered: u64,
    pub calls_lost: u64,
    /// Lost calls by role, endpoint and kind (largest first).
    pub lost: Vec<LostCalls>,
    /// Lost calls per iteration (index = iteration).
    pub lost_by_iteration: Vec<u64>,
    pub problems_complete: usize,
    /// Ids of degraded problems, in dataset order.
    pub problems_degraded: Vec<String>,
    /// Problems without a result, in dataset order.
    pub problems_failed: Vec<FailedProblem>,
    pub problems_unfinished: usize,
    /// The LLM judge's calls and the verdicts they gave (`judge.reuse`).
    #[serde(default)]
    pub judge: JudgeUse,
}

/// How many LLM judge calls were sent and how many verdicts the judged candidates hold:
/// with `judge.reuse` a question several candidates ask is sent once (R times) and its
/// verdicts serve them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeUse {
    pub calls: u64,
    pub verdicts: u64,
}

impl JudgeUse {
    /// Verdicts that came from a question another candidate asked: calls not sent.
    pub fn reused(&self) -> u64 {
        self.verdicts.saturating_sub(self.calls)
    }

    /// The line of the run's summary; `None` without an LLM judge.
    pub fn line(&self) -> Option<String> {
        (self.calls > 0 || self.verdicts > 0).then(|| {
            format!(
                "judge: {} sent for {} of the candidates ({} reused from a question already asked)",
                crate::text::count(self.calls, "call"),
                crate::text::count(self.verdicts, "verdict"),
                self.reused()
            )
        })
    }
}

impl Accounting {
    /// The accounting of `problems` (the stored selection) from their lost-call rows and
    /// answered-call counts.
    pub fn build(
        problems: &[StoredProblem],
        lost_rows: &[LostCallsRow],
        answered: &BTreeMap<String, u64>,
        iterations: usize,
    ) -> Self {
        let mut out = Accounting {
            calls_answered: answered.values().sum(),
            lost_by_iteration: vec![0; iterations],
            ..Accounting::default()
        };
        // Keyed by the kind's name: groups of equal size are listed in name order.
        let mut by_group: BTreeMap<(String, Option<String>, &'static str), LostCalls> =
            BTreeMap::new();
        let mut lost_of: HashMap<&str, (u64, &str)> = HashMap::new();
        for row in lost_rows {
            out.calls_lost += row.calls;
            let slot = row.iteration as usize;
            if slot >= out.lost_by_iteration.len() {
                out.lost_by_iteration.resize(slot + 1, 0);
            }
            out.lost_by_iteration[slot] += row.calls;
            let group = by_group
                .entry((row.role.clone(), row.endpoint.clone(), row.kind.as_str()))
                .or_insert_with(|| LostCalls {
                    role: row.role.clone(),
                    endpoint: row.endpoint.clone(),
                    kind: row.kind,
                    calls: 0,
                    example: row.example.clone(),
                });
            group.calls += row.calls;
            let problem = lost_of
                .entry(row.problem_id.as_str())
                .or_insert((0, row.example.as_str()));
            problem.0 += row.calls;
        }
        out.lost = by_group.into_values().collect();
        out.lost.sort_by_key(|l| std::cmp::Reverse(l.calls));
        for p in problems {
            let lost = lost_of.get(p.problem_id.as_str()).copied();
            let answered = answered.get(&p.problem_id).copied().unwrap_or(0);
            match classify(p, lost.map_or(0, |l| l.0), answered, iterations) {
                ProblemState::Complete => out.problems_complete += 1,
                ProblemState::Degraded => out.problems_degraded.push(p.problem_id.clone()),
                ProblemState::Unfinished => out.problems_unfinished += 1,
                ProblemState::Failed => out.problems_failed.push(FailedProblem {
                    problem_id: p.problem_id.clone(),
                    error: match (&p.error, lost) {
                        (Some(error), _) => error.clone(),
                        (None, Some((n, example))) => {
                            format!("all {n} of its calls failed; one of them: {example}")
                        }
                        (None, None) => "no call of it was answered".into(),
                    },
                }),
            }
        }
        out
    }

    /// Every call answered and every problem complete.
    pub fn is_clean(&self) -> bool {
        self.calls_lost == 0 && self.problems_degraded.is_empty() && self.problems_failed.is_empty()
    }

    /// Lines for the end of a run and `tmas report`: the problems' states, then the lost
    /// calls by role, endpoint and kind. Never "0 failed" when calls were lost.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let total = self.calls_answered + self.calls_lost;
        let mut states = Vec::new();
        if self.problems_complete > 0 {
            states.push(format!("{} complete", self.problems_complete));
        }
        if !self.problems_degraded.is_empty() {
            states.push(format!(
                "{} degraded (finished without some calls)",
                self.problems_degraded.len()
            ));
        }
        if !self.problems_failed.is_empty() {
            states.push(format!("{} failed (no result)", self.problems_failed.len()));
        }
        if self.problems_unfinished > 0 {
            states.push(format!("{} unfinished", self.problems_unfinished));
        }
        let _ = writeln!(out, "problems: {}", states.join(", "));
        if let Some(line) = self.judge.line() {
            let _ = writeln!(out, "{line}");
        }
        if self.calls_lost == 0 {
            let _ = writeln!(out, "calls: all {total} answered");
            return out;
        }
        if self.calls_answered == 0 {
            let _ = writeln!(
                out,
                "calls: every one of the {total} calls failed, none was answered"
            );
        } else {
            let _ = writeln!(
                out,
                "calls: {} of {total} lost ({} answered)",
                self.calls_lost, self.calls_answered
            );
        }
        let _ = writeln!(out, "calls lost by role, endpoint and error kind:");
        for l in &self.lost {
            let _ = writeln!(
                out,
                "  {:<13} {:<16} {:<16} {:>7}  e.g. {}",
                l.role,
                l.endpoint.as_deref().unwrap_or("(none)"),
                l.kind.as_str(),
                l.calls,
                clip(&l.example, 160)
            );
        }
        let endpoints: u64 = self.lost_where(FailureKind::counts_against_endpoint);
        let refused: u64 = self.lost_where(FailureKind::is_permanent);
        if endpoints > 0 {
            let _ = writeln!(
                out,
                "  {endpoints} of them failed at the endpoints (no answer in time, cut off, unreadable or an error status): see the endpoints' health and limits"
            );
        }
        if refused > 0 {
            let _ = writeln!(
                out,
                "  {refused} of them were refused for good (a rejected key, a wrong URL or model, a request the endpoint will not take): fix the config or prompts, sending them again cannot help"
            );
        }
        out
    }

    /// Lost calls whose kind satisfies `rule`.
    fn lost_where(&self, rule: fn(FailureKind) -> bool) -> u64 {
        self.lost
            .iter()
            .filter(|l| rule(l.kind))
            .map(|l| l.calls)
            .sum()
    }
}

/// A problem's state from its stored status and its calls.
fn classify(problem: &StoredProblem, lost: u64, answered: u64, iterations: usize) -> ProblemState {
    // Done to a smaller T before the run was extended: its new iterations are to come.
    if problem.status == "done" && is_unfinished(problem, iterations) {
        return ProblemState::Unfinished;
    }
    match problem.status.as_str() {
        "failed" => ProblemState::Failed,
        "done" if answered == 0 => ProblemState::Failed,
        "done" if lost > 0 => ProblemState::Degraded,
        "done" => ProblemState::Complete,
        _ => ProblemState::Unfinished,
    }
}

fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    match one_line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(id: &str, status: &str) -> StoredProblem {
        StoredProblem {
            problem_id: id.into(),
            ordinal: 0,
            question: String::new(),
            reference_answer: "1".into(),
            reference_solution: None,
            grading_guidelines: None,
            status: status.into(),
            iterations: None,
            error: None,
        }
    }

    fn lost(
        problem: &str,
        iteration: u32,
        role: &str,
        kind: FailureKind,
        calls: u64,
    ) -> LostCallsRow {
        LostCallsRow {
            problem_id: problem.into(),
            iteration,
            role: role.into(),
            endpoint: Some("gpu".into()),
            kind,
            calls,
            example: format!("endpoint `gpu`: {kind}"),
        }
    }

    #[test]
    fn classifies_problems_and_groups_lost_calls() {
        let problems = [
            problem("a", "done"),
            problem("b", "done"),
            problem("c", "done"),
            problem("d", "pending"),
            problem("e", "failed"),
        ];
        let rows = [
            lost("b", 0, "verification", FailureKind::Timeout, 2),
            lost("b", 1, "verification", FailureKind::Timeout, 1),
            lost("c", 1, "solution", FailureKind::Permanent, 4),
        ];
        let answered = BTreeMap::from([("a".to_string(), 10), ("b".to_string(), 7)]);
        let acc = Accounting::build(&problems, &rows, &answered, 2);
        assert_eq!(acc.calls_answered, 17);
        assert_eq!(acc.calls_lost, 7);
        assert_eq!(acc.lost_by_iteration, vec![2, 5]);
        assert_eq!(acc.problems_complete, 1);
        assert_eq!(acc.problems_degraded, vec!["b".to_string()]);
        let failed: Vec<_> = acc
            .problems_failed
            .iter()
            .map(|f| f.problem_id.as_str())
            .collect();
        assert_eq!(failed, ["c", "e"], "c: not one call answered");
        assert!(
            acc.problems_failed[0]
                .error
                .contains("all 4 of its calls failed")
        );
        assert_eq!(acc.problems_unfinished, 1);
        assert_eq!(acc.lost[0].kind, FailureKind::Permanent);
        assert_eq!(acc.lost[0].calls, 4);
        assert_eq!(acc.lost[1].calls, 3);
        assert!(!acc.is_clean());
        let text = acc.render_text();
        assert!(text.contains("1 complete, 1 degraded"), "{text}");
        assert!(text.contains("7 of 24 lost"), "{text}");
        assert!(
            text.contains("verification") && text.contains("timeout"),
            "{text}"
        );
        // The kinds say what to do: the timeouts were the endpoint's, the 4 permanent
        // refusals need a fix before anything is sent again.
        assert!(text.contains("3 of them failed at the endpoints"), "{text}");
        assert!(text.contains("4 of them were refused for good"), "{text}");
    }

    #[test]
    fn lost_calls_of_a_shutdown_are_neither_the_endpoints_nor_refused() {
        let problems = [problem("a", "done")];
        let rows = [lost("a", 0, "solution", FailureKind::Shutdown, 2)];
        let answered = BTreeMap::from([("a".to_string(), 5)]);
        let text = Accounting::build(&problems, &rows, &answered, 1).render_text();
        assert!(text.contains("2 of 7 lost"), "{text}");
        assert!(!text.contains("of them"), "{text}");
    }

    #[test]
    fn a_problem_done_before_the_run_was_extended_is_unfinished() {
        let mut short = problem("a", "done");
        short.iterations = Some(2);
        let mut long = problem("b", "done");
        long.iterations = Some(4);
        let answered = BTreeMap::from([("a".to_string(), 5), ("b".to_string(), 9)]);
        let acc = Accounting::build(&[short, long], &[], &answered, 4);
        assert_eq!(acc.problems_unfinished, 1);
        assert_eq!(acc.problems_complete, 1);
    }

    #[test]
    fn every_call_failed_never_reads_as_zero_failed() {
        let problems = [problem("a", "done"), problem("b", "done")];
        let rows = [
            lost("a", 0, "solution", FailureKind::Permanent, 3),
            lost("b", 0, "solution", FailureKind::Permanent, 3),
        ];
        let acc = Accounting::build(&problems, &rows, &BTreeMap::new(), 1);
        let text = acc.render_text();
        assert!(!text.contains("0 failed"), "{text}");
        assert!(text.contains("2 failed"), "{text}");
        assert!(text.contains("every one of the 6 calls failed"), "{text}");
    }

    #[test]
    fn a_clean_run_says_so() {
        let problems = [problem("a", "done")];
        let answered = BTreeMap::from([("a".to_string(), 5)]);
        let acc = Accounting::build(&problems, &[], &answered, 1);
        assert!(acc.is_clean());
        assert_eq!(
            acc.render_text(),
            "problems: 1 complete\ncalls: all 5 answered\n"
        );
    }
}
