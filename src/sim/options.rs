//! Simulator settings (owned by the simulator module; extended there).

use serde::{Deserialize, Serialize};

/// Knobs of the simulated endpoint. Used by `tmas sim-server` flags and by a config's
/// `[simulator]` section when an endpoint's `base_url` is `embedded-sim`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimOptions {
    /// Seed: the same seed and the same requests give the same replies.
    pub seed: u64,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self { seed: 0 }
    }
}
