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
WeftIOError             OSError                                an I/O error (``.errno``,
                                                               ``.strerror``, ``.filename``);
                                                               for a missing file also a
                                                               ``FileNotFoundError``, see below
InvalidGraphError       ValueError                             a graph that breaks its
                                                               invariants
UnsupportedError        RuntimeError                           not for this input, build or
                                                               machine (no GPU, ...)
OutOfDeviceMemoryError  MemoryError                            GPU memory would not suffice
GpuError                RuntimeError                           a GPU driver or launch error
CancelledError          WeftError                              work cancelled
======================  =====================================  ===============================

An I/O error whose errno has a built-in subclass of ``OSError`` is raised as a subclass of both
:class:`WeftIOError` and that class: ``FileNotFoundError``, ``PermissionError``,
``FileExistsError``, ``IsADirectoryError``, ``NotADirectoryError``; it reads like Python's own
(``[Errno 2] No such file or directory: 'x.fbin'``).

Ctrl-C during a build or a search raises :class:`KeyboardInterrupt` (the work is cancelled
first). Wrong Python argument types (a list of strings as vectors, float64 ids...) raise
:class:`TypeError`.
"""

from __future__ import annotations

import errno as _errno
import os as _os

__all__ = [
    "WeftError",
    "InvalidParamsError",
    "InvalidInputError",
    "DimensionMismatchError",
    "NonFiniteError",
    "FormatError",
    "WeftIOError",
    "WeftFileNotFoundError",
    "WeftPermissionError",
    "WeftFileExistsError",
    "WeftIsADirectoryError",
    "WeftNotADirectoryError",
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
    """An operating-system error on ``filename`` (``errno`` and ``strerror`` when the system
    gave an error number)."""

    def __str__(self) -> str:
        # Without an errno, OSError's own format would read "[Errno None] None: 'file'".
        if self.errno is None and self.args:
            return str(self.args[0])
        return super().__str__()


class WeftFileNotFoundError(WeftIOError, FileNotFoundError):
    """A file or folder that does not exist (``errno.ENOENT``)."""


class WeftPermissionError(WeftIOError, PermissionError):
    """Access refused (``errno.EACCES``, ``errno.EPERM``)."""


class WeftFileExistsError(WeftIOError, FileExistsError):
    """The file exists (``errno.EEXIST``)."""


class WeftIsADirectoryError(WeftIOError, IsADirectoryError):
    """A folder where a file was expected (``errno.EISDIR``)."""


class WeftNotADirectoryError(WeftIOError, NotADirectoryError):
    """A file where a folder was expected (``errno.ENOTDIR``)."""


_BY_ERRNO = {
    _errno.ENOENT: WeftFileNotFoundError,
    _errno.EACCES: WeftPermissionError,
    _errno.EPERM: WeftPermissionError,
    _errno.EEXIST: WeftFileExistsError,
    _errno.EISDIR: WeftIsADirectoryError,
    _errno.ENOTDIR: WeftNotADirectoryError,
}

# Rust's `std::io::ErrorKind` of an error that carries no errno, by name.
_ERRNO_OF_KIND = {
    "NotFound": _errno.ENOENT,
    "PermissionDenied": _errno.EACCES,
    "AlreadyExists": _errno.EEXIST,
    "IsADirectory": _errno.EISDIR,
    "NotADirectory": _errno.ENOTDIR,
}


def _io_error(message: str, code: "int | None", kind: str, filename: str) -> WeftIOError:
    """The exception for the library's I/O error ``message`` on ``filename`` (called by the
    native module): with an errno (the system's, or that of the error's ``kind``), the class of
    that errno, ``OSError(errno, strerror, filename)`` as Python's own; without one, a
    :class:`WeftIOError` with the library's message."""
    if code is None:
        code = _ERRNO_OF_KIND.get(kind)
    if code is None:
        e = WeftIOError(message)
        e.filename = filename
        return e
    return _BY_ERRNO.get(code, WeftIOError)(code, _os.strerror(code), filename)


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
