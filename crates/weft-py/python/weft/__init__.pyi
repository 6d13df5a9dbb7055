from typing import Any

from ._errors import (
    CancelledError as CancelledError,
    DimensionMismatchError as DimensionMismatchError,
    FormatError as FormatError,
    GpuError as GpuError,
    InvalidGraphError as InvalidGraphError,
    InvalidInputError as InvalidInputError,
    InvalidParamsError as InvalidParamsError,
    NonFiniteError as NonFiniteError,
    OutOfDeviceMemoryError as OutOfDeviceMemoryError,
    UnsupportedError as UnsupportedError,
    WeftError as WeftError,
    WeftFileExistsError as WeftFileExistsError,
    WeftFileNotFoundError as WeftFileNotFoundError,
    WeftIOError as WeftIOError,
    WeftIsADirectoryError as WeftIsADirectoryError,
    WeftNotADirectoryError as WeftNotADirectoryError,
    WeftPermissionError as WeftPermissionError,
)
from ._weft import (
    INVALID as INVALID,
    Index as Index,
    __version__ as __version__,
    algorithms as algorithms,
    build as build,
    gpu_info as gpu_info,
    ground_truth as ground_truth,
    info as info,
    load as load,
    read as read,
    read_ids as read_ids,
    write as write,
    write_ids as write_ids,
)

def gpu_available() -> bool:
    """Whether a CUDA GPU is usable by this process."""

def recall(found: Any, truth: Any) -> float:
    """Recall@k of ``found`` (``queries x k`` ids) against exact ``truth`` (at least ``k``
    columns). Empty results (no query, or ``k = 0``) raise ``ValueError``."""

def _index_from_state(state: Any) -> Index:
    """Rebuilds a pickled :class:`Index`."""
