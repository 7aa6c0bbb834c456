//! Drawing at most one fault per request, and the `first_requests` fault, which is not
//! drawn.

use std::sync::atomic::{AtomicU64, Ordering};

use super::options::{FaultRates, FirstRequests};
use super::rng::SimRng;
use crate::role::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    None,
    Error500,
    DropConnection,
    Hang,
    MalformedJson,
    Truncated,
    UnparseableScore,
    InterruptedStream,
}

impl Fault {
    /// Counter name (matches [`super::stats::FAULT_KINDS`]).
    pub fn kind(self) -> Option<&'static str> {
        Some(match self {
            Fault::None => return None,
            Fault::Error500 => "error_500",
            Fault::DropConnection => "drop_connection",
            Fault::Hang => "hang",
            Fault::MalformedJson => "malformed_json",
            Fault::Truncated => "truncated",
            Fault::UnparseableScore => "unparseable_score",
            Fault::InterruptedStream => "interrupted_stream",
        })
    }
}

/// Draws the fault of one request. Always consumes exactly one draw so the rest of the
/// reply does not depend on the fault settings.
pub fn draw(rates: &FaultRates, role: Option<Role>, rng: &mut SimRng) -> Fault {
    let u = rng.unit();
    if !rates.roles.is_empty() && !role.is_some_and(|r| rates.roles.contains(&r)) {
        return Fault::None;
    }
    let kinds = [
        Fault::Error500,
        Fault::DropConnection,
        Fault::Hang,
        Fault::MalformedJson,
        Fault::Truncated,
        Fault::UnparseableScore,
        Fault::InterruptedStream,
    ];
    let mut acc = 0.0;
    for (kind, (_, rate)) in kinds.into_iter().zip(rates.rates()) {
        acc += rate;
        if u < acc {
            if kind == Fault::UnparseableScore && role != Some(Role::Verification) {
                return Fault::None;
            }
            return kind;
        }
    }
    Fault::None
}

/// Whether the `first_requests` fault answers a model-API request: counts it in `seen`
/// (the requests since the settings took effect) while the fault is on, and gives its
/// number (from 1) when it is one of the first `first.count`.
pub fn first_requests(first: &FirstRequests, seen: &AtomicU64) -> Option<u64> {
    if first.count == 0 {
        return None;
    }
    let n = seen.fetch_add(1, Ordering::Relaxed) + 1;
    (n <= u64::from(first.count)).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_requests_fail_the_first_k_only() {
        let seen = AtomicU64::new(0);
        let first = FirstRequests {
            count: 2,
            status: 429,
            retry_after_secs: Some(1),
        };
        let answers: Vec<_> = (0..4).map(|_| first_requests(&first, &seen)).collect();
        assert_eq!(answers, [Some(1), Some(2), None, None]);
        // New settings count again from 0 (`SimState::set_faults`).
        seen.store(0, Ordering::Relaxed);
        assert_eq!(first_requests(&first, &seen), Some(1));
        let off = FirstRequests::default();
        let seen = AtomicU64::new(0);
        assert_eq!(first_requests(&off, &seen), None);
        assert_eq!(seen.load(Ordering::Relaxed), 0, "off: nothing counted");
    }

    #[test]
    fn rates_and_role_filter() {
        let rates = FaultRates {
            error_500: 0.3,
            hang: 0.2,
            unparseable_score: 0.5,
            ..FaultRates::default()
        };
        let mut rng = SimRng::new(4);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..10_000 {
            *counts
                .entry(draw(&rates, Some(Role::Verification), &mut rng))
                .or_insert(0) += 1;
        }
        assert!(
            (2700..3300).contains(&counts[&Fault::Error500]),
            "{counts:?}"
        );
        assert!(
            (4700..5300).contains(&counts[&Fault::UnparseableScore]),
            "{counts:?}"
        );
        assert!(!counts.contains_key(&Fault::None));
        assert!(
            (0..1000)
                .all(|_| draw(&rates, Some(Role::Solution), &mut rng) != Fault::UnparseableScore)
        );
        let only = FaultRates {
            error_500: 1.0,
            roles: vec![Role::Judge],
            ..FaultRates::default()
        };
        assert_eq!(draw(&only, Some(Role::Solution), &mut rng), Fault::None);
        assert_eq!(draw(&only, Some(Role::Judge), &mut rng), Fault::Error500);
    }
}
