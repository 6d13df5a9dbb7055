//! The registered algorithms as a typed value: [`Algorithm`], each variant holding that
//! algorithm's own parameter struct (and the `k` of a k-NN graph builder), for
//! [`crate::IndexBuilder`].
//!
//! A typed algorithm is handed to the same registry entry as its JSON form (the name, the
//! parameters serialised, `k`): one build path, whichever way the parameters are written.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::{Error, Result};

use crate::registry::{Produces, parse_params};

pub use weft_cagra::{CagraParams, KnnSource};
pub use weft_ggnn::GgnnParams;
pub use weft_grnnd::GrnndParams;
pub use weft_nndescent::NnDescentParams;
pub use weft_rnndescent::RnnDescentParams;

/// A graph-construction algorithm of the registry with its typed parameters.
///
/// The k-NN graph builders ([`Algorithm::Exact`], [`Algorithm::NnDescent`]) carry the `k` of
/// their graph; the search-graph builders set their degree through their parameters. Parameters
/// are checked against the data when the index is built ([`weft_core::Params::validate`]) and
/// are never adjusted: an impossible value is an [`Error::InvalidParams`].
///
/// ```
/// use weft::{Algorithm, CagraParams};
/// let knn = Algorithm::nndescent(16);
/// assert_eq!((knn.name(), knn.k()), ("nndescent", Some(16)));
/// let cagra = Algorithm::Cagra(CagraParams { graph_degree: 32, ..CagraParams::default() });
/// assert_eq!((cagra.name(), cagra.k()), ("cagra", None));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Algorithm {
    /// The exact k-NN graph by brute force (`exact`; CPU, and GPU with the `cuda` feature): the
    /// ground truth.
    Exact {
        /// Neighbours per vertex (at least 1, below the number of vectors).
        k: usize,
    },
    /// The NN-Descent k-NN graph (`nndescent`; CPU, and GNND on the GPU).
    NnDescent {
        /// Neighbours per vertex (at least 1, below the number of vectors).
        k: usize,
        /// Its parameters.
        params: NnDescentParams,
    },
    /// The RNN-Descent search graph (`rnndescent`; CPU).
    RnnDescent(RnnDescentParams),
    /// GRNND, RNN-Descent redesigned for the GPU (`grnnd`; GPU only: without a usable GPU its
    /// build is an [`Error::Unsupported`]).
    Grnnd(GrnndParams),
    /// CAGRA: a k-NN graph optimised into a search graph (`cagra`; CPU and GPU).
    Cagra(CagraParams),
    /// GGNN's hierarchical search graph (`ggnn`; CPU reference and GPU).
    Ggnn(GgnnParams),
}

impl Algorithm {
    /// The exact k-NN graph of `k` neighbours per vertex.
    pub fn exact(k: usize) -> Self {
        Algorithm::Exact { k }
    }

    /// The NN-Descent k-NN graph of `k` neighbours per vertex, default parameters.
    pub fn nndescent(k: usize) -> Self {
        Algorithm::NnDescent {
            k,
            params: NnDescentParams::default(),
        }
    }

    /// The name it is registered under (`weft algos`, `--algo`).
    pub fn name(&self) -> &'static str {
        match self {
            Algorithm::Exact { .. } => "exact",
            Algorithm::NnDescent { .. } => "nndescent",
            Algorithm::RnnDescent(_) => "rnndescent",
            Algorithm::Grnnd(_) => "grnnd",
            Algorithm::Cagra(_) => "cagra",
            Algorithm::Ggnn(_) => "ggnn",
        }
    }

    /// The `k` of a k-NN graph builder; `None` for a search-graph builder.
    pub fn k(&self) -> Option<usize> {
        match self {
            Algorithm::Exact { k } | Algorithm::NnDescent { k, .. } => Some(*k),
            Algorithm::RnnDescent(_)
            | Algorithm::Grnnd(_)
            | Algorithm::Cagra(_)
            | Algorithm::Ggnn(_) => None,
        }
    }

    /// What it builds.
    pub fn produces(&self) -> Produces {
        match self.k() {
            Some(_) => Produces::KnnGraph,
            None => Produces::SearchGraph,
        }
    }

    /// The parameters as the JSON object the registry takes (every field written out). An
    /// [`Error::InvalidParams`] when a value has no faithful JSON form (a NaN, say): the JSON
    /// is read back and must give the same parameters.
    pub fn params_json(&self) -> Result<Value> {
        match self {
            Algorithm::Exact { .. } => Ok(Value::Object(Default::default())),
            Algorithm::NnDescent { params, .. } => faithful_json(self.name(), params),
            Algorithm::RnnDescent(p) | Algorithm::Grnnd(p) => faithful_json(self.name(), p),
            Algorithm::Cagra(p) => faithful_json(self.name(), p),
            Algorithm::Ggnn(p) => faithful_json(self.name(), p),
        }
    }

    /// The typed algorithm of a JSON description, as `weft build` and config files write it:
    /// the registered `name`, `params` merged over its defaults (unknown keys refused; `null`
    /// for the defaults), and `k`, required by the k-NN graph builders and refused by the
    /// others. Parameters are checked against the data only when an index is built.
    pub fn from_json(name: &str, params: &Value, k: Option<usize>) -> Result<Algorithm> {
        let name = name.to_ascii_lowercase();
        let need_k = |k: Option<usize>| {
            k.ok_or_else(|| {
                Error::invalid_param("k", format!("`{name}` builds a k-NN graph and needs k"))
            })
        };
        let no_k = |k: Option<usize>| match k {
            None => Ok(()),
            Some(_) => Err(Error::invalid_param(
                "k",
                format!(
                    "`{name}` builds a search graph: set its degree through the parameters, not k"
                ),
            )),
        };
        Ok(match name.as_str() {
            "exact" => {
                let _: weft_core::NoParams = parse_params("exact", params)?;
                Algorithm::Exact { k: need_k(k)? }
            }
            "nndescent" => Algorithm::NnDescent {
                k: need_k(k)?,
                params: parse_params("nndescent", params)?,
            },
            "rnndescent" => {
                no_k(k)?;
                Algorithm::RnnDescent(parse_params("rnndescent", params)?)
            }
            "grnnd" => {
                no_k(k)?;
                Algorithm::Grnnd(parse_params("grnnd", params)?)
            }
            "cagra" => {
                no_k(k)?;
                Algorithm::Cagra(parse_params("cagra", params)?)
            }
            "ggnn" => {
                no_k(k)?;
                Algorithm::Ggnn(parse_params("ggnn", params)?)
            }
            other => {
                return Err(Error::invalid_param(
                    "algorithm",
                    format!(
                        "unknown algorithm `{other}` (typed algorithms: exact, nndescent, \
                         rnndescent, grnnd, cagra, ggnn)"
                    ),
                ));
            }
        })
    }
}

/// `params` as JSON, refused unless reading it back gives `params` again.
fn faithful_json<P>(algorithm: &str, params: &P) -> Result<Value>
where
    P: Serialize + DeserializeOwned + PartialEq,
{
    let json = serde_json::to_value(params)
        .map_err(|e| Error::invalid_param("params", format!("`{algorithm}`: {e}")))?;
    let back: P = serde_json::from_value(json.clone()).map_err(|e| {
        Error::invalid_param(
            "params",
            format!("`{algorithm}`: a value has no JSON form ({e})"),
        )
    })?;
    if back != *params {
        return Err(Error::invalid_param(
            "params",
            format!("`{algorithm}`: a value does not survive its JSON form (a NaN?)"),
        ));
    }
    Ok(json)
}
