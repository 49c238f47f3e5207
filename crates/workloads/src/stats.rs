//! Small order statistics over repeated measurements.

/// Median of a non-empty slice (mean of the middle two for even lengths).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
