//! Evaluation: datasets, answer equivalence, the LLM judge's prompt and reply handling,
//! and Pass@1 per iteration. The final answer of a reply is [`crate::method::answer`]'s
//! rule, the one the methods vote and select with.
//!
//! Everything here is sans-IO except [`dataset::load_dataset`], which reads one file: the
//! judge module builds prompts and parses replies, the caller (the run driver) makes the
//! calls through the judge role's endpoint group. `docs/judging.md` describes the rules.
//!
//! - [`dataset`]: JSONL / CSV problem files with configurable field names and selection.
//! - [`equivalence`]: the rule-based check (normalization, exact rationals, sets, tuples,
//!   simple expressions) returning Equivalent / NotEquivalent / Undecided; the crate
//!   `tmas-equivalence` (`equivalence/`), re-exported here.
//! - [`judge`]: the LLM judge's prompt and verdict parsing, and the per-candidate
//!   [`judge::JudgeRecord`] combining rule and LLM verdicts.
//! - [`pass_at_1`]: Pass@1 per iteration as the paper defines it.
//! - [`chart`]: the Pass@1-vs-iteration chart.

pub(crate) mod analyses;
pub(crate) mod chart;
pub mod dataset;
pub use tmas_equivalence as equivalence;
pub(crate) mod hard_subset;
pub mod interval;
pub mod judge;
pub mod pass_at_1;
