//! Checking bytes read back against the bytes expected.

/// Where `got` first differs from `want`, over the length both have: `None` when they agree.
/// The slices are compared whole first (a vectorised comparison) and searched byte by byte
/// only when they differ, so agreeing — the usual case — costs little.
pub(crate) fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    let n = got.len().min(want.len());
    let (got, want) = (&got[..n], &want[..n]);
    if got == want {
        return None;
    }
    got.iter().zip(want).position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_byte_is_found_over_the_common_length() {
        let want: Vec<u8> = (0..=255).collect();
        let mut got = want.clone();
        assert_eq!(first_difference(&got, &want), None);
        got[200] ^= 1;
        got[17] ^= 0x80;
        assert_eq!(first_difference(&got, &want), Some(17));
        assert_eq!(
            first_difference(&got[..10], &want),
            None,
            "the common length only"
        );
        assert_eq!(first_difference(&[], &want), None);
        assert_eq!(first_difference(&[1], &[2]), Some(0));
    }
}
