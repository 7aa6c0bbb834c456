//! Labelled answer pairs for auditing the rule check (`tmas judge --pairs FILE.jsonl`):
//! reading the JSONL, judging each pair, and scoring verdicts against the labels by answer
//! type.
//!
//! Scoring follows how a run scores a candidate without an LLM judge: only `Equivalent`
//! counts as "judged equivalent"; `Undecided` counts as "not equivalent" and is also
//! reported on its own, so a check that says `Undecided` everywhere cannot look good.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::eval::equivalence::{self, Outcome, Verdict};

/// One line of a pairs file. Only `reference` and `candidate` are required.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Pair {
    pub reference: String,
    pub candidate: String,
    /// The expected label (true: equivalent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equivalent: Option<bool>,
    /// Answer type for the per-type report (`integer`, `set`, `prose`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_type: Option<String>,
    /// The question, for the LLM judge's prompt (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem_id: Option<String>,
    /// What the candidate is (`reordered_set`, `off_by_one`, …), free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A pairs file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PairsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: no pairs")]
    Empty { path: String },
}

/// Parses JSONL text; `path` only names the source in errors. Blank lines are skipped.
pub fn parse_pairs(path: &str, text: &str) -> Result<Vec<(usize, Pair)>, PairsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut de = serde_json::Deserializer::from_str(line);
        let pair: Pair = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let message = if field == "." {
                e.inner().to_string()
            } else {
                format!("field \"{field}\": {}", e.inner())
            };
            PairsError::Line {
                path: path.to_owned(),
                line: i + 1,
                message,
            }
        })?;
        out.push((i + 1, pair));
    }
    if out.is_empty() {
        return Err(PairsError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(out)
}

/// Reads and parses a pairs file.
pub fn load_pairs(path: &Path) -> Result<Vec<(usize, Pair)>, PairsError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PairsError::Io {
        path: shown.clone(),
        source,
    })?;
    parse_pairs(&shown, &text)
}

/// The verdict on one pair, as written to the output JSONL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairVerdict {
    /// Line of the pairs file.
    pub line: usize,
    #[serde(flatten)]
    pub pair: Pair,
    pub verdict: Verdict,
    /// LLM judge replies (`None`: unparseable or failed); empty without `--llm`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub llm: Vec<Option<bool>>,
    /// True when the rule verdict was decided and an LLM verdict differs from it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub llm_disagrees: bool,
}

impl PairVerdict {
    /// Rule-checks one pair.
    pub fn judge(line: usize, pair: Pair) -> Self {
        let verdict = equivalence::check(&pair.reference, &pair.candidate);
        Self {
            line,
            pair,
            verdict,
            llm: Vec::new(),
            llm_disagrees: false,
        }
    }

    /// Records the LLM judge's replies and whether they contradict a decided rule verdict.
    pub fn with_llm(mut self, llm: Vec<Option<bool>>) -> Self {
        let rule = match self.verdict.outcome {
            Outcome::Equivalent => Some(true),
            Outcome::NotEquivalent => Some(false),
            Outcome::Undecided => None,
        };
        self.llm_disagrees = rule.is_some_and(|r| llm.iter().flatten().any(|&l| l != r));
        self.llm = llm;
        self
    }

    /// True when the rules said `Equivalent` (what a run without LLM judge scores 1).
    pub fn said_equivalent(&self) -> bool {
        self.verdict.outcome == Outcome::Equivalent
    }
}

/// Counts for one answer type (or the total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub pairs: usize,
    pub correct: usize,
    pub false_positives: usize,
    pub false_negatives: usize,
    pub undecided: usize,
}

impl Tally {
    pub fn accuracy(&self) -> f64 {
        if self.pairs == 0 {
            0.0
        } else {
            self.correct as f64 / self.pairs as f64
        }
    }

    fn add(&mut self, verdict: &PairVerdict, expected: bool) {
        let said = verdict.said_equivalent();
        self.pairs += 1;
        self.undecided += usize::from(verdict.verdict.outcome == Outcome::Undecided);
        match (said, expected) {
            (a, b) if a == b => self.correct += 1,
            (true, false) => self.false_positives += 1,
            _ => self.false_negatives += 1,
        }
    }
}

/// Accuracy of the rule check against the labels.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Scoreboard {
    pub by_type: BTreeMap<String, Tally>,
    pub total: Tally,
    /// Every type except `prose`.
    pub non_prose: Tally,
    /// Pairs without a label (not scored).
    pub unlabelled: usize,
}

/// Scores labelled verdicts; pairs without a type are reported as `untyped`.
pub fn score(verdicts: &[PairVerdict]) -> Scoreboard {
    let mut board = Scoreboard::default();
    for v in verdicts {
        let Some(expected) = v.pair.equivalent else {
            board.unlabelled += 1;
            continue;
        };
        let kind = v.pair.answer_type.as_deref().unwrap_or("untyped");
        board
            .by_type
            .entry(kind.to_owned())
            .or_default()
            .add(v, expected);
        board.total.add(v, expected);
        if kind != "prose" {
            board.non_prose.add(v, expected);
        }
    }
    board
}

impl Scoreboard {
    /// A fixed-width table: one row per type, then the non-prose and overall totals.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>9} {:>4} {:>4} {:>9}",
            "type", "pairs", "accuracy", "FP", "FN", "undecided"
        );
        let mut row = |name: &str, t: &Tally| {
            let _ = writeln!(
                out,
                "{:<12} {:>6} {:>8.1}% {:>4} {:>4} {:>9}",
                name,
                t.pairs,
                100.0 * t.accuracy(),
                t.false_positives,
                t.false_negatives,
                t.undecided
            );
        };
        for (name, tally) in &self.by_type {
            row(name, tally);
        }
        row("non-prose", &self.non_prose);
        row("all", &self.total);
        if self.unlabelled > 0 {
            let _ = writeln!(out, "({} unlabelled pairs not scored)", self.unlabelled);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_line_and_field() {
        let text = "{\"reference\":\"1\",\"candidate\":\"1\"}\n\n{\"reference\":1}\n";
        let err = parse_pairs("p.jsonl", text).unwrap_err().to_string();
        assert!(err.starts_with("p.jsonl:3: field \"reference\""), "{err}");
        let err = parse_pairs("p.jsonl", "not json").unwrap_err().to_string();
        assert!(err.starts_with("p.jsonl:1:"), "{err}");
        let err = parse_pairs("p.jsonl", "{\"candidate\":\"1\"}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("reference"), "{err}");
        assert!(matches!(
            parse_pairs("p.jsonl", "\n \n"),
            Err(PairsError::Empty { .. })
        ));
    }

    #[test]
    fn scoring_counts_undecided_as_not_equivalent() {
        let pair = |r: &str, c: &str, eq: bool, t: &str| Pair {
            reference: r.into(),
            candidate: c.into(),
            equivalent: Some(eq),
            answer_type: Some(t.into()),
            question: None,
            problem_id: None,
            kind: None,
        };
        let verdicts: Vec<PairVerdict> = [
            pair("3", "3", true, "integer"),
            pair("3", "4", false, "integer"),
            pair("no solutions", "none at all", true, "prose"),
            pair("odd n", "even n", false, "prose"),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, p)| PairVerdict::judge(i + 1, p))
        .collect();
        let board = score(&verdicts);
        assert_eq!(board.total.pairs, 4);
        assert_eq!(board.total.correct, 3);
        assert_eq!(board.total.false_negatives, 1);
        assert_eq!(board.non_prose.correct, 2);
        assert_eq!(board.by_type["prose"].undecided, 2);
        let text = board.render_text();
        assert!(text.contains("non-prose"), "{text}");
        let disagree = verdicts[0].clone().with_llm(vec![Some(false), None]);
        assert!(disagree.llm_disagrees);
        let agree = verdicts[2].clone().with_llm(vec![Some(false)]);
        assert!(!agree.llm_disagrees);
    }
}
