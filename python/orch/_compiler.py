"""orch.compile and orch.check: orchc as a library (liborchc.so, orch/orchc.h)."""

from __future__ import annotations

import ctypes
import json
import os
import warnings
from typing import List, Optional, Sequence, Tuple, Union

from . import _native
from ._checks import UINT32_MAX, c_int, c_name, c_path
from ._errors import CompileError, CompileWarning, Diagnostic, Error, ErrorCode, diagnostics_from_json

Source = Union[str, bytes, "os.PathLike[str]"]

#: The name diagnostics give a pipeline passed as text, when no ``path`` is given.
TEXT_PATH = "<string>"


def _encode(value: Union[str, "os.PathLike[str]", None], what: str) -> Optional[bytes]:
    if value is None:
        return None
    return c_path(value, what)


def _options(
    source: Source,
    path: Union[str, "os.PathLike[str]", None],
    target: Union[str, "os.PathLike[str]", None],
    arch: Union[str, Sequence[str], None],
    targets_dir: Union[str, "os.PathLike[str]", None],
    cache_dir: Union[str, "os.PathLike[str]", None],
    jobs: int,
    pdl: bool = True,
    unroll: int = 0,
    profile: Union[str, "os.PathLike[str]", None] = None,
    memory_plan: bool = True,
) -> Tuple[_native.CompileOptions, list]:
    keep: list = []  # the buffers the struct points into
    o = _native.CompileOptions()
    if isinstance(source, os.PathLike):
        o.path = c_path(source, "the pipeline's path")
        o.source = None
        o.source_size = 0
    elif isinstance(source, (str, bytes, bytearray)):
        text = source.encode("utf-8") if isinstance(source, str) else bytes(source)
        keep.append(text)
        o.path = _encode(path, "`path`") if path is not None else TEXT_PATH.encode()
        o.source = text
        o.source_size = len(text)
    else:
        raise TypeError(f"orch: a pipeline is a pathlib.Path or its text (str), not {type(source).__name__}")
    if path is not None and isinstance(source, os.PathLike):
        raise TypeError("orch: `path` names a pipeline given as text; a pathlib.Path names itself")
    o.target = _encode(target, "`target`")
    if targets_dir is None and not os.environ.get("ORCH_TARGETS_DIR"):
        targets_dir = _native.targets_dir()  # the profiles shipped in the wheel
    o.targets_dir = _encode(targets_dir, "`targets_dir`")
    if arch is not None:
        if isinstance(arch, str):
            archs = [arch]
        else:
            try:
                archs = list(arch)
            except TypeError:
                raise TypeError(f"orch: `arch` is a name like 'sm_90' or a list of them, not {type(arch).__name__}") from None
        for a in archs:
            c_name(a, "an `arch`")
            if not a or "," in a:
                raise ValueError(f"orch: an arch is one name like 'sm_90', not {a!r}")
        o.archs = ",".join(archs).encode()
    o.cache_dir = _encode(cache_dir, "`cache_dir`")
    o.jobs = c_int(jobs, "`jobs` (a count of threads, 0 for all cores)", 0, UINT32_MAX, "unsigned")
    if not isinstance(pdl, bool):
        raise TypeError(f"orch: pdl is True or False, not {pdl!r}")
    o.no_pdl = 0 if pdl else 1
    o.unroll = c_int(unroll, "`unroll` (loop body copies, 1 to 64; 0: the compiler's choice)", 0, 64, "`unroll`")
    o.profile = c_path(profile, "`profile`") if profile is not None else None
    if not isinstance(memory_plan, bool):
        raise TypeError(f"orch: memory_plan is True or False, not {memory_plan!r}")
    o.no_memory_plan = 0 if memory_plan else 1
    keep += [o.path, o.target, o.targets_dir, o.archs, o.cache_dir, o.profile]
    return o, keep


def _take(lib: ctypes.CDLL, p: ctypes.c_void_p, size: Optional[int] = None) -> bytes:
    if not p.value:
        return b""
    try:
        return ctypes.string_at(p.value, size) if size is not None else ctypes.string_at(p.value)
    finally:
        lib.orch_compile_free(p)


def _run(compile: bool, source: Source, **kw) -> Tuple[int, bytes, List[Diagnostic], str]:
    lib = _native.compiler()
    o, keep = _options(source, **kw)
    artifact, json_out, text_out = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    size = ctypes.c_size_t(0)
    if compile:
        rc = lib.orch_compile(ctypes.byref(o), ctypes.byref(artifact), ctypes.byref(size), ctypes.byref(json_out), ctypes.byref(text_out))
    else:
        rc = lib.orch_check(ctypes.byref(o), ctypes.byref(json_out), ctypes.byref(text_out))
    del keep
    data = _take(lib, artifact, size.value)
    doc = _take(lib, json_out).decode("utf-8", "replace")
    text = _take(lib, text_out).decode("utf-8", "replace")
    try:
        diagnostics = diagnostics_from_json(json.loads(doc)) if doc else []
    except ValueError:
        diagnostics = []
    if rc == 2:
        raise Error(ErrorCode.InvalidArgument, text.strip() or "orchc failed")
    return rc, data, diagnostics, text


def compile(
    source: Source,
    *,
    arch: Union[str, Sequence[str], None] = None,
    target: Union[str, "os.PathLike[str]", None] = None,
    path: Union[str, "os.PathLike[str]", None] = None,
    targets_dir: Union[str, "os.PathLike[str]", None] = None,
    cache_dir: Union[str, "os.PathLike[str]", None] = None,
    jobs: int = 0,
    pdl: bool = True,
    unroll: int = 0,
    profile: Union[str, "os.PathLike[str]", None] = None,
    memory_plan: bool = True,
) -> bytes:
    """Checks and compiles a pipeline, as ``orchc pipeline.orch -o pipeline.bin`` does, and
    returns the artifact's bytes (for :func:`orch.load`, or to write to a file).

    ``source`` is a :class:`pathlib.Path` (read from disk) or the pipeline's text (``str``).
    Text is named ``path`` in diagnostics (default ``"<string>"``), and ``from "file.cu"``
    kernels are found in ``path``'s folder (the current folder by default).
    ``arch`` is ``orchc --arch``: "sm_90" or a list; by default the file's ``target``'s.
    ``target`` is ``orchc --target`` (a profile name or a .yaml file). ``targets_dir`` is
    where profiles are found (default: ``$ORCH_TARGETS_DIR``, else the ones in the package).
    ``cache_dir`` is the kernel cache (default ``$ORCH_CACHE_DIR``, else
    ``~/.cache/orch/kernels``; ``""`` for none). ``jobs`` is ``orchc -j`` (0: all cores).
    ``pdl=False`` is ``orchc --no-pdl`` (no programmatic edges); ``unroll`` is ``orchc --unroll``
    (copies of a ``while`` body per iteration; 0: the compiler's choice, 1: none).
    ``profile`` is ``orchc --profile``: the path of a profile ``orch-run --profile`` wrote,
    which the speed passes decide from (docs/observe.md); one that cannot be read is a
    :class:`orch.CompileError`, another pipeline's or GPU's a warning (W0006).
    ``memory_plan=False`` is ``orchc --no-memory-plan`` (every buffer allocated alone, rather
    than buffers never in use at the same time sharing one arena).

    Raises :class:`orch.CompileError` (``.diagnostics``; ``str()`` is what orchc prints) when
    the pipeline has errors, :class:`orch.Error` when NVRTC or nvJitLink cannot be found.
    Warnings come as :class:`orch.CompileWarning`. Needs no GPU.
    """
    rc, data, diagnostics, text = _run(
        True,
        source,
        path=path,
        target=target,
        arch=arch,
        targets_dir=targets_dir,
        cache_dir=cache_dir,
        jobs=jobs,
        pdl=pdl,
        unroll=unroll,
        profile=profile,
        memory_plan=memory_plan,
    )
    if rc != 0:
        raise CompileError(text, diagnostics)
    if diagnostics:
        warnings.warn(text, CompileWarning, stacklevel=2)
    return data


def check(
    source: Source,
    *,
    target: Union[str, "os.PathLike[str]", None] = None,
    path: Union[str, "os.PathLike[str]", None] = None,
    targets_dir: Union[str, "os.PathLike[str]", None] = None,
) -> List[Diagnostic]:
    """Checks a pipeline as ``orchc --check`` does and returns every diagnostic (an empty list
    when it is clean); never raises for the pipeline's errors. Arguments as for
    :func:`orch.compile`. Needs neither a GPU nor NVRTC's compile step."""
    _, _, diagnostics, _ = _run(False, source, path=path, target=target, arch=None, targets_dir=targets_dir, cache_dir=None, jobs=0)
    return diagnostics


def check_text(
    source: Source,
    *,
    target: Union[str, "os.PathLike[str]", None] = None,
    path: Union[str, "os.PathLike[str]", None] = None,
    targets_dir: Union[str, "os.PathLike[str]", None] = None,
) -> str:
    """What ``orchc --check`` prints for the pipeline (empty when it is clean)."""
    _, _, _, text = _run(False, source, path=path, target=target, arch=None, targets_dir=targets_dir, cache_dir=None, jobs=0)
    return text
