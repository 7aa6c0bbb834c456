//! Where bank versions are persisted: a trait the application implements (the `tmas` run
//! store and the run directory's JSON files), and a no-op sink.

use crate::strategy::BankVersion;

/// Failure to persist one bank version.
#[derive(Debug, Clone, thiserror::Error)]
#[error("persisting bank `{bank}` v{version} of problem `{problem}`: {message}")]
pub struct BankSinkError {
    pub problem: String,
    pub bank: String,
    pub version: u32,
    /// What went wrong, naming the file or database involved.
    pub message: String,
}

/// Stores every version of every bank. Called from a blocking thread (via
/// `spawn_blocking`), once per version, in version order for each (problem, bank).
pub trait BankSink: Send + Sync + 'static {
    /// `iteration` is the strategy iteration that produced the version; `None` for the
    /// initial content a bank starts with.
    fn persist(
        &self,
        problem: &str,
        iteration: Option<u32>,
        version: &BankVersion,
    ) -> Result<(), BankSinkError>;
}

/// Persists nothing (tests, dry runs).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSink;

impl BankSink for NoopSink {
    fn persist(&self, _: &str, _: Option<u32>, _: &BankVersion) -> Result<(), BankSinkError> {
        Ok(())
    }
}
