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
    /// True if one more problem may start now.
    pub fn admits(&self, active_problems: usize, outstanding_calls: u64) -> bool {
        match *self {
            Admission::Fixed {
                max_concurrent_problems,
            } => active_problems < max_concurrent_problems,
            Admission::WorkConserving {
                max_active_problems,
                target_in_flight,
            } => {
                active_problems < max_active_problems && outstanding_calls < target_in_flight as u64
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
        assert!(a.admits(0, 10_000));
        assert!(a.admits(1, 10_000));
        assert!(!a.admits(2, 0));
        assert!(!a.depends_on_calls());
    }

    #[test]
    fn work_conserving_needs_both_room_for_a_problem_and_too_few_calls() {
        let a = Admission::WorkConserving {
            max_active_problems: 3,
            target_in_flight: 10,
        };
        assert!(a.admits(0, 0));
        assert!(a.admits(2, 9));
        assert!(!a.admits(2, 10));
        assert!(!a.admits(3, 0));
        assert!(a.depends_on_calls());
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
