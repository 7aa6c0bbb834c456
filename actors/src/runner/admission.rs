//! When the runner may start another problem. A pure function of a snapshot, so each
//! policy is unit-tested without actors.

use serde::{Deserialize, Serialize};

/// How many problems run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Admission {
    /// Exactly up to `max_concurrent_problems` problems at once; when one finishes the
    /// next starts. Simple and reproducible, but a problem waiting on its slowest call
    /// holds its slot while endpoint capacity idles.
    Fixed { max_concurrent_problems: usize },
    /// Start another problem whenever fewer than `target_in_flight` calls are submitted
    /// and unfinished (queued + running, all roles), up to `max_active_problems`. Keeps
    /// endpoints busy through the tail of each problem's iterations.
    ///
    /// Once every problem still waiting fits under `max_active_problems`, all of them
    /// start at once: holding them back would save no memory beyond that bound, and each
    /// one started late adds its whole dependency chain to the end of the run (measured
    /// in docs/performance-log.md).
    WorkConserving {
        max_active_problems: usize,
        target_in_flight: usize,
    },
}

impl Default for Admission {
    fn default() -> Self {
        Admission::Fixed {
            max_concurrent_problems: 1,
        }
    }
}

impl Admission {
    /// True if one more problem may start now. `waiting_problems` counts the problems not
    /// yet admitted, when known.
    pub fn admits(
        &self,
        active_problems: usize,
        outstanding_calls: u64,
        waiting_problems: Option<usize>,
    ) -> bool {
        match *self {
            Admission::Fixed {
                max_concurrent_problems,
            } => active_problems < max_concurrent_problems,
            Admission::WorkConserving {
                max_active_problems,
                target_in_flight,
            } => {
                let rest_fits = waiting_problems
                    .is_some_and(|w| active_problems.saturating_add(w) <= max_active_problems);
                active_problems < max_active_problems
                    && (outstanding_calls < target_in_flight as u64 || rest_fits)
            }
        }
    }

    /// Whether a call finishing can open a slot (so the runner must watch call completions).
    pub fn depends_on_calls(&self) -> bool {
        matches!(self, Admission::WorkConserving { .. })
    }

    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Admission::Fixed {
                max_concurrent_problems: 0,
            } => Err("admission.max_concurrent_problems must be at least 1".into()),
            Admission::WorkConserving {
                max_active_problems: 0,
                ..
            } => Err("admission.max_active_problems must be at least 1".into()),
            Admission::WorkConserving {
                target_in_flight: 0,
                ..
            } => Err("admission.target_in_flight must be at least 1".into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_counts_problems_only() {
        let a = Admission::Fixed {
            max_concurrent_problems: 2,
        };
        assert!(a.admits(0, 10_000, None));
        assert!(a.admits(1, 10_000, Some(5)));
        assert!(!a.admits(2, 0, Some(1)));
        assert!(!a.depends_on_calls());
    }

    #[test]
    fn work_conserving_needs_both_room_for_a_problem_and_too_few_calls() {
        let a = Admission::WorkConserving {
            max_active_problems: 3,
            target_in_flight: 10,
        };
        assert!(a.admits(0, 0, None));
        assert!(a.admits(2, 9, None));
        assert!(!a.admits(2, 10, None));
        assert!(!a.admits(3, 0, None));
        assert!(a.depends_on_calls());
    }

    #[test]
    fn work_conserving_starts_the_last_problems_together_once_they_fit() {
        let a = Admission::WorkConserving {
            max_active_problems: 3,
            target_in_flight: 10,
        };
        // Enough calls outstanding, but the 2 problems left fit beside the 1 active …
        assert!(a.admits(1, 50, Some(2)));
        // … and after one of them starts, the last one still does.
        assert!(a.admits(2, 60, Some(1)));
        // 3 left beside 1 active do not fit: wait for calls to drain.
        assert!(!a.admits(1, 50, Some(3)));
        // The problem cap always holds.
        assert!(!a.admits(3, 0, Some(1)));
    }

    #[test]
    fn zero_limits_are_rejected_with_the_field_name() {
        let e = Admission::Fixed {
            max_concurrent_problems: 0,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("max_concurrent_problems"));
        let e = Admission::WorkConserving {
            max_active_problems: 1,
            target_in_flight: 0,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("target_in_flight"));
        assert!(Admission::default().validate().is_ok());
    }

    #[test]
    fn deserializes_from_config_style_tables() {
        let a: Admission = serde_json::from_str(
            r#"{"kind":"work_conserving","max_active_problems":4,"target_in_flight":800}"#,
        )
        .unwrap();
        assert_eq!(
            a,
            Admission::WorkConserving {
                max_active_problems: 4,
                target_in_flight: 800
            }
        );
    }
}
