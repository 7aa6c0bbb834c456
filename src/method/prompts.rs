//! Prompt templates: built-in defaults (embedded from `config/prompts/`) that a config
//! can override per template with a file path.
//!
//! A placeholder is `{name}` where `name` is one of the placeholder names below; any other
//! brace text (`\boxed{}`, `\frac{a}{b}`, JSON examples) is literal, so templates need no
//! escaping. Each template kind declares its placeholders; a template missing a required
//! one, or using one that its kind does not provide, is rejected at load time with the
//! file and placeholder named. Templates are split once into literal/placeholder segments
//! so rendering is a single pass into a pre-sized string.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tmas_client::wire::{PromptText, PromptTextBuilder};

mod kinds;

pub use crate::config::TemplateKind;

/// Why a prompt template could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("prompt template {file}: cannot read: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("prompt template {file} ({kind}): missing required placeholder {{{placeholder}}}")]
    MissingPlaceholder {
        file: String,
        kind: TemplateKind,
        placeholder: &'static str,
    },
    #[error(
        "prompt template {file} ({kind}): placeholder {{{placeholder}}} is not available in this template (available: {available})"
    )]
    UnavailablePlaceholder {
        file: String,
        kind: TemplateKind,
        placeholder: String,
        available: String,
    },
    #[error("prompt override {name:?}: no such template (known: {known})")]
    UnknownTemplate { name: String, known: String },
}

#[derive(Debug, Clone)]
enum Segment {
    Literal(Box<str>),
    /// Index into the kind's placeholder list.
    Slot(usize),
}

/// One parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    kind: TemplateKind,
    /// File name or path, for messages.
    source: String,
    /// The template as written (for code that renders it itself, e.g. the judge).
    text: Box<str>,
    segments: Vec<Segment>,
    literal_len: usize,
}

impl Template {
    /// Parses and checks `text` as a template of `kind`; `source` names it in errors.
    pub fn parse(kind: TemplateKind, source: &str, text: &str) -> Result<Self, PromptError> {
        let names = kind.placeholders();
        let mut segments = Vec::new();
        let mut seen = vec![false; names.len()];
        let mut literal = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let ident_len = after
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
                .unwrap_or(after.len());
            let ident = &after[..ident_len];
            let closes = after[ident_len..].starts_with('}');
            if ident_len == 0 || !closes || !kinds::is_placeholder_name(ident) {
                literal.push_str(&rest[..open + 1]);
                rest = after;
                continue;
            }
            let Some(slot) = names.iter().position(|(n, _)| *n == ident) else {
                return Err(PromptError::UnavailablePlaceholder {
                    file: source.to_string(),
                    kind,
                    placeholder: ident.to_string(),
                    available: kind.placeholder_list(),
                });
            };
            literal.push_str(&rest[..open]);
            if !literal.is_empty() {
                segments.push(Segment::Literal(std::mem::take(&mut literal).into()));
            }
            segments.push(Segment::Slot(slot));
            seen[slot] = true;
            rest = &after[ident_len + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal.into()));
        }
        if let Some(((missing, _), _)) = names
            .iter()
            .zip(&seen)
            .find(|((_, required), seen)| *required && !**seen)
        {
            return Err(PromptError::MissingPlaceholder {
                file: source.to_string(),
                kind,
                placeholder: missing,
            });
        }
        let literal_len = segments
            .iter()
            .map(|s| match s {
                Segment::Literal(l) => l.len(),
                Segment::Slot(_) => 0,
            })
            .sum();
        Ok(Self {
            kind,
            source: source.to_string(),
            text: text.into(),
            segments,
            literal_len,
        })
    }

    pub fn kind(&self) -> TemplateKind {
        self.kind
    }

    /// The template text as loaded.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Where the template came from (built-in file name or override path).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Fills the placeholders; `values` follow the order of `kind().placeholders()`.
    fn fill(&self, values: &[&str]) -> String {
        debug_assert_eq!(
            values.len(),
            self.kind.placeholders().len(),
            "{}",
            self.kind
        );
        let extra: usize = self
            .segments
            .iter()
            .map(|s| match s {
                Segment::Slot(i) => values.get(*i).map_or(0, |v| v.len()),
                Segment::Literal(_) => 0,
            })
            .sum();
        let mut out = String::with_capacity(self.literal_len + extra);
        for s in &self.segments {
            match s {
                Segment::Literal(l) => out.push_str(l),
                Segment::Slot(i) => out.push_str(values.get(*i).copied().unwrap_or("")),
            }
        }
        out
    }

    /// Appends the template with its placeholders filled to `out`: long shared values
    /// by reference, everything else copied (see [`PromptTextBuilder`]).
    fn fill_into(&self, out: &mut PromptTextBuilder, values: &[Piece<'_>]) {
        debug_assert_eq!(
            values.len(),
            self.kind.placeholders().len(),
            "{}",
            self.kind
        );
        for s in &self.segments {
            match s {
                Segment::Literal(l) => out.push_str(l),
                Segment::Slot(i) => match values.get(*i) {
                    Some(Piece::Str(v)) => out.push_str(v),
                    Some(Piece::Shared(v)) => out.push_shared(v),
                    Some(Piece::Text(v)) => out.push_text(v),
                    None => {}
                },
            }
        }
    }
}

/// A placeholder value for the segment renderers ([`PromptSet::render_text`]).
#[derive(Debug, Clone, Copy)]
pub enum Piece<'a> {
    /// Short text, copied.
    Str(&'a str),
    /// A shared text (question, solution, summary), kept by reference when long.
    Shared(&'a Arc<str>),
    /// An already rendered part (rollout context, bank rendering).
    Text(&'a PromptText),
}

/// Paths of templates that replace the built-in ones, keyed by template name
/// (`solution`, `verification`, … — see [`TemplateKind::name`]).
pub type PromptOverrides = BTreeMap<String, PathBuf>;

/// Every template the TMAS strategy and the judge need.
#[derive(Debug, Clone)]
pub struct PromptSet {
    templates: Vec<Template>,
}

impl PromptSet {
    /// The built-in templates.
    pub fn builtin() -> Result<Self, PromptError> {
        let templates = TemplateKind::ALL
            .iter()
            .map(|k| Template::parse(*k, k.file_name(), k.builtin_text()))
            .collect::<Result<_, _>>()?;
        Ok(Self { templates })
    }

    /// The built-in templates with some replaced by files. Relative paths are taken as
    /// given (the config layer resolves them against the config file's directory).
    pub fn load(overrides: &PromptOverrides) -> Result<Self, PromptError> {
        let mut set = Self::builtin()?;
        for (name, path) in overrides {
            let kind =
                TemplateKind::from_name(name).ok_or_else(|| PromptError::UnknownTemplate {
                    name: name.clone(),
                    known: TemplateKind::ALL
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            set.set_from_file(kind, path)?;
        }
        Ok(set)
    }

    /// Replaces one template by the contents of a file.
    pub fn set_from_file(&mut self, kind: TemplateKind, path: &Path) -> Result<(), PromptError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PromptError::Read {
            file: file.clone(),
            source,
        })?;
        self.set_from_text(kind, &file, &text)
    }

    /// Replaces one template by `text` (`source` names it in errors).
    pub fn set_from_text(
        &mut self,
        kind: TemplateKind,
        source: &str,
        text: &str,
    ) -> Result<(), PromptError> {
        self.templates[kind as usize] = Template::parse(kind, source, text)?;
        Ok(())
    }

    pub fn template(&self, kind: TemplateKind) -> &Template {
        &self.templates[kind as usize]
    }

    /// Renders `kind` with `values` in the order of `kind.placeholders()`.
    pub fn render(&self, kind: TemplateKind, values: &[&str]) -> String {
        self.template(kind).fill(values)
    }

    /// Renders `kind` as shared segments; the text is exactly what [`PromptSet::render`]
    /// gives for the same values.
    pub fn render_text(&self, kind: TemplateKind, values: &[Piece<'_>]) -> PromptText {
        let mut out = PromptTextBuilder::new();
        self.render_into(&mut out, kind, values);
        out.finish()
    }

    /// Appends `kind` rendered with `values` to `out`.
    pub fn render_into(
        &self,
        out: &mut PromptTextBuilder,
        kind: TemplateKind,
        values: &[Piece<'_>],
    ) {
        self.template(kind).fill_into(out, values);
    }

    /// The answer-equivalence judge prompt (used by the evaluation code).
    pub fn judge(&self, question: &str, reference: &str, candidate: &str) -> String {
        self.render(TemplateKind::Judge, &[question, reference, candidate])
    }

    /// The proof grader's prompt (proof mode's evaluation).
    pub fn proof_grade(
        &self,
        question: &str,
        reference_solution: &str,
        grading_guidelines: &str,
        proof: &str,
    ) -> String {
        self.render(
            TemplateKind::ProofGrade,
            &[question, reference_solution, grading_guidelines, proof],
        )
    }
}

impl fmt::Display for TemplateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Renders bank items for a prompt: one per line, each starting with `- ` (newlines inside
/// an item become spaces so the one-item-per-line convention holds). An empty list
/// becomes `(none yet)`, which does not start with `- `.
pub fn bullet_list<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "(none yet)".to_string();
    }
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("- ");
        let item = item.as_ref().trim();
        if item.contains(['\n', '\r']) {
            out.push_str(
                &item
                    .split(['\n', '\r'])
                    .filter(|l| !l.trim().is_empty())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        } else {
            out.push_str(item);
        }
    }
    out
}

#[cfg(test)]
mod tests;
