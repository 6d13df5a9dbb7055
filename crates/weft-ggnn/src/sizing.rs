//! The GGNN sizing rule (paper App. C.1.1; `shared/algorithms/ggnn.md` §1.1): how many layers,
//! segments and points per segment the hierarchy over `n` points has.

use std::ops::Range;

use weft_core::{Error, Result};

/// The layer and segment sizes of a GGNN hierarchy.
///
/// Layer `l >= 1` has `segments(l) = g^(layers-1-l)` segments of exactly `s` points; layer 0 has
/// `g^(layers-1)` segments, the first `s0_off` of `s0 + 1` points and the rest of `s0`. Child
/// segment `c = b mod g` of parent `b / g` sends `sg + [c < sg_off]` points up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// Points `N` (layer 0).
    pub n: usize,
    /// Segment size `S` of the upper layers (also the number of entry points).
    pub s: usize,
    /// Layers `L`.
    pub layers: usize,
    /// Growth factor `G`: segments merged per layer.
    pub g: usize,
    /// Base-layer segment size `S0`.
    pub s0: usize,
    /// Number of base segments holding `S0 + 1` points.
    pub s0_off: usize,
    /// Points each child segment sends up (`floor(S / G)`).
    pub sg: usize,
    /// Number of children of a parent that send one extra point (`S - SG * G`).
    pub sg_off: usize,
}

impl Sizing {
    /// Applies the sizing rule to `n` points with degree `k`, segment size `s` and `layers`
    /// layers. `growth = (n / s)^(1 / (layers - 1))` is computed in `f32` as the authors' code
    /// does (so that layer sizes match it); `G` is its floor or ceiling, whichever gives a base
    /// segment size closer to `s`, the floor when the ceiling's base segments would hold fewer
    /// than `k` points (base segments may still hold fewer than `k + 1` points, as in the
    /// paper's SIFT1M k = 40 configuration: the merges fill those rows). A single layer is one
    /// segment of `n` points.
    ///
    /// Fails with [`Error::InvalidParams`] when `n < s` (the upper layers would not fit) or the
    /// layer sizes overflow.
    pub fn new(n: usize, k: usize, s: usize, layers: usize) -> Result<Sizing> {
        if layers == 0 || s == 0 {
            return Err(Error::invalid_param(
                "layers",
                "need at least one layer and a positive segment size",
            ));
        }
        if layers == 1 {
            return Ok(Sizing {
                n,
                s,
                layers,
                g: 1,
                s0: n,
                s0_off: 0,
                sg: s,
                sg_off: 0,
            });
        }
        if n < s {
            return Err(Error::invalid_param(
                "segment_size",
                format!("segment size {s} is above the number of vectors ({n})"),
            ));
        }
        let e = (layers - 1) as u32;
        let growth = (n as f32 / s as f32).powf(1.0 / e as f32);
        let gf = (growth.floor() as usize).max(1);
        let gc = gf + 1;
        let pow = |g: usize| -> Result<usize> {
            g.checked_pow(e).ok_or_else(|| {
                Error::invalid_param("layers", format!("{layers} layers overflow the sizes"))
            })
        };
        // As in the authors' code: the base segment sizes are compared as floats.
        let s0f = n as f32 / pow(gf)? as f32;
        let s0c = pow(gc).map_or(0.0, |p| n as f32 / p as f32);
        let use_floor = (s0c as usize) < k || (s0f - s as f32).abs() < (s0c - s as f32).abs();
        let g = if use_floor { gf } else { gc };
        let s0 = n / pow(g)?;
        let s0_off = n - pow(g)? * s0;
        let sg = s / g;
        let sg_off = s - sg * g;
        let sizing = Sizing {
            n,
            s,
            layers,
            g,
            s0,
            s0_off,
            sg,
            sg_off,
        };
        // Every child must hold the points it sends up.
        let send = sg + usize::from(sg_off > 0);
        if s0 < send {
            return Err(Error::invalid_param(
                "segment_size",
                format!("base segments of {s0} points cannot send {send} points up"),
            ));
        }
        Ok(sizing)
    }

    /// Number of segments of layer `l`: `G^(L-1-l)`.
    pub fn segments(&self, l: usize) -> usize {
        self.g.pow((self.layers - 1 - l) as u32)
    }

    /// Number of points of layer `l`: `n` for layer 0, `S * G^(L-1-l)` above.
    pub fn layer_len(&self, l: usize) -> usize {
        if l == 0 {
            self.n
        } else {
            self.s * self.segments(l)
        }
    }

    /// Local ids of segment `b` of layer `l`.
    pub fn segment_range(&self, l: usize, b: usize) -> Range<usize> {
        if l == 0 {
            let start = b * self.s0 + b.min(self.s0_off);
            let len = self.s0 + usize::from(b < self.s0_off);
            start..start + len
        } else {
            b * self.s..(b + 1) * self.s
        }
    }

    /// The segment of layer `l` holding local id `v`.
    pub fn segment_of(&self, l: usize, v: usize) -> usize {
        if l == 0 {
            let big = self.s0_off * (self.s0 + 1);
            if v < big {
                v / (self.s0 + 1)
            } else {
                self.s0_off + (v - big) / self.s0.max(1)
            }
        } else {
            v / self.s
        }
    }

    /// Where child segment `b` of layer `l` writes its sampled points in layer `l + 1`: the
    /// first destination id and the count.
    pub fn upward_slots(&self, b: usize) -> (usize, usize) {
        let c = b % self.g;
        let parent = b / self.g;
        let m = self.sg + usize::from(c < self.sg_off);
        (parent * self.s + c * self.sg + c.min(self.sg_off), m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked configurations of the digest (§1.1), which reproduce the paper's Table 4.
    #[test]
    fn paper_configurations() {
        // (n, k, s) -> (g, s0, s0_off, sg, sg_off, [n1, n2, n3])
        let cases = [
            (
                1_000_000,
                24,
                32,
                (32, 30, 16_960, 1, 0, [32_768, 1_024, 32]),
            ),
            (1_000_000, 40, 32, (31, 33, 16_897, 1, 1, [30_752, 992, 32])),
            (290_000, 40, 32, (20, 36, 2_000, 1, 12, [12_800, 640, 32])),
            (290_000, 96, 64, (16, 70, 3_280, 4, 0, [16_384, 1_024, 64])),
            (
                1_183_514,
                96,
                64,
                (26, 67, 5_922, 2, 12, [43_264, 1_664, 64]),
            ),
            (1_000_000, 96, 64, (25, 64, 0, 2, 14, [40_000, 1_600, 64])),
        ];
        for (n, k, s, (g, s0, s0_off, sg, sg_off, ns)) in cases {
            let z = Sizing::new(n, k, s, 4).unwrap();
            assert_eq!(
                (z.g, z.s0, z.s0_off, z.sg, z.sg_off),
                (g, s0, s0_off, sg, sg_off),
                "n={n} k={k} s={s}"
            );
            assert_eq!([z.layer_len(1), z.layer_len(2), z.layer_len(3)], ns);
        }
    }

    /// Small cases checked by hand.
    #[test]
    fn small_cases_by_hand() {
        // n = 2000, s = 32: growth = 62.5^(1/3) = 3.97; G = 3 gives S0 = 74, G = 4 gives 31
        // (closer to 32, and >= k = 24): G = 4, S0 = 31, 2000 - 64 * 31 = 16 segments of 32.
        let z = Sizing::new(2000, 24, 32, 4).unwrap();
        assert_eq!((z.g, z.s0, z.s0_off, z.sg, z.sg_off), (4, 31, 16, 8, 0));
        assert_eq!(
            [z.layer_len(1), z.layer_len(2), z.layer_len(3)],
            [512, 128, 32]
        );
        assert_eq!(z.segment_range(0, 0), 0..32);
        assert_eq!(z.segment_range(0, 15), 480..512);
        assert_eq!(z.segment_range(0, 16), 512..543);
        assert_eq!(z.segment_range(0, 63), 1969..2000);
        assert_eq!(z.segment_of(0, 511), 15);
        assert_eq!(z.segment_of(0, 512), 16);
        assert_eq!(z.segment_of(0, 1999), 63);
        assert_eq!(z.upward_slots(5), (32 + 8, 8));
        // n = 64, s = 32: growth = 1.26; G = 2 gives S0 = 8 < k: floor, G = 1, S0 = 64.
        let z = Sizing::new(64, 24, 32, 4).unwrap();
        assert_eq!((z.g, z.s0, z.s0_off, z.sg), (1, 64, 0, 32));
        assert_eq!(
            [z.layer_len(1), z.layer_len(2), z.layer_len(3)],
            [32, 32, 32]
        );
        // n = 300, s = 32, k = 8: growth = 2.11; G = 2 gives 37, G = 3 gives 11: G = 2.
        let z = Sizing::new(300, 8, 32, 4).unwrap();
        assert_eq!((z.g, z.s0, z.s0_off, z.sg, z.sg_off), (2, 37, 4, 16, 0));
        // Every layer-0 point is in exactly one segment, segments tile the layer.
        for z in [
            Sizing::new(2000, 24, 32, 4).unwrap(),
            Sizing::new(300, 8, 32, 4).unwrap(),
            Sizing::new(5000, 40, 64, 3).unwrap(),
        ] {
            for l in 0..z.layers {
                let mut next = 0;
                for b in 0..z.segments(l) {
                    let r = z.segment_range(l, b);
                    assert_eq!(r.start, next);
                    for v in r.clone() {
                        assert_eq!(z.segment_of(l, v), b);
                    }
                    next = r.end;
                }
                assert_eq!(next, z.layer_len(l));
            }
            // Every parent segment receives exactly S points.
            let total: usize = (0..z.segments(0)).map(|b| z.upward_slots(b).1).sum();
            assert_eq!(total, z.layer_len(1));
        }
        // Too few points for the upper layers.
        assert!(matches!(
            Sizing::new(20, 8, 32, 4),
            Err(Error::InvalidParams { .. })
        ));
        // One layer: one segment of everything.
        let z = Sizing::new(20, 8, 32, 1).unwrap();
        assert_eq!(z.segment_range(0, 0), 0..20);
    }
}
