//! Bank versions into the store (table `bank_versions`) as well as the `banks/` JSON files.
//!
//! Bank versions are not replayed: on resume the bank actors recompute them from the
//! replayed memory-agent outcomes with the same deterministic merge policies, and the
//! rows are rewritten with identical content (`INSERT OR REPLACE`). Storing them still
//! matters for users (every version is queryable) and for `tmas export`.

use tmas_actors::bank::{BankSink, BankSinkError};
use tmas_actors::strategy::BankVersion;

use super::RunStore;
use super::bank_files::JsonFileSink;
use super::rows::Fact;

/// Writes each version to the JSON sink, then queues it for the store.
pub struct StoreBankSink {
    pub json: JsonFileSink,
    pub store: RunStore,
}

impl BankSink for StoreBankSink {
    fn persist(
        &self,
        problem: &str,
        iteration: Option<u32>,
        version: &BankVersion,
    ) -> Result<(), BankSinkError> {
        self.json.persist(problem, iteration, version)?;
        if let Some(message) = self.store.failure() {
            return Err(BankSinkError {
                problem: problem.to_owned(),
                bank: version.bank.to_string(),
                version: version.version,
                message: format!("{}: {message}", self.store.path().display()),
            });
        }
        self.store.send(Fact::Bank {
            problem_id: problem.to_owned(),
            iteration,
            version: version.clone(),
        });
        Ok(())
    }
}
