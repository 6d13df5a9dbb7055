//! Algorithm parameters.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::Result;

/// The parameters of one algorithm, shared by its CPU and GPU back ends.
///
/// Parameters are validated against the input shape before any work and are never silently
/// changed: an impossible value is an [`Error::InvalidParams`](crate::Error::InvalidParams).
pub trait Params:
    Clone + Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Checks these parameters for a dataset of `rows` vectors of dimension `dim`.
    fn validate(&self, rows: usize, dim: usize) -> Result<()>;
}

/// Parameters of an algorithm that has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoParams {}

impl Params for NoParams {
    fn validate(&self, _rows: usize, _dim: usize) -> Result<()> {
        Ok(())
    }
}
