//! Distance metrics.

use serde::{Deserialize, Serialize};

/// How closeness is measured. Every metric is expressed as a distance: smaller is closer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[repr(i32)]
pub enum Metric {
    /// Squared Euclidean distance, `sum (a_i - b_i)^2`.
    #[default]
    L2Squared = 0,
    /// Negated inner product, `-a.b` (maximum inner product search).
    InnerProduct = 1,
    /// Cosine distance, `1 - a.b / (|a| |b|)`.
    Cosine = 2,
}

impl Metric {
    /// Every metric, for tests and sweeps.
    pub const ALL: [Metric; 3] = [Metric::L2Squared, Metric::InnerProduct, Metric::Cosine];

    /// The name used on the command line and in files (`l2`, `ip`, `cosine`).
    pub const fn name(self) -> &'static str {
        match self {
            Metric::L2Squared => "l2",
            Metric::InnerProduct => "ip",
            Metric::Cosine => "cosine",
        }
    }

    /// Parses `l2`/`sqeuclidean`/`euclidean`, `ip`/`inner_product`/`dot`, `cosine`/`angular`.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "l2" | "l2squared" | "l2_squared" | "sqeuclidean" | "euclidean" => Metric::L2Squared,
            "ip" | "inner_product" | "innerproduct" | "dot" | "mips" => Metric::InnerProduct,
            "cosine" | "cos" | "angular" => Metric::Cosine,
            _ => return None,
        })
    }

    /// The stable one-byte code used in weft's binary formats.
    pub const fn code(self) -> u8 {
        match self {
            Metric::L2Squared => 0,
            Metric::InnerProduct => 1,
            Metric::Cosine => 2,
        }
    }

    /// Inverse of [`Metric::code`].
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Metric::L2Squared),
            1 => Some(Metric::InnerProduct),
            2 => Some(Metric::Cosine),
            _ => None,
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Metric {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::from_name(s).ok_or_else(|| {
            crate::Error::invalid_param(
                "metric",
                format!("unknown metric `{s}` (use l2, ip or cosine)"),
            )
        })
    }
}
