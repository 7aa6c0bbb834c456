//! The 95 % interval drawn around each Pass@1 point: a Student-t interval for the mean
//! over problems of the per-problem Pass@1 shares c_i(t) / n_i(t).
//!
//! Why this interval: Pass@1 is a mean of per-problem shares, not a count of successes
//! (each problem contributes a fraction of its N candidates, each judged by a mean over
//! judge repeats), and a problem's candidates are not independent of each other, so a
//! binomial (Wilson) interval over candidates would be too narrow. The problems are the
//! independent units: the interval is mean ± t(0.975, P − 1) · s / √P, with s the sample
//! standard deviation of the P per-problem shares, clipped to [0, 1]. With one problem
//! there is no interval; when every problem has the same share it has zero width.

use serde::{Deserialize, Serialize};

/// A closed interval of shares in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

/// Two-sided 95 % quantiles of Student's t (0.975 one-sided) for 1 to 30 degrees of
/// freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The normal quantile the t quantiles tend to.
const Z_975: f64 = 1.959_964;

/// t(0.975, df): the table up to 30 degrees of freedom, then the Cornish–Fisher expansion
/// around the normal quantile (within 0.001 of the exact value there). `df` ≥ 1.
pub fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        _ => {
            let (z, d) = (Z_975, df as f64);
            z + (z.powi(3) + z) / (4.0 * d)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

/// The sample standard deviation of `values` (n − 1 in the denominator); `None` for
/// fewer than two values.
pub fn sample_std_dev(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let squares = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
    Some((squares / (n - 1.0)).sqrt())
}

/// The 95 % t-interval of a mean of `n` shares with sample standard deviation `std_dev`,
/// clipped to `[0, 1]`; `None` for fewer than two values.
pub fn t_interval_95(mean: f64, std_dev: f64, n: usize) -> Option<Interval> {
    if n < 2 || !mean.is_finite() || !std_dev.is_finite() {
        return None;
    }
    let half = t_975(n - 1) * std_dev / (n as f64).sqrt();
    Some(Interval {
        lo: (mean - half).clamp(0.0, 1.0),
        hi: (mean + half).clamp(0.0, 1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_table_and_tend_to_the_normal_one() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        // Exact values: t(0.975, 40) = 2.0211, t(0.975, 120) = 1.9799.
        assert!((t_975(40) - 2.0211).abs() < 1e-3, "{}", t_975(40));
        assert!((t_975(120) - 1.9799).abs() < 1e-3, "{}", t_975(120));
        assert!((t_975(100_000) - Z_975).abs() < 1e-3);
        // Decreasing with the degrees of freedom, across the table's end too.
        for df in 1..200 {
            assert!(t_975(df) > t_975(df + 1), "df {df}");
        }
    }

    #[test]
    fn interval_is_mean_plus_minus_t_times_standard_error_clipped_to_shares() {
        let shares = [0.25, 0.5, 0.75, 1.0];
        let sd = sample_std_dev(&shares).expect("four values");
        assert!((sd - 0.322_749).abs() < 1e-6, "{sd}");
        let i = t_interval_95(0.625, sd, 4).expect("four problems");
        let half = 3.182 * sd / 2.0;
        assert!((i.lo - (0.625 - half)).abs() < 1e-12, "{i:?}");
        assert!((i.hi - 1.0).abs() < 1e-12, "clipped at 1: {i:?}");
        let low = t_interval_95(0.05, 0.1, 3).expect("three problems");
        assert_eq!(low.lo, 0.0, "clipped at 0");
    }

    #[test]
    fn one_problem_has_no_interval_and_equal_shares_a_zero_width_one() {
        assert_eq!(sample_std_dev(&[0.5]), None);
        assert_eq!(t_interval_95(0.5, 0.0, 1), None);
        let flat = sample_std_dev(&[0.5, 0.5, 0.5]).expect("three values");
        assert_eq!(
            t_interval_95(0.5, flat, 3),
            Some(Interval { lo: 0.5, hi: 0.5 })
        );
    }
}
