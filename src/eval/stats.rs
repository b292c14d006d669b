//! The statistics of `keet eval`: a 95% Wilson score interval for an accuracy, and the exact
//! two-sided sign test (a binomial test with p = 1/2 on the discordant pairs) for a paired
//! comparison of two formats on the same questions. Both are a few lines of closed-form arithmetic,
//! exact where it matters (the binomial tail is summed term by term in log space), so no crate is
//! pulled in for them.

/// The 97.5% quantile of the standard normal distribution (two-sided 95%).
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval for `correct` of `n`, in percent: `(low, high)`. `(0, 100)` when
/// `n` is 0. Wilson's interval keeps its coverage at small n and near 0% or 100%, where the normal
/// approximation (p ± z·sqrt(p(1-p)/n)) collapses to a point.
pub fn wilson_pct(correct: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 100.0);
    }
    let n_f = n as f64;
    let p = correct as f64 / n_f;
    let z2 = Z_95 * Z_95;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = Z_95 * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    (100.0 * (centre - half).max(0.0), 100.0 * (centre + half).min(1.0))
}

/// ln(n!) by summation (n is a count of questions: at most a few thousand).
fn ln_factorial(n: u64) -> f64 {
    (2..=n).map(|k| (k as f64).ln()).sum()
}

/// The exact two-sided sign test: `wins` pairs where the format was right and the other wrong,
/// `losses` the reverse. Under the null hypothesis each discordant pair goes either way with
/// probability 1/2, so the p-value is twice the smaller binomial tail, capped at 1 (as R's
/// `binom.test(wins, wins + losses)` computes it for p = 1/2, where the distribution is
/// symmetric). No discordant pairs: p = 1.
pub fn sign_test_p(wins: usize, losses: usize) -> f64 {
    let n = (wins + losses) as u64;
    if n == 0 {
        return 1.0;
    }
    let k = wins.min(losses) as u64;
    let ln_n = ln_factorial(n);
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    // P(X <= k) = sum_{i=0}^{k} C(n, i) / 2^n, each term from logs (no overflow or underflow).
    let mut ln_fact_i = 0.0;
    let mut tail = 0.0;
    for i in 0..=k {
        if i > 1 {
            ln_fact_i += (i as f64).ln();
        }
        let ln_term = ln_n - ln_fact_i - ln_factorial(n - i) - ln_half_n;
        tail += ln_term.exp();
    }
    (2.0 * tail).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    /// Values from R 4.x: `binom.test(x, n, 0.5)$p.value`.
    #[test]
    fn sign_test_matches_r_binom_test() {
        assert_relative_eq!(sign_test_p(0, 5), 0.0625, max_relative = 1e-12);
        assert_relative_eq!(sign_test_p(2, 8), 0.109375, max_relative = 1e-12);
        assert_relative_eq!(sign_test_p(1, 9), 0.021484375, max_relative = 1e-12);
        assert_relative_eq!(sign_test_p(9, 1), 0.021484375, max_relative = 1e-12);
        // binom.test(7, 20): 0.2631760
        assert_relative_eq!(sign_test_p(7, 13), 0.263176, max_relative = 1e-5);
        // binom.test(30, 100): 7.85013e-05
        assert_relative_eq!(sign_test_p(30, 70), 7.85013e-05, max_relative = 1e-5);
        assert_eq!(sign_test_p(5, 5), 1.0);
        assert_eq!(sign_test_p(0, 0), 1.0);
        // Large n stays finite (a plain 2^-n would underflow past n = 1074).
        let p = sign_test_p(900, 1100);
        assert!(p > 0.0 && p < 1e-5, "{p}");
    }

    /// Values from R's `prop.test(x, n, correct = FALSE)$conf.int` (the Wilson interval).
    #[test]
    fn wilson_matches_known_values() {
        let (lo, hi) = wilson_pct(7, 10);
        assert_relative_eq!(lo, 39.67781, max_relative = 1e-5);
        assert_relative_eq!(hi, 89.22087, max_relative = 1e-5);
        let (lo, hi) = wilson_pct(0, 10);
        assert_relative_eq!(lo, 0.0);
        assert_relative_eq!(hi, 27.75328, max_relative = 1e-5);
        let (lo, hi) = wilson_pct(10, 10);
        assert_relative_eq!(lo, 72.24672, max_relative = 1e-5);
        assert_relative_eq!(hi, 100.0);
        assert_eq!(wilson_pct(0, 0), (0.0, 100.0));
    }
}
