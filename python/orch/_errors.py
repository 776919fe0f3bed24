"""Exceptions: ``orch.Error`` for the runtime and the bindings, ``orch.CompileError`` for orchc."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple


class ErrorCode(enum.IntEnum):
    """The runtime's error codes (``orch::ErrorCode``, ``ORCH_ERROR_*`` in orch/orch.h)."""

    Ok = 0
    InvalidArgument = 1
    Io = 2
    InvalidArtifact = 3
    NoDevice = 4
    NoKernelImage = 5
    Cuda = 6
    UnknownName = 7
    Unbound = 8
    InvalidValue = 9
    BindCheckFailed = 10
    BufferTooSmall = 11
    Unsupported = 12
    Nccl = 13
    RankMismatch = 14
    OutOfMemory = 15
    ContextLost = 16
    BuffersOverlap = 17
    DeviceError = 18
    Nvshmem = 19


class Error(Exception):
    """An error of the runtime or of the bindings.

    ``code`` is the :class:`ErrorCode` (``str(err.code.name)`` is the runtime's name, e.g.
    ``"BufferTooSmall"``), ``message`` the message alone, ``where`` the ``.orch`` statement or
    declaration at fault (``"saxpy.orch:21:11"``, empty when none is involved) and
    ``cuda_error`` the ``cudaError_t`` of a failed CUDA call (else 0). ``str(err)`` is the
    runtime's text: ``"saxpy.orch:21:11: error: ..."``.
    """

    def __init__(self, code: ErrorCode, message: str, where: str = "", cuda_error: int = 0) -> None:
        self.code = ErrorCode(code)
        self.message = message
        self.where = where
        self.cuda_error = cuda_error
        super().__init__(self._text())

    def _text(self) -> str:
        return (self.where + ": " if self.where else "") + "error: " + self.message

    def __str__(self) -> str:
        return self._text()

    def __repr__(self) -> str:
        return f"orch.Error({self.code.name}, {self.message!r}, where={self.where!r})"

    def __reduce__(self) -> tuple:
        # Pickled by its fields (an error raised in a multiprocessing worker reaches the
        # parent as the same error); the default would call __init__ with the text alone.
        return (type(self), (int(self.code), self.message, self.where, self.cuda_error), self.__dict__)


class BindingTypeError(Error, TypeError):
    """A binding given an object of the wrong Python type (a list for a buffer): an
    :class:`Error` (code ``InvalidArgument``, naming the buffer and its declaration) that is
    also a ``TypeError``."""


@dataclass(frozen=True)
class Location:
    """A place in a source file: 1-based line and column (bytes), and where the span ends."""

    file: str
    line: int
    column: int
    end_line: int = 0
    end_column: int = 0


@dataclass(frozen=True)
class Note:
    """A note attached to a diagnostic (``note: ...`` in orchc's output)."""

    message: str
    location: Optional[Location] = None


@dataclass(frozen=True)
class Diagnostic:
    """One diagnostic of orchc: ``severity`` ("error" or "warning"), the stable ``code``
    ("E0201"), the place (``file``, ``line``, ``column``; empty and 0 for a diagnostic that
    points at no file) and the ``message``, with its ``notes``."""

    severity: str
    code: str
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0
    notes: Tuple[Note, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        place = f"{self.file}:{self.line}:{self.column}: " if self.file else ""
        code = f"[{self.code}]" if self.code else ""
        return f"{place}{self.severity}{code}: {self.message}"


class CompileError(Exception):
    """orchc refused the pipeline. ``diagnostics`` holds every diagnostic (errors and warnings,
    in orchc's order); ``str(err)`` is exactly what ``orchc`` prints for it."""

    def __init__(self, text: str, diagnostics: Sequence[Diagnostic]) -> None:
        self.text = text
        self.diagnostics = list(diagnostics)
        super().__init__(text)

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple:
        return (type(self), (self.text, self.diagnostics), self.__dict__)


class CompileWarning(UserWarning):
    """orchc compiled the pipeline with warnings (the text is what orchc prints)."""


def _location(obj: Optional[dict]) -> Optional[Location]:
    if not obj:
        return None
    return Location(
        str(obj.get("file", "")),
        int(obj.get("line", 0)),
        int(obj.get("column", 0)),
        int(obj.get("end_line", 0)),
        int(obj.get("end_column", 0)),
    )


def diagnostics_from_json(doc: dict) -> list:
    """orchc's ``--diagnostics-format=json`` document as :class:`Diagnostic` objects."""
    out = []
    for d in doc.get("diagnostics", []):
        loc = _location(d.get("location"))
        notes = tuple(Note(str(n.get("message", "")), _location(n.get("location"))) for n in d.get("notes", []))
        out.append(
            Diagnostic(
                severity=str(d.get("severity", "error")),
                code=str(d.get("code", "")),
                message=str(d.get("message", "")),
                file=loc.file if loc else "",
                line=loc.line if loc else 0,
                column=loc.column if loc else 0,
                end_line=loc.end_line if loc else 0,
                end_column=loc.end_column if loc else 0,
                notes=notes,
            )
        )
    return out
