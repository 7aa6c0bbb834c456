//! The latency model: a base delay per request (none, fixed, or lognormal) plus, set
//! separately in [`super::SimOptions`], a per-output-token time so latency grows with
//! output length.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rng::SimRng;

/// Base delay of one request. Written as a string: `none` (or `0`), `fixed:200ms`,
/// `lognormal:200ms:1.0` (median, sigma of the underlying normal).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LatencyModel {
    #[default]
    None,
    Fixed(Duration),
    LogNormal {
        median: Duration,
        sigma: f64,
    },
}

/// Longest base delay a lognormal draw may produce (keeps a heavy tail finite).
const MAX_DRAW: Duration = Duration::from_secs(3600);

impl LatencyModel {
    /// Draws one base delay.
    pub fn draw(&self, rng: &mut SimRng) -> Duration {
        match *self {
            LatencyModel::None => Duration::ZERO,
            LatencyModel::Fixed(d) => d,
            LatencyModel::LogNormal { median, sigma } => {
                let factor = (sigma * rng.normal()).exp();
                let secs = median.as_secs_f64() * factor;
                Duration::try_from_secs_f64(secs)
                    .unwrap_or(MAX_DRAW)
                    .min(MAX_DRAW)
            }
        }
    }

    /// The mean delay (a lognormal's is median · e^(σ²/2)), for sizing workloads.
    pub fn mean(&self) -> Duration {
        match *self {
            LatencyModel::None => Duration::ZERO,
            LatencyModel::Fixed(d) => d,
            LatencyModel::LogNormal { median, sigma } => {
                Duration::try_from_secs_f64(median.as_secs_f64() * (sigma * sigma / 2.0).exp())
                    .unwrap_or(MAX_DRAW)
                    .min(MAX_DRAW)
            }
        }
    }
}

/// Parses `250ms`, `1.5s`, `800us`, `2m`. The unit is required: `fixed:200` could mean
/// milliseconds or seconds, and a silent guess of the wrong one makes a run 1000× off.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (expected e.g. 200ms, 1.5s, 800us)"))?;
    let secs = match unit.trim() {
        "" => {
            return Err(format!(
                "{s:?} has no unit (write e.g. {s}ms or {s}s; units: us, ms, s, m)"
            ));
        }
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "s" => value,
        "m" | "min" => value * 60.0,
        other => {
            return Err(format!(
                "{s:?}: unknown duration unit {other:?} (use us, ms, s or m)"
            ));
        }
    };
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{s:?} is not a valid non-negative duration"))
}

fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

impl FromStr for LatencyModel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() || t == "none" || t == "0" {
            return Ok(LatencyModel::None);
        }
        let mut parts = t.split(':');
        let kind = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        match (kind, rest.as_slice()) {
            ("fixed", [d]) => Ok(LatencyModel::Fixed(parse_duration(d)?)),
            ("lognormal", [m, sigma]) => {
                let median = parse_duration(m)?;
                let sigma: f64 = sigma
                    .trim()
                    .parse()
                    .map_err(|_| format!("{t:?}: sigma {sigma:?} is not a number"))?;
                if !(0.0..=5.0).contains(&sigma) {
                    return Err(format!("{t:?}: sigma must be within 0..=5 (got {sigma})"));
                }
                Ok(LatencyModel::LogNormal { median, sigma })
            }
            _ => Err(format!(
                "{t:?} is not a latency model (expected none, fixed:200ms or lognormal:200ms:1.0)"
            )),
        }
    }
}

impl fmt::Display for LatencyModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LatencyModel::None => f.write_str("none"),
            LatencyModel::Fixed(d) => write!(f, "fixed:{}", format_duration(*d)),
            LatencyModel::LogNormal { median, sigma } => {
                write!(f, "lognormal:{}:{sigma}", format_duration(*median))
            }
        }
    }
}

impl TryFrom<String> for LatencyModel {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<LatencyModel> for String {
    fn from(m: LatencyModel) -> String {
        m.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        for s in ["none", "fixed:200ms", "lognormal:200ms:1", "fixed:250us"] {
            let m: LatencyModel = s.parse().unwrap();
            assert_eq!(m.to_string().parse::<LatencyModel>().unwrap(), m, "{s}");
        }
        assert_eq!("0".parse::<LatencyModel>().unwrap(), LatencyModel::None);
        assert_eq!(
            "fixed:1.5s".parse::<LatencyModel>().unwrap(),
            LatencyModel::Fixed(Duration::from_millis(1500))
        );
        for bad in [
            "fixed",
            "fixed:abc",
            "lognormal:200ms",
            "uniform:1s",
            "fixed:3parsecs",
            "lognormal:1s:-1",
            "fixed:200",
            "lognormal:200:1.0",
        ] {
            assert!(bad.parse::<LatencyModel>().is_err(), "{bad}");
        }
        let unitless = "fixed:200".parse::<LatencyModel>().unwrap_err();
        assert!(
            unitless.contains("no unit") && unitless.contains("200ms"),
            "{unitless}"
        );
    }

    #[test]
    fn lognormal_median_is_about_right() {
        let m = LatencyModel::LogNormal {
            median: Duration::from_millis(100),
            sigma: 1.0,
        };
        let mut rng = SimRng::new(11);
        let mut draws: Vec<Duration> = (0..4001).map(|_| m.draw(&mut rng)).collect();
        draws.sort();
        let med = draws[2000].as_secs_f64();
        assert!((0.08..0.125).contains(&med), "median {med}");
        assert!(draws[4000] > Duration::from_millis(500), "no tail");
    }
}
