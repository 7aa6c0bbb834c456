//! Why a call produced no response: the one vocabulary of failure kinds.
//!
//! The model client, the role pools and the coordinators say why a call failed with a
//! [`FailureKind`]; the application's run store keeps it under its name, and its resume,
//! failure accounting and start-up check decide from it. Each kind knows the three things
//! they ask:
//!
//! - [`FailureKind::is_transient`]: the failure says "this process stopped or could not
//!   make the call", not "the endpoint failed it" (a shutdown, a stopped pool, a panic, a
//!   role or group with nothing to call). Such a call is never stored as failed: a resume
//!   sends it again.
//! - [`FailureKind::counts_against_endpoint`]: the endpoint failed the call: it did not
//!   answer in time or at all, cut its answer short, answered something unreadable or an
//!   error status that is not permanent. Another attempt, or another endpoint, may
//!   succeed. (Within the client the breaker looks finer, at the status: overload answers
//!   are back-pressure, not ill health.)
//! - [`FailureKind::is_permanent`]: the endpoint refused the request in a way sending it
//!   again cannot change (a rejected key, a wrong URL or model, a request it will not
//!   accept). Never retried; enough in a row stop a run, and one stops its start.
//!
//! A kind is stored and serialized under its name ([`FailureKind::as_str`]), the strings
//! this project has always written (`timeout`, `status`, `permanent`, …), so stores and
//! result files written before read as before. A name this build does not know (written
//! by a newer build, or a missing one) reads as [`FailureKind::Unknown`] rather than
//! failing the read: a store stays readable, and its accounting shows `unknown`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// See the module documentation. The names are those of [`FailureKind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// No answer within the endpoint's timeout (`timeout`).
    Timeout,
    /// The connection was refused, reset or dropped before an answer (`connect`).
    Connect,
    /// An HTTP error status that is not permanent: overload (429, 503), a server error,
    /// or a refusal retrying might change (`status`).
    Status,
    /// An HTTP status that will not change however often the call is sent: 400 (unless
    /// the prompt is over the context length), 401, 403, 404, 422 (`permanent`).
    Permanent,
    /// An answer that is not the expected JSON or event stream (`malformed`).
    Malformed,
    /// A generation cut off after it began: a stream without `finish_reason`, or a
    /// connection broken mid-answer (`interrupted`).
    Interrupted,
    /// The prompt does not fit the endpoint's context window; never sent
    /// (`prompt_too_long`).
    PromptTooLong,
    /// Every endpoint of the call's group stayed down for the outage budget (`outage`).
    Outage,
    /// The request was in flight at so many crashes of endpoints that answered other
    /// calls meanwhile that it may be what crashes them; not sent again
    /// (`suspected_crash`).
    SuspectedCrash,
    /// The run is stopping: the call was not sent (`shutdown`).
    Shutdown,
    /// The role's worker pool stopped before the call finished (`pool_stopped`).
    PoolStopped,
    /// The task running the call panicked (`panic`).
    Panic,
    /// The call crashed its pool's workers too often (`worker_panic`).
    WorkerPanic,
    /// The client's actor system failed (`actor`).
    Actor,
    /// The client's configuration is invalid (`config`).
    Config,
    /// No endpoint group of that name is configured (`unknown_group`).
    UnknownGroup,
    /// No worker pool serves the call's role (`unknown_role`).
    UnknownRole,
    /// A stored name this build does not know (`unknown`); never produced by a call.
    Unknown,
}

impl FailureKind {
    /// Every kind, in declaration order ([`FailureKind::Unknown`] last).
    pub const ALL: [FailureKind; 18] = [
        FailureKind::Timeout,
        FailureKind::Connect,
        FailureKind::Status,
        FailureKind::Permanent,
        FailureKind::Malformed,
        FailureKind::Interrupted,
        FailureKind::PromptTooLong,
        FailureKind::Outage,
        FailureKind::SuspectedCrash,
        FailureKind::Shutdown,
        FailureKind::PoolStopped,
        FailureKind::Panic,
        FailureKind::WorkerPanic,
        FailureKind::Actor,
        FailureKind::Config,
        FailureKind::UnknownGroup,
        FailureKind::UnknownRole,
        FailureKind::Unknown,
    ];

    /// The name it is stored, serialized, logged and labelled under.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::Status => "status",
            FailureKind::Permanent => "permanent",
            FailureKind::Malformed => "malformed",
            FailureKind::Interrupted => "interrupted",
            FailureKind::PromptTooLong => "prompt_too_long",
            FailureKind::Outage => "outage",
            FailureKind::SuspectedCrash => "suspected_crash",
            FailureKind::Shutdown => "shutdown",
            FailureKind::PoolStopped => "pool_stopped",
            FailureKind::Panic => "panic",
            FailureKind::WorkerPanic => "worker_panic",
            FailureKind::Actor => "actor",
            FailureKind::Config => "config",
            FailureKind::UnknownGroup => "unknown_group",
            FailureKind::UnknownRole => "unknown_role",
            FailureKind::Unknown => "unknown",
        }
    }

    /// The kind named `name`; [`FailureKind::Unknown`] for a name this build does not
    /// know (see the module documentation).
    pub fn from_name(name: &str) -> FailureKind {
        FailureKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or(FailureKind::Unknown)
    }

    /// This process stopped or could not make the call; the endpoint did not fail it.
    /// Never stored as a failure, so a resume sends the call again.
    pub fn is_transient(self) -> bool {
        match self {
            FailureKind::Shutdown
            | FailureKind::PoolStopped
            | FailureKind::Panic
            | FailureKind::WorkerPanic
            | FailureKind::Actor
            | FailureKind::Config
            | FailureKind::UnknownGroup
            | FailureKind::UnknownRole => true,
            FailureKind::Timeout
            | FailureKind::Connect
            | FailureKind::Status
            | FailureKind::Permanent
            | FailureKind::Malformed
            | FailureKind::Interrupted
            | FailureKind::PromptTooLong
            | FailureKind::Outage
            | FailureKind::SuspectedCrash
            | FailureKind::Unknown => false,
        }
    }

    /// The run is stopping: a shutdown refused or cut the call, or its role's pool
    /// stopped (at the run's end; a pool that lost every worker logs that as an error
    /// itself). A subset of [`FailureKind::is_transient`].
    pub fn is_stop(self) -> bool {
        matches!(self, FailureKind::Shutdown | FailureKind::PoolStopped)
    }

    /// The endpoint failed the call (no answer in time or at all, an answer cut short or
    /// unreadable, an error status that is not permanent): another attempt, later or
    /// elsewhere, may succeed. Not the request's own fault (`permanent`,
    /// `prompt_too_long`, `suspected_crash`), nor the whole group's (`outage`), nor this
    /// process's ([`FailureKind::is_transient`]).
    pub fn counts_against_endpoint(self) -> bool {
        match self {
            FailureKind::Timeout
            | FailureKind::Connect
            | FailureKind::Status
            | FailureKind::Malformed
            | FailureKind::Interrupted => true,
            FailureKind::Permanent
            | FailureKind::PromptTooLong
            | FailureKind::Outage
            | FailureKind::SuspectedCrash
            | FailureKind::Shutdown
            | FailureKind::PoolStopped
            | FailureKind::Panic
            | FailureKind::WorkerPanic
            | FailureKind::Actor
            | FailureKind::Config
            | FailureKind::UnknownGroup
            | FailureKind::UnknownRole
            | FailureKind::Unknown => false,
        }
    }

    /// The endpoint refused the request in a way that sending it again cannot change:
    /// never retried; enough in a row from one endpoint stop a run, and one stops its
    /// start-up check.
    pub fn is_permanent(self) -> bool {
        self == FailureKind::Permanent
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for FailureKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = FailureKind;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a failure kind name")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<FailureKind, E> {
                Ok(FailureKind::from_name(name))
            }
        }
        deserializer.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names stores were written with before the kinds had a type: they must keep
    /// reading as the same kinds.
    const STORED_NAMES: [(&str, FailureKind); 17] = [
        ("timeout", FailureKind::Timeout),
        ("connect", FailureKind::Connect),
        ("status", FailureKind::Status),
        ("permanent", FailureKind::Permanent),
        ("malformed", FailureKind::Malformed),
        ("interrupted", FailureKind::Interrupted),
        ("prompt_too_long", FailureKind::PromptTooLong),
        ("outage", FailureKind::Outage),
        ("suspected_crash", FailureKind::SuspectedCrash),
        ("shutdown", FailureKind::Shutdown),
        ("pool_stopped", FailureKind::PoolStopped),
        ("panic", FailureKind::Panic),
        ("worker_panic", FailureKind::WorkerPanic),
        ("actor", FailureKind::Actor),
        ("config", FailureKind::Config),
        ("unknown_group", FailureKind::UnknownGroup),
        ("unknown_role", FailureKind::UnknownRole),
    ];

    #[test]
    fn all_lists_every_kind_once() {
        for (i, kind) in FailureKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind}");
        }
        assert_eq!(FailureKind::Unknown as usize, FailureKind::ALL.len() - 1);
    }

    #[test]
    fn names_are_the_stored_strings_both_ways() {
        for (name, kind) in STORED_NAMES {
            assert_eq!(kind.as_str(), name);
            assert_eq!(FailureKind::from_name(name), kind);
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<FailureKind>(&json).unwrap(), kind);
        }
        for kind in FailureKind::ALL {
            assert_eq!(FailureKind::from_name(kind.as_str()), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
    }

    #[test]
    fn only_a_shutdown_or_a_stopped_pool_is_a_stop_and_each_is_transient() {
        let stops: Vec<FailureKind> = FailureKind::ALL
            .into_iter()
            .filter(|k| k.is_stop())
            .collect();
        assert_eq!(stops, [FailureKind::Shutdown, FailureKind::PoolStopped]);
        assert!(stops.iter().all(|k| k.is_transient()));
    }

    #[test]
    fn an_unknown_name_reads_as_unknown() {
        for name in ["", "overloaded", "Timeout", "unknown"] {
            assert_eq!(FailureKind::from_name(name), FailureKind::Unknown, "{name}");
            let json = serde_json::to_string(name).unwrap();
            assert_eq!(
                serde_json::from_str::<FailureKind>(&json).unwrap(),
                FailureKind::Unknown
            );
        }
        assert!(
            serde_json::from_str::<FailureKind>("3").is_err(),
            "not a name"
        );
        let unknown = FailureKind::Unknown;
        assert!(
            !unknown.is_transient()
                && !unknown.is_permanent()
                && !unknown.counts_against_endpoint()
        );
    }

    #[test]
    fn the_three_questions() {
        use FailureKind::*;
        let transient = [
            Shutdown,
            PoolStopped,
            Panic,
            WorkerPanic,
            Actor,
            Config,
            UnknownGroup,
            UnknownRole,
        ];
        let against_endpoint = [Timeout, Connect, Status, Malformed, Interrupted];
        for kind in FailureKind::ALL {
            assert_eq!(kind.is_transient(), transient.contains(&kind), "{kind}");
            assert_eq!(
                kind.counts_against_endpoint(),
                against_endpoint.contains(&kind),
                "{kind}"
            );
            assert_eq!(kind.is_permanent(), kind == Permanent, "{kind}");
            // At most one answer is yes: a failure is the process's, the endpoint's or
            // the request's.
            let yes = [
                kind.is_transient(),
                kind.counts_against_endpoint(),
                kind.is_permanent(),
            ];
            assert!(yes.iter().filter(|y| **y).count() <= 1, "{kind}");
        }
    }
}
