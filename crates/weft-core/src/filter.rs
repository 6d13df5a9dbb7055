//! [`Filter`]: which ids a filtered search may return.

use std::sync::Arc;

use crate::{Error, NodeId, Result};

/// The ids a search may return, as a bitset over the `n` ids of the data: bit `i % 32` of word
/// `i / 32` is set when id `i` is allowed (the layout of the GPU searches' filter argument).
///
/// Every search honours it the same way (the CPU beam search and GGNN search, the exact
/// search, the GPU CAGRA and GGNN searches, and `weft::Index` whichever runs): filtered-out
/// points are still traversed, so that the search reaches the allowed points behind them, but
/// only allowed points enter the results. When fewer than `k` allowed points are found (a
/// filter allowing fewer than `k` ids, or none at all), the remaining slots hold the "no
/// result" padding of every search, id [`crate::INVALID`] (`u32::MAX`) with distance
/// `+inf`; an empty filter is not an error, it gives a row of padding.
///
/// Cheap to clone (the words are shared). Constructors check the length against `n` and
/// ids against the range `0..n`, with [`Error::InvalidParams`] named `filter`.
#[derive(Clone, PartialEq, Eq)]
pub struct Filter {
    n: usize,
    words: Arc<[u32]>,
    allowed: usize,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("n", &self.n)
            .field("allowed", &self.allowed)
            .finish()
    }
}

/// Words of a bitset over `n` ids.
fn words_for(n: usize) -> usize {
    n.div_ceil(32)
}

impl Filter {
    fn from_parts(n: usize, words: Vec<u32>) -> Filter {
        let allowed = words.iter().map(|w| w.count_ones() as usize).sum();
        Filter {
            n,
            words: words.into(),
            allowed,
        }
    }

    /// Allows every one of `n` ids.
    pub fn all(n: usize) -> Filter {
        Filter::from_predicate(n, |_| true)
    }

    /// Allows none of `n` ids (every search then returns padding only).
    pub fn none(n: usize) -> Filter {
        Filter::from_parts(n, vec![0; words_for(n)])
    }

    /// Allows the ids `i < n` for which `allowed(i)` holds.
    pub fn from_predicate(n: usize, allowed: impl Fn(usize) -> bool) -> Filter {
        let mut words = vec![0u32; words_for(n)];
        for i in (0..n).filter(|&i| allowed(i)) {
            words[i / 32] |= 1 << (i % 32);
        }
        Filter::from_parts(n, words)
    }

    /// Allows the ids listed (in any order; repeats are allowed); an id `>= n` is an
    /// [`Error::InvalidParams`] naming its position in the list.
    pub fn from_ids(n: usize, ids: &[NodeId]) -> Result<Filter> {
        let mut words = vec![0u32; words_for(n)];
        for (pos, &id) in ids.iter().enumerate() {
            let i = id as usize;
            if i >= n {
                return Err(Error::invalid_param(
                    "filter",
                    format!("id {id} (entry {pos} of the list) is out of range (n = {n})"),
                ));
            }
            words[i / 32] |= 1 << (i % 32);
        }
        Ok(Filter::from_parts(n, words))
    }

    /// Allows id `i` when `mask[i]` is true (`n = mask.len()`).
    pub fn from_mask(mask: &[bool]) -> Filter {
        Filter::from_predicate(mask.len(), |i| mask[i])
    }

    /// A filter over `n` ids from its raw bitset: exactly `ceil(n / 32)` words, bits of ids
    /// `>= n` clear; else [`Error::InvalidParams`].
    pub fn from_words(n: usize, words: Vec<u32>) -> Result<Filter> {
        if words.len() != words_for(n) {
            return Err(Error::invalid_param(
                "filter",
                format!(
                    "a bitset over {n} ids has {} words, not {}",
                    words_for(n),
                    words.len()
                ),
            ));
        }
        if !n.is_multiple_of(32)
            && let Some(&last) = words.last()
            && last >> (n % 32) != 0
        {
            return Err(Error::invalid_param(
                "filter",
                format!("the bitset sets bits of ids at or beyond n = {n}"),
            ));
        }
        Ok(Filter::from_parts(n, words))
    }

    /// The number of ids it ranges over (the data's row count).
    pub fn n(&self) -> usize {
        self.n
    }

    /// How many ids it allows.
    pub fn count(&self) -> usize {
        self.allowed
    }

    /// Whether `id` is allowed (false for ids `>= n`).
    #[inline]
    pub fn contains(&self, id: NodeId) -> bool {
        let i = id as usize;
        i < self.n && (self.words[i / 32] >> (i % 32)) & 1 != 0
    }

    /// The bitset: `ceil(n / 32)` words, bit `i % 32` of word `i / 32` set when id `i` is
    /// allowed (what `CagraSearchParams::filter` takes).
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The allowed ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some((w * 32) as NodeId + b)
            })
        })
    }

    /// Checks that it ranges over `n` ids (a search's data rows); else
    /// [`Error::InvalidParams`] named `filter`.
    pub fn check_len(&self, n: usize) -> Result<()> {
        if self.n != n {
            return Err(Error::invalid_param(
                "filter",
                format!(
                    "the filter ranges over {} ids but the data has {n} points",
                    self.n
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_agree_and_validate() {
        let n = 70;
        let by_pred = Filter::from_predicate(n, |i| i % 3 == 0);
        let ids: Vec<NodeId> = (0..n as NodeId).filter(|i| i % 3 == 0).collect();
        let by_ids = Filter::from_ids(n, &ids).unwrap();
        let mask: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        assert_eq!(by_pred, by_ids);
        assert_eq!(by_pred, Filter::from_mask(&mask));
        assert_eq!(
            by_pred,
            Filter::from_words(n, by_pred.words().to_vec()).unwrap()
        );
        assert_eq!(by_pred.count(), ids.len());
        assert_eq!(by_pred.ids().collect::<Vec<_>>(), ids);
        assert!(by_pred.contains(69) && !by_pred.contains(68) && !by_pred.contains(70));
        assert!(matches!(
            Filter::from_ids(n, &[3, 70]),
            Err(Error::InvalidParams { ref name, ref reason }) if name == "filter" && reason.contains("entry 1")
        ));
        assert!(Filter::from_words(n, vec![0; 2]).is_err());
        assert!(Filter::from_words(n, vec![0, 0, 1 << 6]).is_err());
        assert!(Filter::from_words(n, vec![0, 0, 1 << 5]).is_ok());
        assert!(by_pred.check_len(n).is_ok() && by_pred.check_len(n + 1).is_err());
        assert_eq!(Filter::none(n).count(), 0);
        assert_eq!(Filter::all(n).count(), n);
        assert_eq!(Filter::all(64).words(), &[u32::MAX, u32::MAX]);
    }
}
