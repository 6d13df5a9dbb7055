//! numpy arrays in: the element types weft reads (`float32`, `float16`, `uint8`, `int8`), used
//! in place when C-contiguous, converted (one copy) otherwise.

use numpy::{
    Element as NpElement, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;
use weft::core::buffer::{ByteSource, SharedSlice};
use weft::{AnyDataset, DType, Dataset, DatasetView, Element};

use crate::errors::err;

/// The `numpy` module, imported once.
static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `numpy`.
pub(crate) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || py.import("numpy").map(|m| m.unbind()))
        .map(|m| m.bind(py))
}

/// A 1-D or 2-D numpy array of one of weft's element types, C-contiguous, borrowed read-only.
pub(crate) enum Matrix<'py> {
    /// `float32`.
    F32(PyReadonlyArrayDyn<'py, f32>),
    /// `float16`.
    F16(PyReadonlyArrayDyn<'py, half::f16>),
    /// `uint8`.
    U8(PyReadonlyArrayDyn<'py, u8>),
    /// `int8`.
    I8(PyReadonlyArrayDyn<'py, i8>),
}

/// An array handed in by Python, ready to be read as a [`DatasetView`].
pub(crate) struct Input<'py> {
    /// The elements.
    pub matrix: Matrix<'py>,
    /// Rows (1 for a 1-D array).
    pub rows: usize,
    /// Elements per row.
    pub dim: usize,
    /// Whether the array was 1-D (a single vector).
    pub one_d: bool,
    /// Whether `matrix` is the caller's own array (no conversion was needed).
    pub in_place: bool,
}

/// The weft element type of a numpy dtype, if it is one (native byte order).
fn dtype_of(array: &Bound<'_, PyUntypedArray>) -> Option<DType> {
    let d = array.dtype();
    if d.is_native_byteorder() == Some(false) || d.has_fields() || d.has_subarray() {
        return None;
    }
    match (d.kind(), d.itemsize()) {
        (b'f', 4) => Some(DType::F32),
        (b'f', 2) => Some(DType::F16),
        (b'u', 1) => Some(DType::U8),
        (b'i', 1) => Some(DType::I8),
        _ => None,
    }
}

/// The numpy name of a weft element type.
pub(crate) fn numpy_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::U8 => "uint8",
        DType::I8 => "int8",
    }
}

/// Reads `obj` (a numpy array or anything `numpy.asarray` takes) as vectors: a 2-D array of
/// rows, or a 1-D array (one vector). `want`: the element type needed (the index's, for
/// queries): other numeric input is converted to a wanted float type, refused for a wanted
/// integer type. Without `want`, `float32`/`float16`/`uint8`/`int8` are taken as they are,
/// other floats converted to `float32`, anything else refused. A C-contiguous array of the
/// right type is used in place; anything else is converted or made contiguous (one copy).
pub(crate) fn input<'py>(
    obj: &Bound<'py, PyAny>,
    want: Option<DType>,
    what: &str,
) -> PyResult<Input<'py>> {
    let py = obj.py();
    let mut array: Bound<'py, PyUntypedArray> = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => numpy(py)?
            .call_method1("asarray", (obj,))?
            .cast_into::<PyUntypedArray>()?,
    };
    let found = dtype_of(&array);
    let kind = array.dtype().kind();
    let numeric = matches!(kind, b'f' | b'u' | b'i');
    let target = match (found, want) {
        (Some(f), None) => f,
        (Some(f), Some(w)) if f == w => f,
        (_, Some(w @ (DType::F32 | DType::F16))) if numeric => w,
        (None, None) if kind == b'f' => DType::F32,
        (_, Some(w)) => {
            return Err(PyTypeError::new_err(format!(
                "{what} are {} but the index holds {} vectors (convert them with .astype(numpy.{}))",
                array.dtype(),
                numpy_name(w),
                numpy_name(w),
            )));
        }
        (None, None) => {
            return Err(PyTypeError::new_err(format!(
                "{what} are {}: weft reads float32, float16, uint8 and int8 vectors (other floats \
                 are converted to float32)",
                array.dtype()
            )));
        }
    };
    let ndim = array.ndim();
    if ndim != 1 && ndim != 2 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a 2-D array (one vector per row) or a 1-D vector, got {ndim} dimensions"
        )));
    }
    let in_place = found == Some(target) && array.is_c_contiguous();
    if !in_place {
        array = numpy(py)?
            .call_method1("ascontiguousarray", (array, numpy_name(target)))?
            .cast_into::<PyUntypedArray>()?;
    }
    let shape = array.shape();
    let (rows, dim, one_d) = match *shape {
        [d] => (1, d, true),
        [r, d] => (r, d, false),
        _ => unreachable!("the dimensions were checked above"),
    };
    let matrix = match target {
        DType::F32 => Matrix::F32(typed(&array)?),
        DType::F16 => Matrix::F16(typed(&array)?),
        DType::U8 => Matrix::U8(typed(&array)?),
        DType::I8 => Matrix::I8(typed(&array)?),
    };
    Ok(Input {
        matrix,
        rows,
        dim,
        one_d,
        in_place,
    })
}

/// `array` as a read-only typed array (its dtype was checked or made `T`).
fn typed<'py, T: NpElement>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    Ok(array.cast::<PyArrayDyn<T>>()?.try_readonly()?)
}

/// The `rows x dim` view of a contiguous read-only array.
pub(crate) fn view<'a, T: Element + NpElement>(
    array: &'a PyReadonlyArrayDyn<'_, T>,
    rows: usize,
    dim: usize,
) -> PyResult<DatasetView<'a, T>> {
    let slice = array
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    DatasetView::new(slice, rows, dim).map_err(err)
}

/// Runs `$body` with `$view` bound to the typed [`DatasetView`] of an [`Input`].
macro_rules! with_input {
    ($input:expr, |$view:ident| $body:expr) => {{
        let input = &$input;
        match &input.matrix {
            $crate::arrays::Matrix::F32(a) => {
                let $view = $crate::arrays::view(a, input.rows, input.dim)?;
                $body
            }
            $crate::arrays::Matrix::F16(a) => {
                let $view = $crate::arrays::view(a, input.rows, input.dim)?;
                $body
            }
            $crate::arrays::Matrix::U8(a) => {
                let $view = $crate::arrays::view(a, input.rows, input.dim)?;
                $body
            }
            $crate::arrays::Matrix::I8(a) => {
                let $view = $crate::arrays::view(a, input.rows, input.dim)?;
                $body
            }
        }
    }};
}
pub(crate) use with_input;

/// A numpy array's buffer as a [`ByteSource`]: the dataset of an index built without a copy
/// reads the array in place and keeps a reference to it.
struct ArrayBytes {
    /// The array (kept alive: numpy frees or moves its buffer only once it is unreferenced, and
    /// refuses `resize` while other references exist).
    _owner: Py<PyAny>,
    /// Address of the first byte.
    addr: usize,
    /// Length in bytes.
    len: usize,
}

impl ByteSource for ArrayBytes {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr..addr + len` is the buffer of the C-contiguous array held by `_owner`,
        // which stays allocated and in place while the array lives (see the field's note).
        // Writes to the array through Python while the index lives are the caller's to avoid,
        // as documented for `weft.build(copy=False)`.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

/// The vectors of `input` as an owned dataset for an index: the array in place (a reference to
/// it is kept) unless `copy` and the array is the caller's own (a converted array is already a
/// private copy), or unless the array is misaligned for its type.
pub(crate) fn dataset(input: &Input<'_>, copy: bool) -> PyResult<AnyDataset> {
    let copy = copy && input.in_place;
    fn one<T: Element + NpElement>(
        array: &PyReadonlyArrayDyn<'_, T>,
        rows: usize,
        dim: usize,
        copy: bool,
    ) -> PyResult<AnyDataset> {
        let view = view(array, rows, dim)?;
        if !copy && let Some(slice) = view.as_contiguous() {
            let source = ArrayBytes {
                _owner: array.as_any().clone().unbind(),
                addr: slice.as_ptr() as usize,
                len: std::mem::size_of_val(slice),
            };
            let shared = SharedSlice::<T>::from_source(std::sync::Arc::new(source), 0, slice.len());
            if let Ok(shared) = shared {
                return Ok(AnyDataset::from_typed(
                    Dataset::from_shared(shared, rows, dim).map_err(err)?,
                ));
            }
        }
        Ok(AnyDataset::from_typed(view.to_dataset()))
    }
    let (rows, dim) = (input.rows, input.dim);
    match &input.matrix {
        Matrix::F32(a) => one(a, rows, dim, copy),
        Matrix::F16(a) => one(a, rows, dim, copy),
        Matrix::U8(a) => one(a, rows, dim, copy),
        Matrix::I8(a) => one(a, rows, dim, copy),
    }
}
