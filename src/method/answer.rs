//! The text rule: what of a model's reply counts (its visible text) and which final answer
//! it gives (its last box). Defined once, here, and read by everything that looks at a
//! reply: the strategies (candidate solutions, verification scores, majority vote), the
//! judge (rule check, LLM verdicts, what the LLM judge is shown, proof grades), the RL
//! rewards and the analyses. So the answer a method votes for or selects and the answer
//! the judge scores are the same answer for the same reply. It lives in `method` because
//! that is the lowest layer that reads replies; `eval` and everything above import it.
//!
//! **Visible text** ([`strip_think`]): a `<think>` opens a block that ends at the next
//! `</think>`, and every block is removed; a block never closed removes everything from
//! its `<think>` on (the output was cut off while thinking); a `</think>` outside any block
//! ends reasoning whose opening tag was dropped (some servers strip it), so everything
//! before it is removed too. The rest is trimmed. Text before, between and after blocks is
//! kept: a model that answers, thinks again and then confirms has still written its answer
//! (and a proof written between think blocks is the proof the grader reads). Visible text
//! has no tag left (short of one spelled across a removed block), so it is its own
//! visible text: a stored solution judged later gives the answer its reply gave.
//!
//! **Final answer** ([`last_boxed`], [`final_answer`]): the trimmed argument of the last
//! `\boxed{…}` or `\fbox{…}` (also `\boxed {…}`) of the visible text. Nested braces count;
//! `\{` and `\}` are literal braces. There is no final answer when there is no box, when
//! the box is empty, or when the last box is never closed.
//!
//! Why a cut-off last box is *no* answer rather than the previous complete box: output
//! that stops inside `\boxed{` was cut off (the token limit) while the model was writing
//! its final answer, so that answer is unknown. The box before it is one the model went
//! on past — a trial value, an intermediate step, or an answer it was about to restate or
//! revise — and counting it would credit an answer the model did not commit to and make a
//! truncated reply look like a finished one. The same holds for an output cut off while
//! thinking, which has no visible text at all. A verification reply cut off in its score
//! box is therefore unparseable (and re-asked), not scored with an earlier box.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use memchr::memmem::Finder;
use tmas_equivalence::matching_brace;

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// The commands whose argument is a final answer.
const BOX_COMMANDS: [&str; 2] = ["\\boxed", "\\fbox"];

/// The visible text of a reply (see the module documentation): think blocks removed, an
/// unclosed `<think>` with everything after it, and everything up to a `</think>` outside
/// any block; trimmed. Borrowed unless text on both sides of a removed block is kept.
pub fn strip_think(text: &str) -> Cow<'_, str> {
    let mut kept = Kept::Nothing;
    let mut pos = 0;
    let mut open = find_from(text, 0, &OPEN);
    let mut close = find_from(text, 0, &CLOSE);
    loop {
        match (close, open) {
            // A closing tag outside any block: everything up to it was reasoning.
            (Some(c), _) if open.is_none_or(|o| c < o) => {
                kept = Kept::Nothing;
                pos = c + THINK_CLOSE.len();
                close = find_from(text, pos, &CLOSE);
            }
            // A block (the tags cannot start at one offset, so `close` is after `o`).
            (_, Some(o)) => {
                kept.push(text, pos..o);
                let Some(c) = close else {
                    // Never closed: cut off while thinking.
                    break;
                };
                pos = c + THINK_CLOSE.len();
                open = find_from(text, pos, &OPEN);
                close = find_from(text, pos, &CLOSE);
            }
            (_, None) => {
                kept.push(text, pos..text.len());
                break;
            }
        }
    }
    kept.trimmed(text)
}

/// The visible text as [`strip_think`] collects it: one stretch of the reply (the common
/// case: nothing, or everything after a leading think block) is borrowed; only text from
/// both sides of a removed block is copied.
enum Kept {
    Nothing,
    Stretch(std::ops::Range<usize>),
    Joined(String),
}

impl Kept {
    fn push(&mut self, text: &str, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        *self = match std::mem::replace(self, Kept::Nothing) {
            Kept::Nothing => Kept::Stretch(range),
            Kept::Stretch(first) => Kept::Joined(text[first].to_owned() + &text[range]),
            Kept::Joined(mut joined) => {
                joined.push_str(&text[range]);
                Kept::Joined(joined)
            }
        };
    }

    fn trimmed(self, text: &str) -> Cow<'_, str> {
        match self {
            Kept::Nothing => Cow::Borrowed(""),
            Kept::Stretch(range) => Cow::Borrowed(text[range].trim()),
            Kept::Joined(joined) => {
                let trimmed = joined.trim();
                if trimmed.len() == joined.len() {
                    Cow::Owned(joined)
                } else {
                    Cow::Owned(trimmed.to_owned())
                }
            }
        }
    }
}

/// [`strip_think`] of a reply, as a shared text: the reply itself when there is nothing to
/// remove (no reasoning inline, no surrounding whitespace: the common case with a
/// reasoning parser on the endpoint), else a copy. A 40 KB solution is then one
/// allocation for the reply and the candidate that quotes it, and the run store
/// recognises a record's text as a call's reply by that allocation instead of reading
/// the reply back (`crate::store::record_texts`).
pub fn visible_text(reply: &Arc<str>) -> Arc<str> {
    match strip_think(reply) {
        Cow::Borrowed(text) if text.len() == reply.len() => reply.clone(),
        other => other.as_ref().into(),
    }
}

/// The final answer of a reply: [`last_boxed`] of its visible text.
pub fn final_answer(reply: &str) -> Option<String> {
    last_boxed(&strip_think(reply)).map(str::to_owned)
}

/// The trimmed argument of the last `\boxed{…}` / `\fbox{…}` of `text` (no think
/// stripping): `None` when there is no box, when the last one is never closed (see the
/// module documentation for why an earlier box is not taken instead), or when it is empty.
pub fn last_boxed(text: &str) -> Option<&str> {
    let start = last_box_argument_start(text)?;
    let end = matching_brace(text, start)?;
    let content = text[start + 1..end].trim();
    (!content.is_empty()).then_some(content)
}

/// The think tags' searchers, built once. Every candidate's 40 KB solution is searched
/// when it is stored and again when it is judged, so this is memchr's SIMD search, not
/// `str::find`, whose two-way search was ~1 % of the orchestrator's CPU samples and ~4 %
/// of `tmas bench eval`'s instructions (docs/performance-log.md).
static OPEN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(THINK_OPEN));
static CLOSE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(THINK_CLOSE));

/// Byte offset of the first `tag` in `text` at or after `from`. Both tags are ASCII, so a
/// match starts and ends on a character boundary.
fn find_from(text: &str, from: usize, tag: &Finder<'_>) -> Option<usize> {
    tag.find(&text.as_bytes()[from..]).map(|at| from + at)
}

/// Byte index of the `{` opening the argument of the last box command in `text`.
/// Occurrences that are a prefix of another command (`\boxedsymbol`) or have no braced
/// argument are not boxes and are passed over. memchr's forward searchers (built once)
/// find every occurrence — no command can overlap itself — and the last is kept: its
/// reverse search is not vectorised. The commands are ASCII, so every match is on a
/// character boundary.
fn last_box_argument_start(text: &str) -> Option<usize> {
    static FINDERS: LazyLock<[Finder<'static>; 2]> =
        LazyLock::new(|| BOX_COMMANDS.map(Finder::new));
    FINDERS
        .iter()
        .filter_map(|finder| {
            let command = finder.needle().len();
            finder
                .find_iter(text.as_bytes())
                .filter_map(|pos| {
                    let after = pos + command;
                    let rest = &text[after..];
                    let trimmed = rest.trim_start();
                    trimmed
                        .starts_with('{')
                        .then(|| after + (rest.len() - trimmed.len()))
                })
                .last()
        })
        .max()
}

#[cfg(test)]
mod tests;
