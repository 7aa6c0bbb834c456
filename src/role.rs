//! The agent roles that make model calls, and [`PerRole`], a value for each of them: the
//! one vocabulary of roles for the config (`[roles.ROLE]`), the simulator, the methods, the
//! engine and the benchmarks.
//!
//! It is the lowest module of the crate because the simulator (the lowest layer that
//! does more than measure the process) already names roles: it reads them from the
//! `x-tmas-role` header. Which roles a run calls is not decided here: each method declares
//! its own (`MethodConfig::roles` in `crate::method::from_config`).
//!
//! The runtime (`tmas-actors`) knows no TMAS roles: it schedules pools and tags calls by
//! an opaque label (`CallKey::role`, `RoleSettings::role`, the `x-tmas-role` header), which
//! is [`Role::as_str`] going out and [`Role::from_label`] coming back. Config files, run
//! stores and the simulator's options spell a role the same way (its serde name).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod per_role;

pub use per_role::PerRole;

/// An agent role. Its serde name is [`Role::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Solution,
    Verification,
    Summary,
    Experience,
    Guideline,
    /// The evaluation's answer judge (and proof grader).
    Judge,
    /// Hybrid-RL scoring: is a rollout's strategy already in the guideline bank?
    GuidelineJudge,
    /// Self-Refine's feedback on its own solution.
    Critique,
    /// RSE's extractor (a rollout into propositions and pitfalls).
    Extraction,
    /// Sentence embeddings of bank items (RSE with `method.rse_dedup = "embeddings"`, TMAS
    /// with `method.bank_dedup = "embeddings"`): an embeddings endpoint, not a chat model.
    Embedding,
}

impl Role {
    /// How many roles there are.
    pub const COUNT: usize = 10;

    /// Every role, in the order of `[roles]` in a printed config (and of [`PerRole`]).
    pub const ALL: [Role; Role::COUNT] = [
        Role::Solution,
        Role::Verification,
        Role::Summary,
        Role::Experience,
        Role::Guideline,
        Role::Judge,
        Role::GuidelineJudge,
        Role::Critique,
        Role::Extraction,
        Role::Embedding,
    ];

    /// The role's position in [`Role::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in config keys, run stores, the `x-tmas-role` header and the
    /// runtime's role labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Solution => "solution",
            Role::Verification => "verification",
            Role::Summary => "summary",
            Role::Experience => "experience",
            Role::Guideline => "guideline",
            Role::Judge => "judge",
            Role::GuidelineJudge => "guideline_judge",
            Role::Critique => "critique",
            Role::Extraction => "extraction",
            Role::Embedding => "embedding",
        }
    }

    /// The role a name or runtime label spells ([`Role::as_str`] read back); `None` for
    /// one no role has.
    pub fn from_label(label: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == label)
    }

    /// Every role's name, comma-separated (for messages listing the choices).
    pub fn names() -> String {
        Role::ALL.map(Role::as_str).join(", ")
    }

    /// True for a role whose calls run side by side with those of the role before it in
    /// a method's stage order, not after them: TMAS's guideline agent updates its bank
    /// while the experience agent updates its own, both from the same iteration's
    /// summaries. The runtime's latency-aware call order counts such a stage once, at the
    /// longer of the two.
    pub fn runs_beside_previous(self) -> bool {
        matches!(self, Role::Guideline)
    }

    /// The evaluation's roles (the answer judge, Hybrid-RL's novelty judge): no method calls
    /// them; every other role is some method's.
    pub fn is_judge(self) -> bool {
        matches!(self, Role::Judge | Role::GuidelineJudge)
    }

    /// Whether the role's calls are embeddings calls (`POST /embeddings`) rather than chat
    /// completions: its endpoints serve an embeddings model, and its sampling keys are
    /// unused.
    pub fn is_embedding(self) -> bool {
        self == Role::Embedding
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = Role;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a role ({})", Role::names())
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Role, E> {
                Role::from_label(v).ok_or_else(|| {
                    E::custom(format!("unknown role `{v}` (roles: {})", Role::names()))
                })
            }
        }
        d.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_role_once_at_its_index() {
        assert_eq!(Role::ALL.len(), Role::COUNT);
        for (i, role) in Role::ALL.into_iter().enumerate() {
            assert_eq!(role.index(), i, "{role}");
        }
    }

    /// The names configs, run stores and the simulator's options were written with.
    #[test]
    fn every_role_keeps_its_serde_name_and_reads_back() {
        let names = [
            (Role::Solution, "solution"),
            (Role::Verification, "verification"),
            (Role::Summary, "summary"),
            (Role::Experience, "experience"),
            (Role::Guideline, "guideline"),
            (Role::Judge, "judge"),
            (Role::GuidelineJudge, "guideline_judge"),
            (Role::Critique, "critique"),
            (Role::Extraction, "extraction"),
            (Role::Embedding, "embedding"),
        ];
        assert_eq!(names.len(), Role::COUNT);
        for (role, name) in names {
            let json = serde_json::to_string(&role).expect("serializes");
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Role>(&json).expect("reads"), role);
            assert_eq!(Role::from_label(name), Some(role));
            assert_eq!(role.to_string(), name);
        }
    }

    #[test]
    fn an_unknown_role_is_refused_with_the_choices() {
        let e = serde_json::from_str::<Role>("\"critic\"").expect_err("no such role");
        let msg = e.to_string();
        assert!(msg.contains("unknown role `critic`"), "{msg}");
        assert!(msg.contains("critique"), "{msg}");
        assert_eq!(Role::from_label("Solution"), None);
        assert_eq!(Role::from_label("other"), None);
    }
}
