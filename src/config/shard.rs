//! Sharded runs: which problems a shard runs (`run.shard = "I/N"`), and how a cluster's
//! job array says which shard a task is.
//!
//! A problem belongs to shard `hash(problem id) mod N`, with a hash fixed in this file
//! (not `std`'s, whose keys are random, nor one that may change between versions): the
//! split depends only on the ids, never on the dataset's order or on which shards ran
//! first, and every problem of the dataset lands in exactly one of the N shards. Since a
//! problem's randomness depends only on the run's seed and the problem's id, a problem
//! gives the same calls and answers whichever shard runs it, and `tmas merge` of N shards
//! equals the unsharded run.
//!
//! ```
//! use tmas::config::Shard;
//! let shard: Shard = "1/3".parse().unwrap();
//! let in_some_shard = (0..3).filter(|i| Shard::new(*i, 3).unwrap().contains("p-17")).count();
//! assert_eq!(in_some_shard, 1);
//! assert_eq!(shard.to_string(), "1/3");
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::sim::rng::hash_str;

/// Seed of the shard hash; fixed, so a shard's problems never change.
const SHARD_HASH_SEED: u64 = 0x7368_6172_6473; // "shards"

/// Shard `index` of `count` (`0 ≤ index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Shard `index` of `count`, or why that is not a shard.
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 {
            return Err("a run has at least one shard (N ≥ 1)".into());
        }
        if index >= count {
            return Err(format!(
                "shard {index} of {count} does not exist: shards are numbered 0 to {}",
                count - 1
            ));
        }
        Ok(Self { index, count })
    }

    /// Whether the problem `problem_id` is this shard's.
    pub fn contains(&self, problem_id: &str) -> bool {
        hash_str(SHARD_HASH_SEED, problem_id) % u64::from(self.count) == u64::from(self.index)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (i, n) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a shard (expected I/N, e.g. 0/4)"))?;
        let number = |text: &str, what: &str| {
            text.trim().parse::<u32>().map_err(|_| {
                format!("{s:?}: {what} {text:?} is not a whole number (expected I/N, e.g. 0/4)")
            })
        };
        Self::new(number(i, "shard index")?, number(n, "shard count")?)
    }
}

impl Serialize for Shard {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Shard {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a shard given as `auto` was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSource {
    /// A Slurm job array: `SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN` of
    /// `SLURM_ARRAY_TASK_COUNT`.
    Slurm,
    /// A Kubernetes Indexed Job: `JOB_COMPLETION_INDEX`, of a count given by `--shards`
    /// or `TMAS_SHARDS` (the Job's `completions`, which Kubernetes does not expose).
    Kubernetes,
}

impl fmt::Display for ShardSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ShardSource::Slurm => {
                "Slurm (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT)"
            }
            ShardSource::Kubernetes => "Kubernetes (JOB_COMPLETION_INDEX)",
        })
    }
}

/// The shard of this task from its environment (`var` reads a variable): a Slurm array
/// task first, then a Kubernetes Indexed Job whose shard count is `count` (from
/// `--shards`) or `TMAS_SHARDS`. Errors name the variables that were missing or wrong.
pub fn shard_from_env(
    var: impl Fn(&str) -> Option<String>,
    count: Option<u32>,
) -> Result<(Shard, ShardSource), String> {
    let number = |name: &str| -> Result<Option<u32>, String> {
        var(name)
            .map(|v| {
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{name}={v:?} is not a whole number"))
            })
            .transpose()
    };
    if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
        let task_count = number("SLURM_ARRAY_TASK_COUNT")?.ok_or(
            "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (run under `sbatch --array`)",
        )?;
        let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let index = id.checked_sub(min).ok_or_else(|| {
            format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")
        })?;
        let shard = Shard::new(index, task_count).map_err(|e| {
            format!("{e} (SLURM_ARRAY_TASK_ID {id} − SLURM_ARRAY_TASK_MIN {min}; an array with gaps or a step, such as --array=0-9:2, cannot be sharded by task id)")
        })?;
        return Ok((shard, ShardSource::Slurm));
    }
    if let Some(index) = number("JOB_COMPLETION_INDEX")? {
        let count = match count {
            Some(n) => n,
            None => number("TMAS_SHARDS")?.ok_or(
                "JOB_COMPLETION_INDEX is set but the shard count is not: pass --shards N or set TMAS_SHARDS (the Job's completions)",
            )?,
        };
        return Ok((Shard::new(index, count)?, ShardSource::Kubernetes));
    }
    Err("--shard auto: neither a Slurm array task (SLURM_ARRAY_TASK_ID) nor a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) is set; give the shard as I/N".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_in_exactly_one_shard_whatever_the_count() {
        for count in [1, 3, 7] {
            for i in 0..200 {
                let id = format!("problem-{i}");
                let owners = (0..count)
                    .filter(|&s| Shard::new(s, count).unwrap().contains(&id))
                    .count();
                assert_eq!(owners, 1, "{id} in {count} shards");
            }
        }
        // The split is spread: no shard of 3 gets fewer than a fifth of 300 ids.
        for s in 0..3 {
            let shard = Shard::new(s, 3).unwrap();
            let n = (0..300)
                .filter(|i| shard.contains(&format!("p{i}")))
                .count();
            assert!(n > 60, "shard {s}: {n} of 300");
        }
    }

    #[test]
    fn the_split_is_fixed() {
        // The hash is part of the on-disk contract: a re-queued shard must find its
        // problems where they were, with any build.
        let owner = |id: &str| (0..4).find(|&i| Shard::new(i, 4).unwrap().contains(id));
        let owners: Vec<Option<u32>> = ["a", "b", "c", "d", "imo-2024-p1"]
            .iter()
            .map(|id| owner(id))
            .collect();
        assert_eq!(owners, [Some(1), Some(2), Some(0), Some(2), Some(3)]);
    }

    #[test]
    fn parses_and_refuses_with_the_reason() {
        assert_eq!("2/5".parse::<Shard>(), Ok(Shard { index: 2, count: 5 }));
        assert!(
            "5/5"
                .parse::<Shard>()
                .unwrap_err()
                .contains("numbered 0 to 4")
        );
        assert!("0/0".parse::<Shard>().unwrap_err().contains("at least one"));
        assert!("1-3".parse::<Shard>().unwrap_err().contains("expected I/N"));
        assert!("a/3".parse::<Shard>().unwrap_err().contains("shard index"));
    }

    #[test]
    fn auto_reads_slurm_then_kubernetes() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_MIN", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]);
        assert_eq!(
            shard_from_env(slurm, None),
            Ok((Shard::new(2, 4).unwrap(), ShardSource::Slurm))
        );
        let k8s = env(&[("JOB_COMPLETION_INDEX", "1"), ("TMAS_SHARDS", "3")]);
        assert_eq!(
            shard_from_env(k8s, None),
            Ok((Shard::new(1, 3).unwrap(), ShardSource::Kubernetes))
        );
        assert_eq!(
            shard_from_env(k8s, Some(2)).map(|s| s.0),
            Ok(Shard::new(1, 2).unwrap()),
            "--shards wins over TMAS_SHARDS"
        );
        let k8s_no_count = env(&[("JOB_COMPLETION_INDEX", "1")]);
        assert!(
            shard_from_env(k8s_no_count, None)
                .unwrap_err()
                .contains("--shards N")
        );
        assert!(
            shard_from_env(env(&[]), None)
                .unwrap_err()
                .contains("neither")
        );
        let gap = env(&[
            ("SLURM_ARRAY_TASK_ID", "9"),
            ("SLURM_ARRAY_TASK_COUNT", "5"),
        ]);
        assert!(shard_from_env(gap, None).unwrap_err().contains("gaps"));
    }
}
