//! [`PerRole`]: one value for every role, held in an array indexed by the role.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

use serde::de::{Error as _, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Role;

/// A value for each [`Role`]: `[roles.ROLE]` of a config, the simulator's counters, … It
/// serializes as a map keyed by each role's serde name, in [`Role::ALL`] order, and reads
/// back only a map naming every role exactly once (a config's defaults layer supplies the
/// roles a file leaves out).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PerRole<T>([T; Role::COUNT]);

impl<T> PerRole<T> {
    /// The value `f(role)` for each role.
    pub fn from_fn(mut f: impl FnMut(Role) -> T) -> Self {
        PerRole(Role::ALL.map(&mut f))
    }

    /// Each role with its value, in [`Role::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Role, &T)> {
        Role::ALL.into_iter().zip(&self.0)
    }

    /// Each role with its value, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Role, &mut T)> {
        Role::ALL.into_iter().zip(&mut self.0)
    }

    /// The values, in [`Role::ALL`] order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }

    /// `f` of each role's value.
    pub fn map<U>(&self, mut f: impl FnMut(Role, &T) -> U) -> PerRole<U> {
        PerRole::from_fn(|role| f(role, &self[role]))
    }
}

impl<T> Index<Role> for PerRole<T> {
    type Output = T;
    fn index(&self, role: Role) -> &T {
        &self.0[role.index()]
    }
}

impl<T> IndexMut<Role> for PerRole<T> {
    fn index_mut(&mut self, role: Role) -> &mut T {
        &mut self.0[role.index()]
    }
}

impl<T: fmt::Debug> fmt::Debug for PerRole<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(r, v)| (r.as_str(), v)))
            .finish()
    }
}

impl<T: Serialize> Serialize for PerRole<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(Role::COUNT))?;
        for (role, value) in self.iter() {
            map.serialize_entry(&role, value)?;
        }
        map.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for PerRole<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Entries<T> {
            type Value = PerRole<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a table with one entry per role ({})", Role::names())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PerRole<T>, A::Error> {
                let mut values: [Option<T>; Role::COUNT] = std::array::from_fn(|_| None);
                while let Some(role) = map.next_key::<Role>()? {
                    let slot = &mut values[role.index()];
                    if slot.is_some() {
                        return Err(A::Error::custom(format!("role `{role}` given twice")));
                    }
                    *slot = Some(map.next_value()?);
                }
                let mut out = Vec::with_capacity(Role::COUNT);
                for (role, value) in Role::ALL.into_iter().zip(values) {
                    out.push(value.ok_or_else(|| A::Error::missing_field(role.as_str()))?);
                }
                let all: [T; Role::COUNT] = out
                    .try_into()
                    .map_err(|_| A::Error::custom("one value per role"))?;
                Ok(PerRole(all))
            }
        }
        d.deserialize_map(Entries(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_iteration_follow_the_roles() {
        let mut m = PerRole::from_fn(Role::index);
        assert_eq!(m[Role::Critique], Role::Critique.index());
        m[Role::Judge] = 99;
        assert_eq!(m[Role::Judge], 99);
        let roles: Vec<Role> = m.iter().map(|(r, _)| r).collect();
        assert_eq!(roles, Role::ALL);
        for (_, v) in m.iter_mut() {
            *v += 1;
        }
        assert_eq!((m[Role::Solution], m[Role::Judge]), (1, 100));
        assert_eq!(m.values().count(), Role::COUNT);
        assert_eq!(m.map(|r, v| (r, *v))[Role::Summary], (Role::Summary, 3));
    }

    /// A value per role written as a map keyed by the roles' serde names, in JSON and in
    /// TOML (config files), reads back unchanged.
    #[test]
    fn serde_round_trip_as_a_map_of_role_names() {
        let m = PerRole::from_fn(|r| format!("v-{}", r.index()));
        let json = serde_json::to_value(&m).expect("serializes");
        let obj = json.as_object().expect("a map");
        assert_eq!(obj.len(), Role::COUNT);
        for role in Role::ALL {
            assert_eq!(obj[role.as_str()], format!("v-{}", role.index()));
        }
        let back: PerRole<String> = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, m);

        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Doc {
            roles: PerRole<u32>,
        }
        let doc = Doc {
            roles: PerRole::from_fn(|r| r.index() as u32),
        };
        let text = toml::to_string(&doc).expect("toml");
        assert!(text.contains("guideline_judge = 6"), "{text}");
        assert_eq!(toml::from_str::<Doc>(&text).expect("reads"), doc);
    }

    #[test]
    fn a_map_missing_repeating_or_misnaming_a_role_is_refused() {
        let full = serde_json::to_value(PerRole::from_fn(Role::index)).expect("json");
        let mut missing = full.clone();
        missing.as_object_mut().expect("map").remove("summary");
        let e = serde_json::from_value::<PerRole<usize>>(missing).expect_err("missing");
        assert!(e.to_string().contains("missing field `summary`"), "{e}");

        let dup = r#"{"solution": 1, "solution": 2}"#;
        let e = serde_json::from_str::<PerRole<u32>>(dup).expect_err("twice");
        assert!(e.to_string().contains("role `solution` given twice"), "{e}");

        let mut unknown = full;
        unknown
            .as_object_mut()
            .expect("map")
            .insert("critic".into(), 0.into());
        let e = serde_json::from_value::<PerRole<usize>>(unknown).expect_err("unknown");
        assert!(e.to_string().contains("unknown role `critic`"), "{e}");
    }
}
