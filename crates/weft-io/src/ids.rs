//! Id files (ground truth, neighbour lists): `ivecs`, `ibin` and integer `npy`.

use std::path::Path;

use weft_core::{Error, NodeId, Result};

use crate::format::{Format, StoredElement};
use crate::write::RawWriter;

/// A row-major matrix of ids: `rows` lists of `cols` ids each (e.g. the exact k nearest
/// neighbours of each query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdMatrix {
    rows: usize,
    cols: usize,
    ids: Vec<NodeId>,
}

impl IdMatrix {
    /// Takes `rows * cols` ids in row-major order. `cols` must be at least 1.
    pub fn new(ids: Vec<NodeId>, rows: usize, cols: usize) -> Result<Self> {
        if cols == 0 {
            return Err(Error::InvalidInput(
                "an id matrix needs at least 1 column".into(),
            ));
        }
        if rows.checked_mul(cols) != Some(ids.len()) {
            return Err(Error::InvalidInput(format!(
                "{rows} rows of {cols} ids need {} ids, got {}",
                rows.saturating_mul(cols),
                ids.len()
            )));
        }
        Ok(IdMatrix { rows, cols, ids })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Ids per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `i` (panics when `i >= rows`, like slice indexing).
    pub fn row(&self, i: usize) -> &[NodeId] {
        &self.ids[i * self.cols..(i + 1) * self.cols]
    }

    /// The ids, row-major.
    pub fn as_slice(&self) -> &[NodeId] {
        &self.ids
    }

    /// The ids as `(rows, cols, ids)`.
    pub fn into_parts(self) -> (usize, usize, Vec<NodeId>) {
        (self.rows, self.cols, self.ids)
    }
}

/// Writes an id file atomically (temporary file + rename): `ivecs` (ids stored as `i32`
/// bit patterns, so [`weft_core::INVALID`] becomes `-1`), `ibin` (`u32`) or `npy` (`<u4`).
pub fn write_ids(path: impl AsRef<Path>, ids: &IdMatrix, format: Option<Format>) -> Result<()> {
    let path = path.as_ref();
    let format = Format::resolve(path, format)?;
    let element = match format {
        Format::Ivecs => StoredElement::I32,
        Format::Ibin | Format::Npy => StoredElement::U32,
        other => {
            return Err(Error::invalid_param(
                "format",
                format!("{other} holds vectors, not ids: write ids as ivecs, ibin or npy"),
            ));
        }
    };
    let mut writer = RawWriter::create(path, format, element, ids.cols, Some(ids.rows as u64))?;
    for row in ids.ids.chunks_exact(ids.cols) {
        writer.push_row(bytemuck::cast_slice(row))?;
    }
    writer.finish().map(|_| ())
}
