//! The rules the figures' verdicts are computed by, where more than one figure states them
//! (see [`super::figures`]: a stated number or range holds within ±10 %), and the arithmetic
//! they share.

/// How far from a stated number a measurement may lie, in percent (the ±10 % of [`near`]).
pub const BOUND: f64 = 10.0;

/// `a` relative to `b`, in percent.
pub fn pct(a: f64, b: f64) -> f64 {
    (a / b - 1.0) * 100.0
}

/// Whether `value` lies within ±10 % of what a paper states: a number (`lo == hi`) or the
/// range `lo..=hi` (10 % below its low end to 10 % above its high end). The same rule for
/// every statement that states a number.
pub fn near(value: f64, lo: f64, hi: f64) -> bool {
    value >= 0.9 * lo && value <= 1.1 * hi
}

/// The rule [`near`] tests, in words: "`what` within ±10 % of `stated` (`lo`-`hi` `unit`)".
pub fn near_rule(what: &str, stated: &str, lo: f64, hi: f64, unit: &str) -> String {
    // Four decimals at most, without trailing zeros: 9.18, 495, 515.7.
    let short = |x: f64| {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    format!(
        "{what} within ±10 % of {stated} ({}-{} {unit})",
        short(0.9 * lo),
        short(1.1 * hi)
    )
}
