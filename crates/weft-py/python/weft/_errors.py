"""The exceptions weft raises.

Every error of the library is raised as a subclass of :class:`WeftError` that is also a subclass
of the matching built-in exception, so ``except ValueError`` catches bad parameters and input and
``except OSError`` catches file-system errors. The message is the library's own.

======================  =====================================  ===============================
class                   also a                                 raised for
======================  =====================================  ===============================
InvalidParamsError      ValueError                             a parameter impossible for the
                                                               input (``.param``: its name);
                                                               unknown parameters, metrics,
                                                               back ends, algorithms
InvalidInputError       ValueError                             unusable data (empty, wrong
                                                               element type for the index...)
DimensionMismatchError  InvalidInputError                      sizes that must agree
                                                               (``.expected``, ``.found``)
NonFiniteError          InvalidInputError                      NaN or infinity (``.row``,
                                                               ``.col``)
FormatError             ValueError                             a malformed file (``.filename``)
WeftIOError             OSError                                an I/O error (``.filename``,
                                                               ``.errno``)
InvalidGraphError       ValueError                             a graph that breaks its
                                                               invariants
UnsupportedError        RuntimeError                           not for this input, build or
                                                               machine (no GPU, ...)
OutOfDeviceMemoryError  MemoryError                            GPU memory would not suffice
GpuError                RuntimeError                           a GPU driver or launch error
CancelledError          WeftError                              work cancelled
======================  =====================================  ===============================

Ctrl-C during a build or a search raises :class:`KeyboardInterrupt` (the work is cancelled
first). Wrong Python argument types (a list of strings as vectors, float64 ids...) raise
:class:`TypeError`.
"""

from __future__ import annotations

__all__ = [
    "WeftError",
    "InvalidParamsError",
    "InvalidInputError",
    "DimensionMismatchError",
    "NonFiniteError",
    "FormatError",
    "WeftIOError",
    "InvalidGraphError",
    "UnsupportedError",
    "OutOfDeviceMemoryError",
    "GpuError",
    "CancelledError",
]


class WeftError(Exception):
    """Base class of every error weft raises."""


class InvalidParamsError(WeftError, ValueError):
    """A parameter is impossible for this input; ``param`` names it."""

    param: str | None = None


class InvalidInputError(WeftError, ValueError):
    """The input data cannot be used."""


class DimensionMismatchError(InvalidInputError):
    """Two sizes that must agree do not; ``expected`` and ``found`` hold them."""

    expected: int | None = None
    found: int | None = None


class NonFiniteError(InvalidInputError):
    """A NaN or infinite value at ``row``, ``col``."""

    row: int | None = None
    col: int | None = None


class FormatError(WeftError, ValueError):
    """A malformed file (``filename``)."""

    filename: str | None = None


class WeftIOError(WeftError, OSError):
    """An operating-system error on ``filename``."""


class InvalidGraphError(WeftError, ValueError):
    """A graph breaks one of its invariants."""


class UnsupportedError(WeftError, RuntimeError):
    """The operation exists, but not for this input, build or machine."""


class OutOfDeviceMemoryError(WeftError, MemoryError):
    """GPU memory would not suffice (said before allocating)."""


class GpuError(WeftError, RuntimeError):
    """A GPU driver, compiler or launch error."""


class CancelledError(WeftError):
    """The work was cancelled."""


# Shown as weft.<Name> in tracebacks and reprs: the classes are re-exported by the package.
for _name in __all__:
    globals()[_name].__module__ = "weft"
del _name
