//! The rules every graph search shares: the beam width a search uses when none is given, and
//! the one check that a beam width holds the `k` results. The CPU beam search, the GPU CAGRA
//! and GGNN searches, the facade, the CLI and the Python package all call these two functions.

use weft_core::{Error, Result};

/// The beam width a search of `k` neighbours uses when the caller gives none: 64, or for `k`
/// above 64, `k` rounded up to a multiple of 32 (`k = 100`: 128), so that the list always holds
/// the `k` results and keeps the GPU searches' 32-entry granularity.
pub fn default_beam_width(k: usize) -> usize {
    if k <= 64 { 64 } else { k.next_multiple_of(32) }
}

/// `beam_width`, or [`default_beam_width`] of `k` when it is `None`.
pub fn beam_width_or_default(beam_width: Option<usize>, k: usize) -> usize {
    beam_width.unwrap_or_else(|| default_beam_width(k))
}

/// Refuses a beam width below `k` ([`Error::InvalidParams`] named `beam_width`): every graph
/// search keeps its `k` results in its candidate list.
pub fn check_beam_width(beam_width: usize, k: usize) -> Result<()> {
    if beam_width < k {
        return Err(Error::invalid_param(
            "beam_width",
            format!(
                "the beam width {beam_width} is below k = {k}: the candidate list must hold the k \
                 results; give a beam width of at least k, or none for a default that fits k"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_beam_width_holds_k_and_rounds_to_32() {
        assert_eq!(default_beam_width(1), 64);
        assert_eq!(default_beam_width(10), 64);
        assert_eq!(default_beam_width(64), 64);
        assert_eq!(default_beam_width(65), 96);
        assert_eq!(default_beam_width(100), 128);
        for k in 1..3000 {
            let b = default_beam_width(k);
            assert!(b >= k && b.is_multiple_of(32), "k = {k}: {b}");
            assert!(check_beam_width(b, k).is_ok());
        }
        assert_eq!(beam_width_or_default(Some(16), 10), 16);
        assert_eq!(beam_width_or_default(None, 10), 64);
    }

    #[test]
    fn beam_width_below_k_is_refused_by_name() {
        let e = check_beam_width(9, 10).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidParams { name, .. } if name == "beam_width"),
            "{e}"
        );
        assert!(check_beam_width(10, 10).is_ok());
    }
}
