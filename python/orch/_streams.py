"""CUDA streams from the libraries people use, as the raw ``cudaStream_t`` value orch takes."""

from __future__ import annotations

import sys
from typing import Any, Optional, Union

from ._checks import UINT64_MAX, c_address

#: What ``stream=`` accepts: None (the default below), an int (a raw ``cudaStream_t``; 0 is the
#: legacy default stream), ``torch.cuda.Stream`` / ``ExternalStream`` (``.cuda_stream``), a
#: CuPy stream (``.ptr``), or any object with ``__cuda_stream__`` (cuda.core's protocol).
StreamLike = Union[None, int, Any]


def default_stream() -> int:
    """torch's current stream when torch is imported and has CUDA, else the legacy default
    stream (0)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return int(torch.cuda.current_stream().cuda_stream)
        except Exception:  # noqa: BLE001: a torch without a working CUDA: no stream of its own
            pass
    return 0


def stream_handle(stream: StreamLike) -> int:
    """The ``cudaStream_t`` of `stream` as an int in [0, 2**64): never wrapped (ctypes would make
    ``2**64`` the legacy default stream)."""
    if stream is None:
        return default_stream()
    if type(stream) is int:  # the fast path: launch() in a loop
        return stream if 0 <= stream <= UINT64_MAX else c_address(stream, "`stream` (a cudaStream_t)")
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        # cuda.core: (version, handle)
        if isinstance(value, tuple) and len(value) == 2:
            return c_address(value[1], f"the handle of {type(stream).__name__}.__cuda_stream__()")
        raise TypeError(f"orch: __cuda_stream__ of {type(stream).__name__} gave {value!r}, not (version, handle)")
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return c_address(value, f"{type(stream).__name__}.{attribute}")
    if isinstance(stream, int) and not isinstance(stream, bool):  # IntEnum, int subclasses
        return c_address(int(stream), "`stream` (a cudaStream_t)")
    if not isinstance(stream, (bool, float)) and hasattr(stream, "__index__"):  # numpy integers
        return c_address(stream, "`stream` (a cudaStream_t)")
    raise TypeError(
        f"orch: {type(stream).__name__} is not a stream: pass torch.cuda.Stream, a CuPy stream, an object with "
        "__cuda_stream__, or an int (cudaStream_t)"
    )
