//! Vector element types.

use std::fmt::Debug;

use half::f16;
use serde::{Deserialize, Serialize};

use crate::simd::{self, KernelSet};

/// The element type of a vector set, as stored in files and on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float ([`half::f16`]).
    F16,
    /// Unsigned byte.
    U8,
    /// Signed byte.
    I8,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
            DType::U8 | DType::I8 => 1,
        }
    }

    /// The lower-case name used in file headers, CLI flags and kernel names (`f32`, `f16`, `u8`, `i8`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::U8 => "u8",
            DType::I8 => "i8",
        }
    }

    /// Parses a name written by [`DType::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "float" => DType::F32,
            "f16" | "float16" | "half" => DType::F16,
            "u8" | "uint8" => DType::U8,
            "i8" | "int8" => DType::I8,
            _ => return None,
        })
    }

    /// The stable one-byte code used in weft's binary formats.
    pub const fn code(self) -> u8 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
        }
    }

    /// Inverse of [`DType::code`].
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(DType::F32),
            1 => Some(DType::F16),
            2 => Some(DType::U8),
            3 => Some(DType::I8),
            _ => None,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for u8 {}
    impl Sealed for i8 {}
}

/// A vector element type: `f32`, [`half::f16`], `u8` or `i8`. Sealed: the distance kernels and
/// the GPU kernels exist for exactly these four.
pub trait Element:
    bytemuck::Pod + Copy + Send + Sync + Debug + PartialEq + Default + sealed::Sealed + 'static
{
    /// The matching [`DType`].
    const DTYPE: DType;

    /// Converts to `f32` (exact for every type but large `f32` values, which are already `f32`).
    fn to_f32(self) -> f32;

    /// Converts from `f32`, rounding to nearest and saturating integers to their range.
    fn from_f32(v: f32) -> Self;

    /// Whether the value is finite (always true for integer types).
    fn is_finite(self) -> bool;

    /// The distance kernels for this type, chosen for the CPU this runs on.
    fn kernels() -> KernelSet<Self>;

    /// `value` in its variant of [`PerElement`] (what [`PerElement::new`] calls).
    #[doc(hidden)]
    fn wrap<F: ElementFamily>(value: F::Of<Self>) -> PerElement<F>;

    /// The value of `p` when it is this type's variant (what [`PerElement::get_mut`] calls).
    #[doc(hidden)]
    fn project_mut<F: ElementFamily>(p: &mut PerElement<F>) -> Option<&mut F::Of<Self>>;
}

/// A family of types with one member per element type (a GPU search session of `f32` data,
/// of `f16` data, ...), held by a [`PerElement`].
pub trait ElementFamily {
    /// The member for elements `T`.
    type Of<T: Element>;
}

/// One member of the family `F`, of whichever element type it was made for: a typed holder
/// for state whose element type is known only at run time (instead of `Box<dyn Any>` and a
/// downcast). [`PerElement::get_mut`] asks for it by element type.
pub enum PerElement<F: ElementFamily> {
    /// The `f32` member.
    F32(F::Of<f32>),
    /// The `f16` member.
    F16(F::Of<f16>),
    /// The `u8` member.
    U8(F::Of<u8>),
    /// The `i8` member.
    I8(F::Of<i8>),
}

impl<F: ElementFamily> PerElement<F> {
    /// `value`, the member for elements `T`.
    pub fn new<T: Element>(value: F::Of<T>) -> Self {
        T::wrap(value)
    }

    /// The member, when it was made for elements `T` (`None` for another element type).
    pub fn get_mut<T: Element>(&mut self) -> Option<&mut F::Of<T>> {
        T::project_mut(self)
    }

    /// The element type the member was made for.
    pub fn dtype(&self) -> DType {
        match self {
            PerElement::F32(_) => DType::F32,
            PerElement::F16(_) => DType::F16,
            PerElement::U8(_) => DType::U8,
            PerElement::I8(_) => DType::I8,
        }
    }
}

/// The [`Element::wrap`] and [`Element::project_mut`] of a type with variant `$variant`.
macro_rules! per_element_variant {
    ($variant:ident) => {
        fn wrap<F: ElementFamily>(value: F::Of<Self>) -> PerElement<F> {
            PerElement::$variant(value)
        }
        fn project_mut<F: ElementFamily>(p: &mut PerElement<F>) -> Option<&mut F::Of<Self>> {
            match p {
                PerElement::$variant(v) => Some(v),
                _ => None,
            }
        }
    };
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    fn kernels() -> KernelSet<Self> {
        simd::f32_kernels()
    }
    per_element_variant!(F32);
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f16::is_finite(self)
    }
    fn kernels() -> KernelSet<Self> {
        simd::f16_kernels()
    }
    per_element_variant!(F16);
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v.round().clamp(0.0, 255.0) as u8
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        true
    }
    fn kernels() -> KernelSet<Self> {
        simd::u8_kernels()
    }
    per_element_variant!(U8);
}

impl Element for i8 {
    const DTYPE: DType = DType::I8;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v.round().clamp(-128.0, 127.0) as i8
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        true
    }
    fn kernels() -> KernelSet<Self> {
        simd::i8_kernels()
    }
    per_element_variant!(I8);
}
