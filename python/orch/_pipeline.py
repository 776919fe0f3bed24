"""orch.load, Pipeline, Executable and Buffer: the runtime's C API (orch/orch.h) for Python."""

from __future__ import annotations

import ctypes
import json
import numbers
import os
import threading
from collections.abc import Iterable as _Iterable
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _memory, _native
from ._checks import c_address, c_int32, c_name, c_path, mapping
from ._errors import Error, ErrorCode
from ._memory import ELEMENT_TYPES, ElementType, Memory, kDLCPU, kDLCUDA
from ._streams import StreamLike, default_stream, stream_handle

_rt = _native.runtime
_check = _native.check
_take_error = _native.take_error


# ---- descriptions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamInfo:
    """A ``param``: its name, type ("u32"), default (a Python number, or None when it must be
    bound) and declaration (``where``: "saxpy.orch:5:1")."""

    name: str
    type: str
    default: Union[int, float, bool, None]
    where: str


@dataclass(frozen=True)
class BufferInfo:
    """A ``buffer``: its element ``type`` ("f32"), ``count`` (the declared expression's text, such
    as "tokens * hidden"; "1" for a scalar), whether it is a ``scalar`` or ``host`` buffer, the
    element size in bytes and its declaration."""

    name: str
    type: str
    count: str
    scalar: bool
    host: bool
    element_size: int
    where: str

    @property
    def declaration(self) -> str:
        """The declaration's shape: "f32[n]", "u32", "f32[n] host"."""
        text = self.type if self.scalar else f"{self.type}[{self.count}]"
        return text + (" host" if self.host else "")


@dataclass(frozen=True)
class CommInfo:
    """A ``comm`` (an NCCL communicator the pipeline's collectives run on)."""

    name: str


@dataclass(frozen=True)
class GraphInfo:
    """A top-level graph: ``main``, a ``device`` graph (launched from the GPU), a family of
    ``family_size`` members, or a ``segment`` of main (launched in order by ``launch()``)."""

    name: str
    main: bool
    device: bool
    family_size: int
    segment: bool


@dataclass(frozen=True)
class KernelInfo:
    """A kernel in the artifact: its CUBINs' ``archs``, the PTX's arch, whether orchc wrote it."""

    name: str
    archs: Tuple[str, ...]
    ptx_arch: str
    generated: bool
    where: str


def _default(type_name: str, text: Optional[str]) -> Union[int, float, bool, None]:
    if text is None:
        return None
    if type_name == "bool":
        return text == "true"
    if type_name in ("f16", "bf16", "f32", "f64"):
        return float(text)
    return int(text)


@dataclass(frozen=True)
class Stats:
    """What ``set_param`` and ``rebind`` did so far (orch::Executable::Stats)."""

    nodes_patched_in_place: int
    patches_refused: int
    graph_updates: int
    device_graph_uploads: int
    segments_rebuilt: int


@dataclass(frozen=True)
class UniqueIdComm:
    """Binds a ``comm`` that orch makes at instantiate from an NCCL unique id
    (:func:`orch.nccl_unique_id` on one rank, shared with the others) and destroys with the
    executable. Every rank instantiates at the same time."""

    unique_id: bytes
    rank: int
    world_size: int


def nccl_unique_id() -> bytes:
    """A fresh NCCL unique id (128 bytes) for :class:`UniqueIdComm`. Loads NCCL."""
    out = ctypes.create_string_buffer(128)
    _check(_rt.orch_nccl_unique_id(out))
    return out.raw


# ---- the C handles, owned ------------------------------------------------------------------


class _ExecHandle:
    """Owns an orch_executable* and what its bindings point into. Shared by the Executable and
    every Buffer exported from it, so the executable (and the memory it was bound to) lives
    until the last of them is gone."""

    __slots__ = ("h", "keep", "last_stream", "__weakref__")

    def __init__(self, h: Optional[int], keep: Dict[str, tuple]) -> None:
        self.h: Optional[int] = h
        self.keep = keep
        self.last_stream: Optional[int] = None

    def __del__(self) -> None:
        h, self.h = self.h, None
        if h and _rt is not None:
            _rt.orch_executable_destroy(h)  # waits for the last launch to finish

    # A copy would own the same orch_executable* and destroy it a second time.
    def __copy__(self) -> "_ExecHandle":
        raise TypeError(_NO_EXECUTABLE_COPY)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_ExecHandle":
        raise TypeError(_NO_EXECUTABLE_COPY)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(_NO_EXECUTABLE_COPY)


_NO_EXECUTABLE_COPY = (
    "orch.Executable cannot be copied or pickled: it owns CUDA graphs, the buffers the runtime allocated and "
    "its bindings; call pipeline.instantiate(...) again for another one (a Pipeline can be copied and pickled)"
)


def _label(info: BufferInfo) -> str:
    return f"buffer '{info.name}' ({info.declaration})"


def _names(items: Iterable[str]) -> str:
    items = list(items)
    return ", ".join(items) if items else "none"


def _overlap_pairs(allow_overlap: Any) -> List[Tuple[str, str]]:
    """allow_overlap as a list of (name, name): pairs (tuples or lists of two names); a str is
    refused, where iterating it would read "xy" as ("x", "y")."""
    message = "orch: allow_overlap takes pairs of buffer names, as [('x', 'y')]"
    if isinstance(allow_overlap, (str, bytes, bytearray)) or not isinstance(allow_overlap, _Iterable):
        raise TypeError(f"{message}, not {type(allow_overlap).__name__} {allow_overlap!r}")
    pairs = []
    for pair in allow_overlap:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{message}; {pair!r} is not a pair")
        a, b = pair
        c_name(a, "a name in `allow_overlap`")  # before the names are looked up: a NUL is a ValueError
        c_name(b, "a name in `allow_overlap`")
        pairs.append((a, b))
    return pairs


# ---- Pipeline -------------------------------------------------------------------------------


class Pipeline:
    """A verified pipeline (the artifact orchc writes) and its description. Loading it needs no
    GPU; its kernels are loaded on the current CUDA device the first time it is instantiated
    (see :meth:`instantiate`)."""

    def __init__(self, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"orch.Pipeline takes the artifact's bytes, not {type(data).__name__}")
        self._data = bytes(data)
        self._written: Optional[FrozenSet[str]] = None
        self._lock = threading.Lock()
        self._loaded: Optional[int] = None  # orch_pipeline*, once kernels are loaded
        h = ctypes.c_void_p()
        _check(_rt.orch_artifact_open(self._data, len(self._data), ctypes.byref(h)))
        self._artifact = h.value
        doc = json.loads((_rt.orch_artifact_describe(self._artifact) or b"{}").decode("utf-8", "replace"))
        self._doc = doc
        self.name: str = doc.get("name", "")
        self.compiler_version: str = doc.get("compiler_version", "")
        self.source_files: Tuple[str, ...] = tuple(doc.get("source_files", []))
        self.targets: Tuple[str, ...] = tuple(doc.get("targets", []))
        self.params: Dict[str, ParamInfo] = {
            p["name"]: ParamInfo(p["name"], p["type"], _default(p["type"], p["default"]), p["where"]) for p in doc.get("params", [])
        }
        self.buffers: Dict[str, BufferInfo] = {
            b["name"]: BufferInfo(b["name"], b["type"], b["count"], b["scalar"], b["host"], b["element_size"], b["where"])
            for b in doc.get("buffers", [])
        }
        self.comms: Dict[str, CommInfo] = {c["name"]: CommInfo(c["name"]) for c in doc.get("comms", [])}
        self.graphs: Dict[str, GraphInfo] = {
            g["name"]: GraphInfo(g["name"], g["main"], g["device"], g["family_size"], g["segment"]) for g in doc.get("graphs", [])
        }
        self.kernels: Tuple[KernelInfo, ...] = tuple(
            KernelInfo(k["name"], tuple(k["archs"]), k["ptx_arch"], k["generated"], k["where"]) for k in doc.get("kernels", [])
        )

    def __del__(self) -> None:
        a, self._artifact = getattr(self, "_artifact", None), None
        p, self._loaded = getattr(self, "_loaded", None), None
        if _rt is not None:
            if a:
                _rt.orch_artifact_destroy(a)
            if p:
                _rt.orch_pipeline_destroy(p)

    # A copy is loaded again from the bytes: its own artifact handle (and kernels, once it is
    # instantiated), never this one's, which the copy's __del__ would destroy.
    def __copy__(self) -> "Pipeline":
        return Pipeline(self._data)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Pipeline":
        copy = memo[id(self)] = Pipeline(self._data)
        return copy

    def __reduce__(self) -> tuple:
        return (Pipeline, (self._data,))

    def __repr__(self) -> str:
        return (
            f"<orch.Pipeline {self.name}: params {_names(self.params)}; buffers {_names(self.buffers)}; "
            f"comms {_names(self.comms)}; graphs {_names(self.graphs)}>"
        )

    @property
    def artifact(self) -> bytes:
        """The artifact's bytes (what ``orch.compile`` returned, or the file)."""
        return self._data

    @property
    def written_buffers(self) -> FrozenSet[str]:
        """The buffers the pipeline writes (a kernel argument not declared ``in``, the
        destination of a copy, fill or collective), as the runtime describes them (the rule its
        overlap check uses); read-only memory is refused for these."""
        if self._written is None:
            self._written = frozenset(b["name"] for b in self._doc.get("buffers", []) if b.get("written", True))
        return self._written

    @property
    def device(self) -> Optional[int]:
        """The CUDA device the kernels were loaded for, or None before the first instantiate."""
        return _rt.orch_pipeline_device(self._loaded) if self._loaded else None

    @property
    def image(self) -> Optional[str]:
        """What was loaded ("sm_90 CUBIN", "compute_90 PTX (JIT)"), or None before."""
        return _rt.orch_pipeline_image(self._loaded).decode() if self._loaded else None

    def load_kernels(self) -> None:
        """Loads the kernels on the current CUDA device now (instantiate does it the first
        time); an Error (NoDevice, NoKernelImage, ...) when that fails."""
        self._pipeline_handle()

    def _pipeline_handle(self) -> int:
        with self._lock:
            if self._loaded is None:
                h = ctypes.c_void_p()
                _check(_rt.orch_pipeline_load_from_memory(self._data, len(self._data), ctypes.byref(h)))
                if not h.value:
                    raise Error(ErrorCode.InvalidArgument, "orch_pipeline_load_from_memory returned no pipeline")
                self._loaded = h.value
            return self._loaded

    # -- bindings --

    def _bindings(
        self,
        params: Optional[Mapping[str, Any]],
        buffers: Optional[Mapping[str, Any]],
        comms: Optional[Mapping[str, Any]],
        allow_overlap: Sequence[Tuple[str, str]],
        stream: Optional[int],
    ) -> Tuple[int, Dict[str, Memory]]:
        """An orch_bindings* with everything bound (the caller destroys it) and the memory of
        each bound buffer. Raises for what can be seen without CUDA: Python types, names (str,
        no NUL), integers that do not fit their C type, unknown names, element types, device
        kinds, contiguity, alignment, read-only memory for a buffer the pipeline writes, and
        (through orch_artifact_check) param values, bind checks and sizes."""
        params = mapping(params, "params", "numbers")
        buffers = mapping(buffers, "buffers", "objects that speak DLPack or the CUDA Array Interface")
        comms = mapping(comms, "comms", "communicators")
        pairs = _overlap_pairs(allow_overlap)
        b = _rt.orch_bindings_create()
        if not b:
            raise Error(ErrorCode.OutOfMemory, "out of memory")
        try:
            for name, value in params.items():
                _bind_param(b, name, value)
            memory: Dict[str, Memory] = {}
            for name, obj in buffers.items():
                cname = c_name(name, "a key of `buffers`")
                info = self._buffer_info(name)
                m = self._import(info, obj, stream)
                memory[name] = m
                _check(_rt.orch_bindings_buffer(b, cname, m.ptr or None, m.nbytes))
            for name, comm in comms.items():
                _bind_comm(b, name, comm)
            for a, c in pairs:
                # orch_artifact_check does not look at these (the runtime does at instantiate,
                # with the memory): refused here with the runtime's error, so check() says it too.
                for n in (a, c):
                    if n not in self.buffers:
                        raise Error(
                            ErrorCode.UnknownName, f'allow_overlap("{a}", "{c}"): pipeline \'{self.name}\' has no buffer \'{n}\''
                        )
                _check(_rt.orch_bindings_allow_overlap(b, a.encode(), c.encode()))  # checked by _overlap_pairs
            _check(_rt.orch_artifact_check(self._artifact, b))
            return b, memory
        except BaseException:
            _rt.orch_bindings_destroy(b)
            raise

    def _buffer_info(self, name: str) -> BufferInfo:
        info = self.buffers.get(name)
        if info is None:
            raise Error(ErrorCode.UnknownName, f"pipeline {self.name} has no buffer `{name}` (its buffers: {_names(self.buffers)})")
        return info

    def _import(self, info: BufferInfo, obj: Any, stream: Optional[int]) -> Memory:
        """The memory `obj` lends to buffer `info`, checked (see _memory.import_memory)."""
        written = info.name in self.written_buffers
        return _memory.import_memory(obj, _label(info), info.where, ELEMENT_TYPES[info.type], info.host, stream, written)

    def check(
        self,
        params: Optional[Mapping[str, Any]] = None,
        buffers: Optional[Mapping[str, Any]] = None,
        comms: Optional[Mapping[str, Any]] = None,
        allow_overlap: Sequence[Tuple[str, str]] = (),
    ) -> None:
        """Checks bindings as :meth:`instantiate` does before it touches CUDA (names, values,
        bind checks, element types, contiguity, alignment, read-only memory, sizes) and raises
        :class:`orch.Error` naming the buffer or param and its ``.orch`` line (``TypeError``,
        ``ValueError`` or ``OverflowError`` for a Python value that cannot cross into C).
        Needs no GPU."""
        b, _ = self._bindings(params, buffers, comms, allow_overlap, None)
        _rt.orch_bindings_destroy(b)

    def instantiate(
        self,
        params: Optional[Mapping[str, Any]] = None,
        buffers: Optional[Mapping[str, Any]] = None,
        stream: StreamLike = None,
        comms: Optional[Mapping[str, Any]] = None,
        allow_overlap: Sequence[Tuple[str, str]] = (),
    ) -> "Executable":
        """Binds params and buffers, builds and instantiates the pipeline's CUDA graphs, and
        returns the :class:`Executable`.

        ``params``: ``{"n": 4096, "tol": 1e-6}``; values are converted to the declared type
        exactly or refused (docs/runtime.md); unbound params take their defaults.
        ``buffers``: ``{"x": tensor}``: objects that speak DLPack or the CUDA Array Interface
        (torch tensors, CuPy arrays, cuda.core buffers), on the executable's device, of the
        declared element type, contiguous, with at least the declared count of elements; they
        are used in place (no copy) and kept alive by the executable. A ``host`` buffer takes
        pinned host memory (``torch.empty(n, pin_memory=True)``). Unbound buffers are allocated
        (zero-filled) and available as :attr:`Executable.buffers`.
        ``stream``: where the uploads run and the bound objects' producers order their work
        (see :func:`orch.stream_handle`; default: torch's current stream if torch is imported,
        else the legacy default stream). ``comms``: ``{"world": orch.UniqueIdComm(...)}``, an
        ``ncclComm_t`` as int, or ``(ncclComm_t, rank, world_size)``.
        ``allow_overlap``: pairs of buffer names whose memory may overlap
        (``[("x", "y")]``).

        The kernels are loaded on the current CUDA device the first time; every later
        instantiate must run on that device too. Errors are :class:`orch.Error`, naming the
        buffer, param or statement and its ``.orch`` place.
        """
        s = stream_handle(stream)
        b, memory = self._bindings(params, buffers, comms, allow_overlap, s)
        try:
            p = self._pipeline_handle()
            device = _rt.orch_pipeline_device(p)
            for name, m in memory.items():
                _check_device(self.buffers[name], m, device)
                if m.producer_stream is not None:
                    _check(_rt.orch_stream_wait(s or None, m.producer_stream))
            h = ctypes.c_void_p()
            _check(_rt.orch_instantiate(p, b, s or None, ctypes.byref(h)))
        finally:
            _rt.orch_bindings_destroy(b)
        handle = _ExecHandle(h.value, {name: m.keep for name, m in memory.items()})
        handle.last_stream = s
        return Executable(self, handle, device)


def _check_device(info: BufferInfo, m: Memory, device: int) -> None:
    """The memory is on the executable's device (or host memory it can reach)."""
    if m.device_type == kDLCUDA and m.device_id is None and m.ptr:
        kind, dev = ctypes.c_int(0), ctypes.c_int(-1)
        _check(_rt.orch_memory_info(m.ptr, ctypes.byref(kind), ctypes.byref(dev)))
        if kind.value == 2:  # cudaMemoryTypeDevice
            m.device_id = dev.value
    if m.device_type == kDLCUDA and m.device_id is not None and m.device_id != device:
        raise Error(
            ErrorCode.InvalidArgument,
            f"{_label(info)} is given memory on cuda:{m.device_id}; the pipeline's kernels are loaded on cuda:{device} "
            f"(the device current at its first instantiate; use torch.cuda.device({m.device_id}) around load and instantiate)",
            info.where,
        )


_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


def _param_value(name: str, value: Any) -> Tuple[str, Union[int, float]]:
    """The C setter's type for a Python value: i64/u64 for integers (and bools), f64 for floats.
    The runtime converts to the declared type exactly or refuses."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (int, float)):  # a numpy scalar or 0-d tensor
        try:
            value = item()
        except (TypeError, ValueError):  # an array of several elements
            raise TypeError(f"orch: param '{name}' is a number, not {type(value).__name__} {value!r}") from None
    if isinstance(value, bool):
        return "u64", int(value)
    if isinstance(value, numbers.Integral):
        v = int(value)
        if _INT64_MIN <= v <= _INT64_MAX:
            return "i64", v
        if 0 <= v <= _UINT64_MAX:
            return "u64", v
        raise Error(ErrorCode.InvalidValue, f"param '{name}': {v} does not fit any integer type (64 bits)")
    if isinstance(value, numbers.Real):
        return "f64", float(value)
    raise TypeError(f"orch: param '{name}' is a number, not {type(value).__name__}")


def _bind_param(b: int, name: str, value: Any) -> None:
    cname = c_name(name, "a key of `params`")
    kind, v = _param_value(name, value)
    setter = {"i64": _rt.orch_bindings_param_i64, "u64": _rt.orch_bindings_param_u64, "f64": _rt.orch_bindings_param_f64}[kind]
    _check(setter(b, cname, v))


def _bind_comm(b: int, name: str, comm: Any) -> None:
    cname = c_name(name, "a key of `comms`")
    if isinstance(comm, UniqueIdComm):
        unique_id = comm.unique_id
        if not isinstance(unique_id, (bytes, bytearray, memoryview)):
            raise TypeError(f"orch: comm '{name}': an NCCL unique id is bytes, not {type(unique_id).__name__}")
        unique_id = bytes(unique_id)
        if len(unique_id) != 128:
            raise Error(ErrorCode.InvalidArgument, f"comm '{name}': an NCCL unique id is 128 bytes, not {len(unique_id)}")
        rank = c_int32(comm.rank, f"comm '{name}': the rank")
        world = c_int32(comm.world_size, f"comm '{name}': the world size")
        _check(_rt.orch_bindings_comm_from_unique_id(b, cname, unique_id, rank, world))
    elif isinstance(comm, tuple) and len(comm) == 3:
        handle = c_address(comm[0], f"comm '{name}': the ncclComm_t")
        rank = c_int32(comm[1], f"comm '{name}': the rank")
        world = c_int32(comm[2], f"comm '{name}': the world size")
        _check(_rt.orch_bindings_comm(b, cname, handle or None, rank, world))
    elif isinstance(comm, int) and not isinstance(comm, bool):
        _check(_rt.orch_bindings_comm(b, cname, c_address(comm, f"comm '{name}': the ncclComm_t") or None, -1, -1))
    else:
        raise TypeError(
            f"orch: comm '{name}' is bound to an ncclComm_t (int), (ncclComm_t, rank, world_size) or "
            f"orch.UniqueIdComm, not {type(comm).__name__}"
        )


# ---- Executable -----------------------------------------------------------------------------


class Executable:
    """An instantiated pipeline: its CUDA graphs, the buffers the runtime allocated and the
    memory it was bound to. :meth:`launch` runs it; :meth:`set_param` and :meth:`rebind`
    patch it in place. Not thread-safe (one thread at a time, as in C++). :meth:`close` (or
    the end of a ``with`` block, or garbage collection) frees it once no exported
    :class:`Buffer` is in use; it waits for the last launch first."""

    def __init__(self, pipeline: Pipeline, handle: _ExecHandle, device: int) -> None:
        self.pipeline = pipeline
        self._handle: Optional[_ExecHandle] = handle
        self._h: Optional[int] = handle.h
        self.device = device
        self._buffers: Dict[str, Buffer] = {}

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"on cuda:{self.device}"
        return f"<orch.Executable {self.pipeline.name} {state}>"

    # One orch_executable* per Executable: a copy would share it (and its CUDA graphs, which
    # one thread at a time may launch), so copies and pickles are refused.
    def __copy__(self) -> "Executable":
        raise TypeError(_NO_EXECUTABLE_COPY)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Executable":
        raise TypeError(_NO_EXECUTABLE_COPY)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(_NO_EXECUTABLE_COPY)

    def __enter__(self) -> "Executable":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Lets go of the executable: it is destroyed (after its last launch has finished) as
        soon as no Buffer or tensor made from one still uses it. Later calls raise."""
        self._handle = None
        self._h = None
        self._buffers = {}

    def _live(self) -> _ExecHandle:
        if self._handle is None:
            raise Error(ErrorCode.InvalidArgument, f"the executable of pipeline {self.pipeline.name} is closed")
        return self._handle

    def launch(self, stream: StreamLike = None) -> None:
        """Launches the pipeline's segments, in order, on `stream` (default: torch's current
        stream if torch is imported, else the legacy default stream): asynchronous, ordered
        with the work already queued there. For the least overhead in a loop, pass the stream
        (an int handle is fastest)."""
        h = self._h
        if h is None:
            self._live()
        # The fast path for an int handle; 0xFFFF_FFFF_FFFF_FFFF is UINT64_MAX, as a constant.
        s = stream if (type(stream) is int and 0 <= stream <= 0xFFFF_FFFF_FFFF_FFFF) else stream_handle(stream)
        err = _rt.orch_launch(h, s)
        if err:
            _check(err)
        self._handle.last_stream = s  # type: ignore[union-attr]

    def set_param(self, name: str, value: Any) -> None:
        """Changes a param; the nodes that depend on it are patched in place (bind checks and
        sizes re-evaluated first; on error nothing changes). Takes effect at the next launch."""
        self._live()
        cname = c_name(name, "`name`")
        kind, v = _param_value(name, value)
        setter = {"i64": _rt.orch_set_param_i64, "u64": _rt.orch_set_param_u64, "f64": _rt.orch_set_param_f64}[kind]
        _check(setter(self._h, cname, v))

    def rebind(self, name: str, obj: Any, stream: StreamLike = None) -> None:
        """Points buffer `name` at the memory of `obj` (checked as at instantiate) and patches
        every node that uses it; on error nothing changes. A buffer the runtime had allocated is
        freed (Buffers exported from it must no longer be used)."""
        handle = self._live()
        cname = c_name(name, "`name`")
        info = self.pipeline._buffer_info(name)
        s = stream_handle(stream)
        m = self.pipeline._import(info, obj, s)
        _check_device(info, m, self.device)
        if m.producer_stream is not None:
            _check(_rt.orch_stream_wait(s or None, m.producer_stream))
        _check(_rt.orch_rebind(self._h, cname, m.ptr or None, m.nbytes))
        handle.keep[name] = m.keep
        self._buffers.pop(name, None)

    def buffer(self, name: str) -> "Buffer":
        """Buffer `name` (runtime-allocated or bound) as an object that speaks DLPack and the
        CUDA Array Interface: ``torch.from_dlpack(x.buffer("y"))`` is zero-copy."""
        handle = self._live()
        cname = c_name(name, "`name`")
        b = self._buffers.get(name)
        if b is None:
            info = self.pipeline._buffer_info(name)
            ptr = _rt.orch_executable_buffer(self._h, cname) or 0
            nbytes = _rt.orch_executable_buffer_bytes(self._h, cname)
            b = Buffer(info, ptr, nbytes, self.device, handle)
            self._buffers[name] = b
        return b

    @property
    def buffers(self) -> Dict[str, "Buffer"]:
        """Every buffer, by name (see :meth:`buffer`)."""
        return {name: self.buffer(name) for name in self.pipeline.buffers}

    @property
    def stats(self) -> Stats:
        """What set_param and rebind did so far."""
        self._live()
        s = _native.Stats()
        _check(_rt.orch_executable_stats(self._h, ctypes.byref(s)))
        return Stats(s.nodes_patched_in_place, s.patches_refused, s.graph_updates, s.device_graph_uploads, s.segments_rebuilt)

    def device_status(self) -> Optional[Error]:
        """After the launch stream has finished: the first error the kernels orchc wrote met
        on the GPU (a device graph launch that failed; ``code`` DeviceError, ``where`` the
        statement), or None. Kept until :meth:`clear_device_status`."""
        self._live()
        return _take_error(_rt.orch_device_status(self._h))

    def clear_device_status(self) -> None:
        self._live()
        _check(_rt.orch_clear_device_status(self._h))

    @property
    def rank(self) -> int:
        self._live()
        return _rt.orch_executable_rank(self._h)

    @property
    def world_size(self) -> int:
        self._live()
        return _rt.orch_executable_world_size(self._h)

    def comm(self, name: str) -> int:
        """The ncclComm_t in use for comm `name` (0 for an unknown or unbound name)."""
        self._live()
        return _rt.orch_executable_comm(self._h, c_name(name, "`name`")) or 0


# ---- Buffer: memory orch owns, exported -----------------------------------------------------


class Buffer:
    """A buffer of an :class:`Executable`, for other libraries: ``torch.from_dlpack(buf)``,
    ``cupy.asarray(buf)`` (CUDA Array Interface), ``numpy.asarray(buf)`` for a ``host``
    buffer. Zero-copy; the executable stays alive while this object or any array made from it
    lives. Readers synchronize with the executable's last launch (DLPack's ``stream`` argument,
    the interface's ``stream`` entry)."""

    def __init__(self, info: BufferInfo, ptr: int, nbytes: int, device: int, handle: _ExecHandle) -> None:
        self.info = info
        self.name = info.name
        self.ptr = int(ptr)
        self.nbytes = int(nbytes)
        self.element = ELEMENT_TYPES[info.type]
        self.dtype = info.type
        self.count = self.nbytes // self.element.size
        self.shape = (self.count,)
        self.device = device
        self.host = info.host
        self._handle = handle

    def __repr__(self) -> str:
        return f"<orch.Buffer {self.name}: {self.count} x {self.dtype} at {self.ptr:#x} ({'host' if self.host else f'cuda:{self.device}'})>"

    def __len__(self) -> int:
        return self.count

    def __copy__(self) -> "Buffer":
        # Another view of the same memory, sharing (and keeping alive) the same executable.
        return Buffer(self.info, self.ptr, self.nbytes, self.device, self._handle)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Buffer":
        raise TypeError(
            f"orch.Buffer '{self.name}' is a view of the executable's memory and cannot be deep-copied or pickled; "
            "copy its data (torch.from_dlpack(buf).clone(), numpy.array(buf))"
        )

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self.__deepcopy__({})

    def _sync_to(self, consumer: Optional[int]) -> None:
        """Orders the executable's last launch before work on the consumer's stream."""
        last = self._handle.last_stream
        if last is None or self.host:
            return
        _check(_rt.orch_stream_wait(consumer or None, last or None))

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (kDLCPU, 0) if self.host else (kDLCUDA, self.device)

    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        if copy:
            raise BufferError("orch.Buffer: DLPack copies are not supported (copy=True)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"orch.Buffer: {self.name} lives on {self.__dlpack_device__()}, not {tuple(dl_device)}")
        if not self.host:
            # DLPack: None means the legacy default stream; -1 asks for no synchronization.
            if stream is None:
                self._sync_to(1)
            elif stream != -1:
                self._sync_to(int(stream))
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _memory.make_capsule(self.ptr, self.count, self.element, self.__dlpack_device__(), self, versioned)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        if self.element.typestr is None:
            raise AttributeError("bf16 has no CUDA Array Interface typestr; use DLPack (torch.from_dlpack)")
        last = self._handle.last_stream
        return {
            "shape": self.shape,
            "typestr": self.element.typestr,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": None if (last is None or self.host) else (last or 1),
        }

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        if not self.host:
            raise AttributeError(f"buffer '{self.name}' is device memory; use DLPack or the CUDA Array Interface")
        if self.element.typestr is None:
            raise AttributeError("bf16 has no array interface typestr; use DLPack")
        return {"shape": self.shape, "typestr": self.element.typestr, "data": (self.ptr, False), "version": 3, "strides": None}


# ---- load -----------------------------------------------------------------------------------


def load(source: Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]) -> Pipeline:
    """A pipeline from an artifact: a path (``str`` or :class:`pathlib.Path`) to a
    ``pipeline.bin``, or its bytes (what :func:`orch.compile` returns). Verified (envelope,
    checksum, FlatBuffers verifier, semantic checks) and described; needs no GPU. Raises
    :class:`orch.Error` (``Io``, ``InvalidArtifact``)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Pipeline(bytes(source))
    if isinstance(source, (str, os.PathLike)):
        h = ctypes.c_void_p()
        _check(_rt.orch_artifact_read(c_path(source, "the artifact's path"), ctypes.byref(h)))
        _rt.orch_artifact_destroy(h.value)  # the C side read and verified it; read the bytes for the Pipeline
        with open(source, "rb") as f:
            return Pipeline(f.read())
    raise TypeError(f"orch.load takes a path or the artifact's bytes, not {type(source).__name__}")
