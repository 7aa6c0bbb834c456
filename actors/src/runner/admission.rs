//! When the runner may start another problem. A pure function of a snapshot, so each
//! policy is unit-tested without actors.

use serde::{Deserialize, Serialize};

/// Which admission rule a run uses: `run.admission` in a config file and `--admission`
/// on a command line (the same names). [`Admission::of_kind`] gives it its bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionKind {
    /// Exactly up to `max_concurrent_problems` problems at once; when one finishes the
    /// next starts (the released runner's rule).
    #[default]
    Fixed,
    /// Start another problem whenever calls queued or in flight fall below the in-flight
    /// target (e.g. while problems wait on their bank updates), up to
    /// `max_active_problems` at once; once all problems still waiting fit under that
    /// bound, start them together.
    WorkConserving,
}

impl AdmissionKind {
    pub const ALL: [AdmissionKind; 2] = [AdmissionKind::Fixed, AdmissionKind::WorkConserving];

    /// The name written in config files and on command lines.
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionKind::Fixed => "fixed",
            AdmissionKind::WorkConserving => "work-conserving",
        }
    }
}

impl std::fmt::Display for AdmissionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The bounds an [`AdmissionKind`] needs (each kind reads the ones it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionBounds {
    /// `fixed`: problems at once.
    pub max_concurrent_problems: usize,
    /// `work-conserving`: most problems active at once.
    pub max_active_problems: usize,
    /// `work-conserving`: admit while fewer calls than this are queued or in flight.
    pub target_in_flight: usize,
}

/// How many problems run at once: an [`AdmissionKind`] with its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
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
    /// The policy of `kind` with its bounds from `bounds`.
    pub fn of_kind(kind: AdmissionKind, bounds: AdmissionBounds) -> Self {
        match kind {
            AdmissionKind::Fixed => Admission::Fixed {
                max_concurrent_problems: bounds.max_concurrent_problems,
            },
            AdmissionKind::WorkConserving => Admission::WorkConserving {
                max_active_problems: bounds.max_active_problems,
                target_in_flight: bounds.target_in_flight,
            },
        }
    }

    pub fn kind(&self) -> AdmissionKind {
        match self {
            Admission::Fixed { .. } => AdmissionKind::Fixed,
            Admission::WorkConserving { .. } => AdmissionKind::WorkConserving,
        }
    }

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
            r#"{"kind":"work-conserving","max_active_problems":4,"target_in_flight":800}"#,
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

    #[test]
    fn a_kind_takes_the_bounds_it_names() {
        let bounds = AdmissionBounds {
            max_concurrent_problems: 7,
            max_active_problems: 14,
            target_in_flight: 800,
        };
        assert_eq!(
            Admission::of_kind(AdmissionKind::Fixed, bounds),
            Admission::Fixed {
                max_concurrent_problems: 7
            }
        );
        let wc = Admission::of_kind(AdmissionKind::WorkConserving, bounds);
        assert_eq!(
            wc,
            Admission::WorkConserving {
                max_active_problems: 14,
                target_in_flight: 800
            }
        );
        for kind in AdmissionKind::ALL {
            assert_eq!(Admission::of_kind(kind, bounds).kind(), kind);
        }
    }

    #[test]
    fn kind_names_are_the_same_in_serde_display_and_on_the_command_line() {
        for kind in AdmissionKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::Value::String(kind.as_str().into()));
            assert_eq!(kind.to_string(), kind.as_str());
            // The bounded policy's tag is the kind's name.
            let bounded = serde_json::to_value(Admission::of_kind(
                kind,
                AdmissionBounds {
                    max_concurrent_problems: 1,
                    max_active_problems: 1,
                    target_in_flight: 1,
                },
            ))
            .unwrap();
            assert_eq!(bounded["kind"], json);
            #[cfg(feature = "clap")]
            {
                use clap::ValueEnum;
                assert_eq!(kind.to_possible_value().unwrap().get_name(), kind.as_str());
            }
        }
        let parsed: Vec<AdmissionKind> =
            serde_json::from_str(r#"["fixed", "work-conserving"]"#).unwrap();
        assert_eq!(parsed, AdmissionKind::ALL);
    }
}
