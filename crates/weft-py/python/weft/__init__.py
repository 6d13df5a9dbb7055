"""weft: approximate-nearest-neighbour graphs, built and searched on CPUs and NVIDIA GPUs.

>>> import numpy as np, weft
>>> data = np.random.default_rng(0).standard_normal((10_000, 32), dtype=np.float32)
>>> index = weft.build(data, metric="l2", algorithm="rnndescent", degree=32)
>>> ids, distances = index.search(data[:5], k=10, beam_width=64)

See ``help(weft.build)``, ``help(weft.Index)`` and the type stubs (``weft/_weft.pyi``).
"""

from __future__ import annotations

from . import _errors, _weft
from ._errors import (
    CancelledError,
    DimensionMismatchError,
    FormatError,
    GpuError,
    InvalidGraphError,
    InvalidInputError,
    InvalidParamsError,
    NonFiniteError,
    OutOfDeviceMemoryError,
    UnsupportedError,
    WeftError,
    WeftFileExistsError,
    WeftFileNotFoundError,
    WeftIOError,
    WeftIsADirectoryError,
    WeftNotADirectoryError,
    WeftPermissionError,
)
from ._weft import (
    INVALID,
    Index,
    ShardedIndex,
    __version__,
    algorithms,
    build,
    gpu_info,
    ground_truth,
    info,
    load,
    read,
    read_ids,
    write,
    write_ids,
)


def _index_from_state(state) -> Index:
    """Rebuilds a pickled :class:`Index` (the callable ``Index.__reduce__`` names)."""
    return _weft._index_from_state(state)


def gpu_available() -> bool:
    """Whether a CUDA GPU is usable by this process (see :func:`gpu_info` for which, or why not)."""
    return bool(gpu_info()["available"])


def recall(found, truth) -> float:
    """Recall@k of search results ``found`` (``queries x k`` ids) against exact ``truth``
    (``queries x k'`` ids, ``k' >= k``; its first ``k`` columns count): the fraction of the true
    ``k`` nearest neighbours that were found. Empty results (no query, or ``k = 0``) have no
    recall: they raise ``ValueError``."""
    import numpy as np

    found = np.asarray(found)
    truth = np.asarray(truth)
    if found.ndim == 1:
        found, truth = found[None, :], truth.reshape(1, -1)
    if found.ndim != 2 or truth.ndim != 2:
        raise ValueError(
            f"recall takes 2-D arrays of ids (queries x k), got shapes {found.shape} and {truth.shape}"
        )
    if found.size == 0:
        raise ValueError(
            f"recall of empty results (shape {found.shape}): there must be at least one query "
            "and k >= 1"
        )
    k = found.shape[1]
    if truth.shape[0] != found.shape[0] or truth.shape[1] < k:
        raise ValueError(
            f"truth of shape {truth.shape} does not cover results of shape {found.shape}"
        )
    hits = sum(
        len(np.intersect1d(f[f != INVALID], t[:k], assume_unique=False))
        for f, t in zip(found, truth)
    )
    return hits / float(found.shape[0] * k)


__all__ = [
    "INVALID",
    "Index",
    "ShardedIndex",
    "__version__",
    "algorithms",
    "build",
    "gpu_available",
    "gpu_info",
    "ground_truth",
    "info",
    "load",
    "read",
    "read_ids",
    "recall",
    "write",
    "write_ids",
    *_errors.__all__,
]
