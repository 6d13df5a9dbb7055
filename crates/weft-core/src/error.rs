//! The error type shared by every weft crate.

use std::path::PathBuf;

/// Shorthand for `std::result::Result<T, weft_core::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in weft. Each variant names what was wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two things that must agree in size do not (base vs query dimension, graph vs data rows, ...).
    #[error("dimension mismatch in {what}: expected {expected}, found {found}")]
    DimensionMismatch {
        /// What was being compared.
        what: String,
        /// The size that was required.
        expected: usize,
        /// The size that was found.
        found: usize,
    },
    /// A parameter is impossible for this input. Parameters are never silently adjusted.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParams {
        /// The parameter's name as users write it.
        name: String,
        /// Why the value cannot be used.
        reason: String,
    },
    /// The input data itself cannot be used (empty set, wrong shape, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A NaN or infinite value where only finite values are allowed.
    #[error("non-finite value ({value}) at row {row}, column {col}")]
    NonFinite {
        /// Row (vector) number, from 0.
        row: usize,
        /// Column (dimension) number, from 0.
        col: usize,
        /// The offending value.
        value: f32,
    },
    /// A finite `f32` vector so long that distances involving it could overflow `f32` (to
    /// infinity, or NaN for inner products of such values): its Euclidean norm is above
    /// [`crate::dataset::MAX_NORM`]. Every builder and search refuses such data alike
    /// ([`crate::DatasetView::check_finite`]).
    #[error(
        "vector at row {row} is too large: its norm {norm:e} exceeds {limit:e}, beyond which \
         distances overflow f32; scale the data down"
    )]
    TooLarge {
        /// Row (vector) number, from 0.
        row: usize,
        /// Its Euclidean norm (computed in `f64`; may be infinite).
        norm: f64,
        /// [`crate::dataset::MAX_NORM`].
        limit: f64,
    },
    /// A graph breaks one of its invariants.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// The operation exists but not for this input, build or machine.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The work was cancelled through its [`crate::CancelToken`].
    #[error("cancelled")]
    Cancelled,
    /// An operating-system I/O error on a named file.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file that is malformed: bad header, truncated body, wrong checksum, ...
    #[error("malformed file {}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Device memory would not suffice; said before allocating.
    #[error("out of device memory: {needed} bytes needed, {free} bytes free")]
    OutOfDeviceMemory {
        /// Bytes the operation needs.
        needed: u64,
        /// Bytes available to it (free memory or the configured budget).
        free: u64,
    },
    /// A GPU driver, compiler or launch error.
    #[error("GPU error: {0}")]
    Gpu(String),
}

impl Error {
    /// An [`Error::InvalidParams`] for parameter `name`.
    pub fn invalid_param(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidParams {
            name: name.into(),
            reason: reason.into(),
        }
    }

    /// An [`Error::Io`] on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Format`] on `path`.
    pub fn format(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// An [`Error::DimensionMismatch`].
    pub fn dim_mismatch(what: impl Into<String>, expected: usize, found: usize) -> Self {
        Error::DimensionMismatch {
            what: what.into(),
            expected,
            found,
        }
    }
}

/// Checks the `k` of a k-NN query against `n` candidates: `1 <= k <= n`.
pub fn check_k(k: usize, n: usize) -> Result<()> {
    if k == 0 {
        return Err(Error::invalid_param("k", "k must be at least 1"));
    }
    if k > n {
        return Err(Error::invalid_param(
            "k",
            format!("k = {k} exceeds the number of candidates n = {n}"),
        ));
    }
    Ok(())
}

/// Checks the `k` of a k-NN graph over `n` points, whose rows exclude the point itself:
/// `1 <= k <= n - 1`.
pub fn check_graph_k(k: usize, n: usize) -> Result<()> {
    if n < 2 {
        return Err(Error::InvalidInput(format!(
            "a k-NN graph needs at least 2 points, got {n}"
        )));
    }
    if k == 0 {
        return Err(Error::invalid_param("k", "k must be at least 1"));
    }
    if k >= n {
        return Err(Error::invalid_param(
            "k",
            format!("k = {k} must be below n = {n} (a point is not its own neighbour)"),
        ));
    }
    Ok(())
}
