"""orch for Python: compile, load and run orch pipelines (checked CUDA graphs) on PyTorch and
CuPy memory.

    import orch, torch
    pipeline = orch.load(orch.compile(pathlib.Path("saxpy.orch")))
    x = torch.rand(n, device="cuda"); y = torch.rand(n, device="cuda")
    exe = pipeline.instantiate(params={"n": n, "a": 2.0}, buffers={"x": x, "y": y})
    exe.launch()                        # on torch's current stream
    exe.set_param("a", -0.5)            # patched in place

docs/python.md is the guide. A thin ctypes layer over the runtime's C API (orch/orch.h) and
orchc's (orch/orchc.h): the same checks, the same errors, one wheel for every Python 3.
"""

from __future__ import annotations

from ._errors import CompileError, CompileWarning, Diagnostic, Error, ErrorCode, Location, Note
from ._native import build_info as _build_info
from ._compiler import check, compile
from ._pipeline import (
    Buffer,
    BufferInfo,
    CommInfo,
    Executable,
    GraphInfo,
    KernelInfo,
    ParamInfo,
    Pipeline,
    Stats,
    UniqueIdComm,
    load,
    nccl_unique_id,
)
from ._streams import default_stream, stream_handle

__version__ = _build_info().get("version", "0.1.0")

__all__ = [
    "Buffer",
    "BufferInfo",
    "CommInfo",
    "CompileError",
    "CompileWarning",
    "Diagnostic",
    "Error",
    "ErrorCode",
    "Executable",
    "GraphInfo",
    "KernelInfo",
    "Location",
    "Note",
    "ParamInfo",
    "Pipeline",
    "Stats",
    "UniqueIdComm",
    "check",
    "compile",
    "default_stream",
    "load",
    "nccl_unique_id",
    "stream_handle",
]
