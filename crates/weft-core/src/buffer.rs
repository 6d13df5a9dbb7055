//! Storage that is either owned or borrowed from a shared byte source (a memory-mapped file),
//! so loaded datasets and graphs need no copy.

use std::ops::Deref;
use std::sync::Arc;

use crate::{Error, Result};

/// Bytes that live as long as the handle: a memory map, a `Vec<u8>`, a static buffer, ...
pub trait ByteSource: Send + Sync + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
}

impl ByteSource for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl ByteSource for &'static [u8] {
    fn bytes(&self) -> &[u8] {
        self
    }
}

enum Repr<T> {
    Owned(Vec<T>),
    Shared {
        source: Arc<dyn ByteSource>,
        offset: usize,
        len: usize,
    },
}

/// A slice of `T` that is either an owned `Vec<T>` or a typed window into a [`ByteSource`].
/// Reads are free either way; the first mutable access of a shared slice copies it.
pub struct SharedSlice<T: bytemuck::Pod> {
    repr: Repr<T>,
}

impl<T: bytemuck::Pod> SharedSlice<T> {
    /// Wraps an owned vector.
    pub fn from_vec(v: Vec<T>) -> Self {
        SharedSlice {
            repr: Repr::Owned(v),
        }
    }

    /// A window of `len` elements starting at byte `offset` of `source`. Fails if the window is
    /// out of bounds or not aligned for `T`.
    pub fn from_source(source: Arc<dyn ByteSource>, offset: usize, len: usize) -> Result<Self> {
        let size = std::mem::size_of::<T>();
        let bytes = source.bytes();
        let end = len
            .checked_mul(size)
            .and_then(|b| b.checked_add(offset))
            .ok_or_else(|| Error::InvalidInput("shared slice size overflows".into()))?;
        if end > bytes.len() {
            return Err(Error::InvalidInput(format!(
                "shared slice [{offset}, {end}) exceeds the source's {} bytes",
                bytes.len()
            )));
        }
        let ptr = bytes[offset..].as_ptr();
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidInput(format!(
                "shared slice at byte {offset} is not aligned to {} bytes",
                std::mem::align_of::<T>()
            )));
        }
        Ok(SharedSlice {
            repr: Repr::Shared {
                source,
                offset,
                len,
            },
        })
    }

    /// Whether the data is borrowed from a shared source rather than owned.
    pub fn is_shared(&self) -> bool {
        matches!(self.repr, Repr::Shared { .. })
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(v) => v,
            Repr::Shared {
                source,
                offset,
                len,
            } => {
                let size = std::mem::size_of::<T>();
                bytemuck::cast_slice(&source.bytes()[*offset..*offset + *len * size])
            }
        }
    }

    /// Mutable access; copies a shared slice into an owned vector first.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        if let Repr::Shared { .. } = self.repr {
            let owned = self.as_slice().to_vec();
            self.repr = Repr::Owned(owned);
        }
        match &mut self.repr {
            Repr::Owned(v) => v,
            Repr::Shared { .. } => unreachable!("converted to owned above"),
        }
    }

    /// The elements as an owned vector (a copy when shared).
    pub fn into_vec(self) -> Vec<T> {
        match self.repr {
            Repr::Owned(v) => v,
            Repr::Shared { .. } => self.as_slice().to_vec(),
        }
    }
}

impl<T: bytemuck::Pod> Deref for SharedSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: bytemuck::Pod> Clone for SharedSlice<T> {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Owned(v) => SharedSlice::from_vec(v.clone()),
            Repr::Shared {
                source,
                offset,
                len,
            } => SharedSlice {
                repr: Repr::Shared {
                    source: Arc::clone(source),
                    offset: *offset,
                    len: *len,
                },
            },
        }
    }
}

impl<T: bytemuck::Pod + std::fmt::Debug> std::fmt::Debug for SharedSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSlice")
            .field("len", &self.len())
            .field("shared", &self.is_shared())
            .finish()
    }
}

impl<T: bytemuck::Pod> From<Vec<T>> for SharedSlice<T> {
    fn from(v: Vec<T>) -> Self {
        SharedSlice::from_vec(v)
    }
}
