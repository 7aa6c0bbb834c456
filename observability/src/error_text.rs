//! One message per failure: an error and its causes joined by `: `, each cause's text
//! written once.
//!
//! Errors that name a file or a database often carry the OS or SQLite error both in their
//! own message and as their `source` (and SQLite's error carries its code's text again
//! as its own source), so printing the whole chain repeats "No such file or directory
//! (os error 2)" or "database is locked". A cause whose text the message already holds
//! adds nothing and is left out.

use std::error::Error;

/// `err` and its causes as one line, without repeated text.
pub fn error_text(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let part = c.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: cannot read: {source}")]
    struct Named {
        path: &'static str,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("loading the dataset")]
    struct Outer(#[source] Named);

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = || std::io::Error::from_raw_os_error(2);
        let os = io().to_string();
        let err = Outer(Named {
            path: "d.jsonl",
            source: io(),
        });
        let text = error_text(&err);
        assert_eq!(
            text,
            format!("loading the dataset: d.jsonl: cannot read: {os}")
        );
        assert_eq!(text.matches(&os).count(), 1, "{text}");
        // Through anyhow too (`main` prints errors this way).
        let any = anyhow::Error::new(Named {
            path: "d.jsonl",
            source: io(),
        })
        .context("starting the run");
        let text = error_text(any.as_ref());
        assert_eq!(text.matches(&os).count(), 1, "{text}");
        assert!(text.starts_with("starting the run: d.jsonl"), "{text}");
        // A cause with new text is kept.
        let err = anyhow::Error::new(io()).context("reading d.jsonl");
        assert_eq!(error_text(err.as_ref()), format!("reading d.jsonl: {os}"));
    }
}
