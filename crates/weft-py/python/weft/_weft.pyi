"""Type stubs and reference documentation of the native module ``weft._weft`` (re-exported by
``weft``).

Arrays: vectors are 2-D numpy arrays, one vector per row (a 1-D array is one vector), of
``float32``, ``float16``, ``uint8`` or ``int8``; other float types are converted to ``float32``
(a copy). Queries and ground-truth inputs that are C-contiguous arrays of a weft type are read
in place; anything else (Fortran order, strided views, lists) is converted into a contiguous
copy first. :func:`build` copies its vectors unless ``copy=False``. Ids are ``uint32``;
:data:`INVALID` marks a missing neighbour.

Distances follow one convention for every metric: smaller is nearer, and results come nearest
first. What ``distances`` holds, per metric (``x`` a vector of the index, ``q`` a query):

=========  ===================================  ==============================================
metric     distance                             note
=========  ===================================  ==============================================
``l2``     ``sum((q - x) ** 2)``                squared: take ``np.sqrt`` for the Euclidean
                                                distance (``euclidean`` and ``sqeuclidean``
                                                are names of this same metric)
``ip``     ``-dot(q, x)``                       the inner product negated, so the largest
                                                inner product comes first; FAISS's
                                                inner-product indexes return ``+dot`` (negate
                                                weft's to compare), hnswlib's ``ip`` space
                                                ``1 - dot``
``cosine`` ``1 - dot(q, x) / (|q| |x|)``        in ``[0, 2]``; ``1 - distance`` is the cosine
                                                similarity
=========  ===================================  ==============================================

Errors are raised as the classes of :mod:`weft._errors` (subclasses of :class:`WeftError` and
of ``ValueError``/``OSError``/``RuntimeError``/``MemoryError``), with the library's messages;
Python argument types that cannot be used raise ``TypeError``. Builds, searches, ground truth
and file reads release the GIL; long builds and searches run on a worker thread, and Ctrl-C
(any exception raised by a Python signal handler) cancels them and is raised once they stop.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike
PathLike = Union[str, "os.PathLike[str]"]
Metric = Literal["l2", "ip", "cosine", "sqeuclidean", "euclidean", "inner_product", "dot", "angular"]
Backend = Literal["auto", "cpu", "gpu"]
Ids = npt.NDArray[np.uint32]
Distances = npt.NDArray[np.float32]

INVALID: int
"""The id written where fewer than ``k`` neighbours were found (``2**32 - 1``)."""

__version__: str

def build(
    data: ArrayLike,
    *,
    metric: Metric = "l2",
    algorithm: str = "rnndescent",
    backend: Backend = "auto",
    seed: int = 0,
    threads: Optional[int] = None,
    k: Optional[int] = None,
    copy: bool = True,
    progress: Optional[Callable[[str, int, Optional[int]], Any]] = None,
    verbose: bool = False,
    device: Optional[int] = None,
    **params: Any,
) -> Index:
    """Builds an index of ``data`` (``n x dim``).

    ``device``: the CUDA device (GPU number, as ``nvidia-smi`` lists them) to build on; the
    index's GPU searches default to it too (``None``: device 0, or ``$WEFT_GPU_DEVICE``). A
    device that cannot be used raises :class:`UnsupportedError` naming it, whatever the
    backend: never the CPU instead.

    ``algorithm``: one of :func:`algorithms` (``exact``, ``nndescent``, ``rnndescent``,
    ``cagra``, ``ggnn``; ``grnnd`` with a GPU). ``**params`` are the algorithm's parameters by
    name (see ``algorithms()[i]["default_params"]``), checked by the library's typed parameters:
    an unknown name or an impossible value raises :class:`InvalidParamsError`, and values are
    never adjusted. ``k`` is the neighbour count of the k-NN graph builders (``exact``,
    ``nndescent``; required there, refused by the others, whose degree is a parameter).

    ``metric``: ``l2`` (squared Euclidean distance), ``ip`` (distance ``-dot(q, x)``, the
    negated inner product) or ``cosine`` (``1 -`` the cosine similarity); smaller is nearer for
    every metric (see the module's table).
    ``backend``: ``auto`` (the GPU when one is usable and the algorithm has a GPU back end, else
    the CPU), ``cpu`` or ``gpu`` (requirements: an error when they cannot run). ``seed``: the
    same seed and parameters give the same graph on the CPU, whatever ``threads`` (default: all
    cores).

    ``copy=True`` (the default, as hnswlib and FAISS do) gives the index its own copy of the
    vectors: changing ``data`` afterwards changes nothing in the index. ``copy=False`` opts into
    zero-copy: a C-contiguous array of a weft element type is read in place and the index keeps
    a reference to it (keeping it alive). The contract: do not modify the array while the index
    (or anything searching it) lives, since searches would read the new values against a graph
    built for the old ones. An array that needs converting (another dtype, Fortran order, a
    strided view) is copied whatever ``copy`` says.

    ``progress``: a callable, called as ``progress(stage, done, total)`` on the calling thread
    while the build runs: when a stage begins (``done == 0``), as it advances, and when it ends
    (``total`` is ``None`` when the stage does not know it; stages are the algorithm's, e.g.
    ``"rnndescent"``, ``"nndescent"``). An exception it raises cancels the build and is raised
    by ``build``. ``verbose=True`` prints the same reports to ``sys.stderr`` (a line per stage
    begun and ended, at most one a second in between).
    """

def _index_from_state(state: Any) -> Index:
    """Rebuilds a pickled :class:`Index` (use ``weft._index_from_state``, which pickles name)."""

def load(path: PathLike) -> Index:
    """Loads an index saved by :meth:`Index.save` (the graph and the vectors are memory-mapped;
    the graph's checksum is verified)."""

class ShardedIndex:
    """An index cut into contiguous shards, each with a graph of its own: every query is
    searched in every shard and the answers are merged exactly, with global ids (shard ``i``
    holds the vectors after those of the shards before it). The way to search more vectors than
    one GPU holds: each GPU holds some of the shards and the GPUs work at the same time."""

    @staticmethod
    def build(
        data: ArrayLike,
        shards: int,
        *,
        devices: Union[int, Sequence[int], Literal["all"], None] = None,
        metric: Metric = "l2",
        algorithm: str = "rnndescent",
        backend: Backend = "auto",
        seed: int = 0,
        threads: Optional[int] = None,
        k: Optional[int] = None,
        **params: Any,
    ) -> "ShardedIndex":
        """Cuts ``data`` into ``shards`` contiguous parts of nearly equal size and builds one
        index per part with the keywords of :func:`build`. ``devices``: ``None`` builds the
        shards one after another; a device number, a list or ``"all"`` builds shard ``i`` on
        ``devices[i % len(devices)]``, the devices at the same time. Each shard copies its part
        of the vectors (``data`` must not change during the build).
        ``shards`` of 0 or above the vector count raises :class:`InvalidParamsError`."""
        ...

    def search(
        self,
        queries: ArrayLike,
        k: int = 10,
        *,
        beam_width: Optional[int] = None,
        exact: bool = False,
        backend: Backend = "auto",
        threads: Optional[int] = None,
        seed: int = 0,
        filter: Optional[ArrayLike] = None,
        devices: Union[int, Sequence[int], Literal["all"], None] = None,
        **knobs: Any,
    ) -> Tuple[Ids, Distances]:
        """The ``k`` nearest neighbours of each query over every shard, ``queries x k``,
        nearest first, global ids; the keywords of :meth:`Index.search`. ``devices``: ``None``
        searches the shards one after another; otherwise shard ``i`` is searched on
        ``devices[i % len(devices)]``, the devices at the same time, with the same result. A
        ``filter`` is over the global ids."""
        ...

    def save(self, path: PathLike) -> None:
        """Saves into folder ``path``: a ``manifest.json`` and one index folder per shard,
        replacing the folder in one rename."""
        ...

    @staticmethod
    def load(path: PathLike) -> "ShardedIndex":
        """Loads a sharded index saved by :meth:`save` (each shard memory-mapped)."""
        ...

    @property
    def shard_sizes(self) -> list[int]:
        """The vector count of each shard, in id order."""
        ...

    def __len__(self) -> int: ...

class Index:
    """A searchable index: the vectors, the graph built on them and how it was built. Made by
    :func:`build` or :func:`load`. Searches may run from several Python threads at once."""

    def search(
        self,
        queries: ArrayLike,
        k: int = 10,
        *,
        beam_width: Optional[int] = None,
        exact: bool = False,
        backend: Backend = "auto",
        threads: Optional[int] = None,
        seed: int = 0,
        filter: Optional[ArrayLike] = None,
        devices: Union[int, Sequence[int], Literal["all"], None] = None,
        device: Optional[int] = None,
        max_hops: Optional[int] = None,
        max_distance_computations: Optional[int] = None,
        entry_layer: bool = True,
        entry_layer_min_entries: int = 64,
        entry_layer_degree: int = 8,
        entry_layer_beam_width: int = 8,
        search_width: int = 1,
        max_iterations: int = 0,
        min_iterations: int = 0,
        team_size: int = 0,
        mode: Literal["auto", "single-cta", "multi-cta"] = "auto",
        search_precision: Literal["exact", "f16"] = "exact",
        rerank: int = 0,
        tau: float = 0.5,
        ggnn_best: int = 10,
        ggnn_visited: int = 384,
        ggnn_max_iterations: int = 400,
        ggnn_block_threads: int = 0,
        ggnn_team_size: int = 0,
        ggnn_prefetch_rows: bool = True,
    ) -> Tuple[Ids, Distances]:
        """The ``k`` nearest neighbours of each query: ``(ids, distances)``, ``queries x k``
        (``k`` for a 1-D query), nearest first (smallest distance first); distances in the
        index's metric: ``l2`` the squared Euclidean distance, ``ip`` ``-dot(q, x)`` (the
        negated inner product, so the largest inner product comes first), ``cosine``
        ``1 - cos(q, x)``.

        ``beam_width``: the candidate list size of the graph search (at least ``k``; default
        64, or for ``k`` above 64, ``k`` rounded up to a multiple of 32, as in the CLI), on every
        back end (the CPU beam search, the GPU searches): larger is
        slower and more accurate. ``exact=True`` compares with every
        vector instead. ``backend``: ``auto`` searches on the GPU when one is usable, ``cpu``
        and ``gpu`` are requirements. ``threads``: run on a pool of that many threads, kept for
        later calls with the same count (default: all cores). ``seed``: the seed of the search's random choices (entry points
        of a k-NN graph). ``filter``: only these ids are returned, on every back end and with ``exact=True``: a
        bool mask of length n (``True`` = allowed) or an integer array of allowed ids.
        Filtered-out points are still traversed; a row with fewer than ``k`` allowed neighbours
        found is padded with :data:`INVALID` and ``inf``. A mask of another length or an id out
        of range raises :class:`InvalidParamsError`; another dtype ``TypeError``. ``devices``:
        the CUDA devices of a GPU search, a number, a list of numbers or ``"all"`` (``None``:
        the one the index was built on, else the default one; ``device``, its former name, takes
        one number). With several the index is replicated: each device holds it and searches a
        contiguous part of the batch, all at the same time. One that cannot be used raises
        :class:`UnsupportedError` naming it, never the CPU instead; one named twice
        :class:`InvalidParamsError`.

        The searches' own knobs, the CLI's flags with underscores: the CPU beam search's
        ``max_hops`` (stop each query after that many expanded vertices),
        ``max_distance_computations`` (stop it after that many distance evaluations),
        ``entry_layer`` (``False``: every query scores every entry point instead of searching a
        small graph over them; the CLI's ``--no-entry-layer``), ``entry_layer_min_entries``,
        ``entry_layer_degree`` and ``entry_layer_beam_width``; the GPU CAGRA search's
        (fixed-degree and k-NN graphs) ``search_width`` (parents expanded per iteration,
        1-32), ``max_iterations`` (0: automatic), ``min_iterations``, ``team_size`` (threads
        per distance: 2, 4, 8, 16, 32; 0: from the dimension), ``mode``, ``search_precision``
        (``f16``: traverse an f16 copy of f32 data, rerank exactly) and ``rerank`` (entries
        reranked with the f16 traversal; 0: the whole list); the GGNN search's (hierarchical
        graphs on the GPU) ``tau`` (slack), ``ggnn_best``, ``ggnn_visited``,
        ``ggnn_max_iterations``, ``ggnn_block_threads``, ``ggnn_team_size`` and
        ``ggnn_prefetch_rows``. An impossible value raises :class:`InvalidParamsError` naming
        it; an unknown keyword ``TypeError``.

        Queries are converted to the index's element type when it is a float type; an index of
        ``uint8``/``int8`` vectors takes queries of that type only (``TypeError`` otherwise).
        A query's result does not depend on its batch or on ``threads``.
        """

    def save(self, path: PathLike) -> None:
        """Saves the index into folder ``path`` (created if needed): ``graph.wgraph`` and the
        vectors (``data.fbin``/``.npy``/``.u8bin``/``.i8bin``).

        The folder is replaced whole and atomically: the files are written into a hidden
        temporary folder beside ``path``, which then takes its place in one rename. A save that
        fails part-way leaves the previous index there, loadable; saves into one folder from
        several threads or processes never mix their files (the last one wins). An empty path
        raises :class:`InvalidParamsError`; an existing ``path`` that is not a folder, or that
        holds files other than an index's, raises :class:`InvalidInputError` (nothing is
        written)."""

    def __reduce__(self) -> Tuple[Any, Tuple[Any]]:
        """Pickle support (``pickle``, ``copy.deepcopy``, multiprocessing): the state is the
        files of :meth:`save` as bytes; the unpickled index is held in memory and searches
        identically."""

    @staticmethod
    def load(path: PathLike) -> Index:
        """Same as :func:`weft.load`."""

    @overload
    def graph(self, *, distances: Literal[False] = False) -> Ids:
        """The graph as an ``n x degree`` ``uint32`` array of neighbour ids, rows padded with
        :data:`INVALID` (a hierarchical graph: its base layer). With ``distances=True``, for a
        k-NN graph (``exact``, ``nndescent``), also its ``n x k`` distances
        (:class:`UnsupportedError` for other graphs)."""
    @overload
    def graph(self, *, distances: Literal[True]) -> Tuple[Ids, Distances]: ...

    def entry_points(self, seed: int = 0) -> Ids:
        """Where graph searches start: the graph's entry points, or, for a k-NN graph (which
        stores none), the points spread over the data for search seed ``seed``."""

    def data(self) -> npt.NDArray[Any]:
        """A copy of the indexed vectors (``n x dim``, the index's element type)."""

    def __len__(self) -> int:
        """The number of vectors."""

    @property
    def dim(self) -> int:
        """Elements per vector."""

    @property
    def dtype(self) -> Literal["float32", "float16", "uint8", "int8"]:
        """The element type's numpy name."""

    @property
    def metric(self) -> Literal["l2", "ip", "cosine"]:
        """The metric the graph was built for and is searched with."""

    @property
    def graph_kind(self) -> Literal["knn", "fixed", "hier"]:
        """``knn``: a k-NN graph (``exact``, ``nndescent``; no entry points, no connectivity
        repair: searches start from points spread over the data); ``fixed``: a search graph;
        ``hier``: GGNN's hierarchy."""

    @property
    def algorithm(self) -> Optional[str]:
        """The algorithm that built the graph, if recorded."""

    @property
    def build_info(self) -> dict[str, Any]:
        """How the graph was built: ``{"algorithm": ..., "params": {every parameter},
        "backend": ..., "k": ..., "seed": ..., "data_fingerprint": ...}`` (files written before
        the record was flattened nest the parameters as ``params.params``)."""

def read(
    path: PathLike,
    *,
    format: Optional[str] = None,
    rows: Optional[Tuple[int, int]] = None,
    allow_non_finite: bool = False,
) -> npt.NDArray[Any]:
    """Reads a vector file: ``fvecs``, ``bvecs``, ``fbin``, ``u8bin``, ``i8bin`` or ``npy``
    (``float32``/``float16``/``uint8``/``int8``, C or Fortran order), the format from the
    extension unless ``format`` names it. ``rows=(a, b)`` reads rows ``a`` to ``b - 1`` only.
    NaN and infinities raise :class:`NonFiniteError` unless ``allow_non_finite``. Malformed files
    raise :class:`FormatError`."""

def write(path: PathLike, vectors: ArrayLike, *, format: Optional[str] = None) -> None:
    """Writes vectors to a file (the format from the extension unless ``format`` names it; it
    must hold the array's element type), atomically."""

def read_ids(path: PathLike, *, format: Optional[str] = None) -> Ids:
    """Reads an id file (``ivecs``, ``ibin``, ``npy``), e.g. ground truth, as ``uint32``."""

def write_ids(path: PathLike, ids: ArrayLike, *, format: Optional[str] = None) -> None:
    """Writes a 2-D array of ids (any integer type, values in ``[0, 2**32 - 1]``) to an id file
    (``ivecs``, ``ibin``, ``npy``)."""

def info(path: PathLike) -> dict[str, Any]:
    """What a vector or id file holds, from its header: ``format``, ``element``, ``rows``,
    ``dim``, sizes, and for ``npy`` the order and version."""

def ground_truth(
    base: ArrayLike,
    queries: ArrayLike,
    k: int,
    *,
    metric: Metric = "l2",
    backend: Backend = "auto",
    threads: Optional[int] = None,
    device: Optional[int] = None,
) -> Tuple[Ids, Distances]:
    """The exact ``k`` nearest neighbours of every query among ``base``, by brute force
    (``queries x k``, nearest first): on the GPU when one is usable (``auto``), else on the CPU,
    where both arrays are read in place. ``device``: the CUDA device of the GPU back end
    (``None``: the default one); one that cannot be used raises :class:`UnsupportedError`."""

def algorithms() -> list[dict[str, Any]]:
    """The algorithms of this build: ``name``, ``backend`` (``cpu``/``gpu``), ``produces``
    (``knn_graph``/``search_graph``), ``description`` and ``default_params``. GPU back ends are
    listed only when a GPU is usable."""

def gpu_info(device: Optional[int] = None) -> dict[str, Any]:
    """``{"available": True, "device": ..., ...}`` for a usable CUDA GPU (the default device, or
    CUDA device ``device``), else ``{"available": False, "reason": ...}``."""

def _input_address(array: ArrayLike) -> int:
    """The address of the buffer weft reads for ``array`` (a testing aid: ``array.ctypes.data``
    when it is used in place)."""

def _rust_search_seconds(
    index: Index, queries: ArrayLike, k: int, beam_width: int, calls: int, with_cancel: bool = False
) -> list[float]:
    """Seconds of each of ``calls`` calls of the Rust ``weft::Index::search`` (a benchmark
    aid)."""
