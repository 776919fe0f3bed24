"""Memory shared with other libraries: DLPack and ``__cuda_array_interface__`` in both
directions, parsed and built with ctypes (no Python-version-specific code).

Import (binding a buffer): :func:`import_memory` reads any object that speaks DLPack
(``__dlpack__``/``__dlpack_device__``: torch tensors, CuPy arrays, cuda.core buffers, JAX
arrays) or the CUDA Array Interface (v2/v3: CuPy, Numba, PyTorch) and checks it against the
buffer's declaration: the kind of device, the element type, that it is contiguous, that every
integer fits its C type (sizes, offsets, addresses, streams), that the address is aligned to the
element size, and that read-only memory is not bound to a buffer the pipeline writes; the size
is checked by the runtime (orch_artifact_check), which names the declaration. A torch tensor's
storage is kept alive with the binding, not just the tensor object.

Export (a buffer the runtime allocated): :class:`Buffer` implements ``__dlpack__``,
``__dlpack_device__``, ``__cuda_array_interface__`` (v3) and, for ``host`` buffers,
``__array_interface__``; ``torch.from_dlpack(buf)`` is zero-copy and keeps the executable alive.
"""

from __future__ import annotations

import ctypes
import operator
import threading
from ctypes import POINTER, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ._checks import OutOfRange, UINT64_MAX, c_address
from ._errors import BindingTypeError, Error, ErrorCode

# ---- element types -------------------------------------------------------------------------

# DLPack type codes (dlpack.h, DLDataTypeCode).
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6
# DLPack device types (DLDeviceType).
kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
_DEVICE_NAMES = {kDLCPU: "the CPU", kDLCUDA: "a CUDA device", kDLCUDAHost: "pinned host memory", kDLCUDAManaged: "managed memory"}


@dataclass(frozen=True)
class ElementType:
    name: str  # the language's name: "f32"
    size: int  # bytes
    dlpack: Tuple[int, int]  # (code, bits)
    typestr: Optional[str]  # the array interfaces' ("<f4"); None where they have none (bf16)


ELEMENT_TYPES: Dict[str, ElementType] = {
    t.name: t
    for t in (
        ElementType("u8", 1, (kDLUInt, 8), "|u1"),
        ElementType("u16", 2, (kDLUInt, 16), "<u2"),
        ElementType("u32", 4, (kDLUInt, 32), "<u4"),
        ElementType("u64", 8, (kDLUInt, 64), "<u8"),
        ElementType("i8", 1, (kDLInt, 8), "|i1"),
        ElementType("i16", 2, (kDLInt, 16), "<i2"),
        ElementType("i32", 4, (kDLInt, 32), "<i4"),
        ElementType("i64", 8, (kDLInt, 64), "<i8"),
        ElementType("f16", 2, (kDLFloat, 16), "<f2"),
        ElementType("bf16", 2, (kDLBfloat, 16), None),
        ElementType("f32", 4, (kDLFloat, 32), "<f4"),
        ElementType("f64", 8, (kDLFloat, 64), "<f8"),
        ElementType("bool", 1, (kDLBool, 8), "|b1"),
    )
}
_BY_DLPACK = {t.dlpack: t for t in ELEMENT_TYPES.values()}
_BY_TYPESTR = {t.typestr[1:]: t for t in ELEMENT_TYPES.values() if t.typestr}


def dlpack_type_name(code: int, bits: int, lanes: int) -> str:
    t = _BY_DLPACK.get((code, bits))
    base = t.name if t else {kDLInt: "int", kDLUInt: "uint", kDLFloat: "float", kDLBfloat: "bfloat", kDLBool: "bool", 5: "complex"}.get(code, f"code{code}") + str(bits)
    return base if lanes == 1 else f"{base}x{lanes}"


# ---- DLPack structs (dlpack.h, v1.x; the legacy DLManagedTensor shares DLTensor) ------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", _Deleter),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CapsuleDestructor = ctypes.CFUNCTYPE(None, c_void_p)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, _CapsuleDestructor]
# The destructor receives the capsule as a raw PyObject*.
_IsValidRaw = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointerRaw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

# ---- export: DLPack capsules of memory orch owns -------------------------------------------

# Managed tensors handed out and not yet deleted, by address: the struct, its shape array and
# the owner they keep alive. The consumer's deleter call (or the capsule's destructor, for a
# capsule nobody consumed) drops the entry.
_exports: Dict[int, tuple] = {}
_exports_lock = threading.Lock()


def _release(address: int) -> None:
    with _exports_lock:
        _exports.pop(address, None)


@_Deleter
def _deleter(address):  # called by the consumer when it is done with the tensor
    if address:
        _release(address)


@_CapsuleDestructor
def _capsule_destructor(capsule):  # a capsule nobody consumed: its tensor is ours to delete
    for name in (b"dltensor_versioned", b"dltensor"):
        if _IsValidRaw(capsule, name):
            address = _GetPointerRaw(capsule, name)
            if address:
                _release(address)
            return


def make_capsule(
    ptr: int, count: int, element: ElementType, device: Tuple[int, int], owner: Any, versioned: bool, read_only: bool = False
) -> Any:
    """A DLPack capsule of `count` elements at `ptr` (one dimension, compact), keeping `owner`
    alive until the consumer calls the deleter."""
    shape = (c_int64 * 1)(count)
    m: Any
    if versioned:
        m = DLManagedTensorVersioned()
        m.version = DLPackVersion(1, 0)
        m.flags = DLPACK_FLAG_BITMASK_READ_ONLY if read_only else 0
        name = b"dltensor_versioned"
    else:
        m = DLManagedTensor()
        name = b"dltensor"
    t = m.dl_tensor
    t.data = ptr
    t.device = DLDevice(device[0], device[1])
    t.ndim = 1
    t.dtype = DLDataType(element.dlpack[0], element.dlpack[1], 1)
    t.shape = ctypes.cast(shape, POINTER(c_int64))
    t.strides = None
    t.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _deleter
    address = ctypes.addressof(m)
    with _exports_lock:
        _exports[address] = (m, shape, owner)
    return _api.PyCapsule_New(address, name, _capsule_destructor)


def live_exports() -> int:
    """DLPack tensors handed out whose deleter has not run yet (for tests)."""
    with _exports_lock:
        return len(_exports)


# ---- import: what a bound object holds -----------------------------------------------------


@dataclass
class Memory:
    """Memory an object lends to a binding: its address and size, what it is, and the objects
    to keep alive while the binding lasts."""

    ptr: int
    nbytes: int
    count: int
    device_type: int  # a DLPack device type; kDLCUDA for the CUDA Array Interface
    device_id: Optional[int]  # None: ask CUDA (the CUDA Array Interface does not say)
    keep: tuple
    source: str  # "DLPack" or "__cuda_array_interface__"
    producer_stream: Optional[int] = None  # CUDA Array Interface v3: wait for it before use
    read_only: bool = False


def _fail(code: ErrorCode, what: str, where: str) -> Error:
    return Error(code, what, where)


def _type_fail(what: str, where: str) -> Error:
    """The object is of the wrong Python type: an orch.Error that is also a TypeError."""
    return BindingTypeError(ErrorCode.InvalidArgument, what, where)


def _integer(value: Any, what: str, where: str) -> int:
    """An integer of an interface dict (a shape's extent, a stride, an address): Python ints and
    integer-like objects, never floats (int(2.5) would quietly be 2) or bools."""
    if isinstance(value, bool):
        raise _type_fail(f"{what} is an integer, not bool {value!r}", where)
    try:
        return operator.index(value)
    except TypeError:
        raise _type_fail(f"{what} is an integer, not {type(value).__name__} {value!r}", where) from None


def _nbytes(count: int, element: ElementType, label: str) -> int:
    """The byte size of `count` elements, refused when it does not fit size_t (ctypes would wrap
    it: 2**64 bytes would be bound as 0)."""
    nbytes = count * element.size
    if nbytes > UINT64_MAX:
        raise OutOfRange(f"orch: {label} is given {count} {element.name} elements ({nbytes} bytes), which does not fit size_t")
    return nbytes


def _contiguous(shape, strides_elems) -> bool:
    """Row-major and compact (strides of size-1 dimensions do not matter)."""
    if strides_elems is None:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides_elems)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _describe(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ not in ("builtins", None) else t.__qualname__


def _from_dlpack(obj: Any, label: str, where: str, element: ElementType, host: bool, stream: Optional[int]) -> Memory:
    try:
        dev = obj.__dlpack_device__()
        device_type, device_id = int(dev[0]), int(dev[1])
    except Exception as e:  # noqa: BLE001: a producer's own error, reported with the buffer's name
        raise _fail(ErrorCode.InvalidArgument, f"{label}: __dlpack_device__() failed: {e}", where) from e
    allowed = (kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLCUDA) if host else (kDLCUDA, kDLCUDAManaged, kDLCUDAHost)
    if device_type not in allowed:
        place = _DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
        want = "pinned host memory (torch: pin_memory=True) or CUDA memory" if host else "CUDA device memory (torch: .cuda(), CuPy arrays)"
        raise _fail(ErrorCode.InvalidArgument, f"{label} is given memory on {place} ({_describe(obj)}); it needs {want}", where)
    # The producer orders its pending work before `stream` (DLPack's stream argument: 1 is the
    # legacy default stream, as 0 may not be passed). Host memory, pinned included, takes no
    # stream: torch refuses one for its (pinned) CPU tensors ("stream should be None on cpu").
    s = None if device_type in (kDLCPU, kDLCUDAHost) else (1 if not stream else stream)
    try:
        try:
            capsule = obj.__dlpack__(stream=s, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=s)  # a producer from before DLPack 1.0
    except Exception as e:  # noqa: BLE001
        raise _fail(ErrorCode.InvalidArgument, f"{label}: __dlpack__() failed: {e}", where) from e
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        m = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor_versioned"), POINTER(DLManagedTensorVersioned)).contents
        if m.version.major > 1:
            raise _fail(ErrorCode.InvalidArgument, f"{label}: DLPack {m.version.major}.{m.version.minor} is newer than orch reads (1.x)", where)
        tensor = m.dl_tensor
        read_only = bool(m.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    elif _api.PyCapsule_IsValid(capsule, b"dltensor"):
        tensor = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor"), POINTER(DLManagedTensor)).contents.dl_tensor
        read_only = False
    else:
        raise _fail(ErrorCode.InvalidArgument, f"{label}: __dlpack__() returned {_describe(capsule)}, not a DLPack capsule", where)
    # The capsule stays unconsumed and alive as long as the binding: its own destructor gives
    # the tensor back to the producer.
    ndim = int(tensor.ndim)
    if ndim < 0 or ndim > 64:
        raise _fail(ErrorCode.InvalidArgument, f"{label}: DLPack tensor with {ndim} dimensions", where)
    shape = [int(tensor.shape[i]) for i in range(ndim)] if ndim else []
    strides = [int(tensor.strides[i]) for i in range(ndim)] if (ndim and tensor.strides) else None
    dt = tensor.dtype
    got = (int(dt.code), int(dt.bits))
    if got != element.dlpack or int(dt.lanes) != 1:
        raise _fail(
            ErrorCode.InvalidArgument,
            f"{label} has {element.name} elements; it is given {dlpack_type_name(dt.code, dt.bits, dt.lanes)} ({_describe(obj)})",
            where,
        )
    if not _contiguous(shape, strides):
        raise _fail(
            ErrorCode.InvalidArgument,
            f"{label} needs contiguous memory; it is given shape {tuple(shape)} with strides {tuple(strides or ())} "
            "(in elements); pass a contiguous copy (torch: .contiguous())",
            where,
        )
    count = 1
    for extent in shape:
        if extent < 0:
            raise _fail(ErrorCode.InvalidArgument, f"{label}: DLPack tensor with a negative extent {extent}", where)
        count *= extent
    nbytes = _nbytes(count, element, label)
    ptr = (int(tensor.data or 0) + int(tensor.byte_offset)) if count else int(tensor.data or 0)
    ptr = c_address(ptr, f"{label}: the DLPack tensor's data + byte_offset")
    return Memory(ptr, nbytes, count, device_type, device_id, (obj, capsule), "DLPack", None, read_only)


def _from_cuda_array_interface(obj: Any, cai: Any, label: str, where: str, element: ElementType) -> Memory:
    if not isinstance(cai, dict):
        raise _type_fail(f"{label}: __cuda_array_interface__ is {_describe(cai)}, not a dict", where)
    version = cai.get("version", 0)
    if not isinstance(version, int) or version < 2:
        raise _fail(ErrorCode.InvalidArgument, f"{label}: __cuda_array_interface__ version {version!r}; orch reads versions 2 and 3", where)
    if cai.get("mask") is not None:
        raise _fail(ErrorCode.InvalidArgument, f"{label}: masked arrays cannot be bound", where)
    typestr = cai.get("typestr")
    data = cai.get("data")
    shape = cai.get("shape")
    if not isinstance(typestr, str) or not isinstance(shape, tuple) or not isinstance(data, tuple) or len(data) != 2:
        raise _fail(ErrorCode.InvalidArgument, f"{label}: __cuda_array_interface__ lacks typestr, shape or data", where)
    order, kind = typestr[:1], typestr[1:]
    have = _BY_TYPESTR.get(kind) if order in ("<", "|", "=") else None
    if element.typestr is None or have is not element:
        raise _fail(
            ErrorCode.InvalidArgument,
            f"{label} has {element.name} elements; it is given typestr {typestr!r} ({_describe(obj)})"
            + ("; bf16 has no typestr: pass an object that speaks DLPack" if element.typestr is None else ""),
            where,
        )
    shape = [_integer(x, f"{label}: an extent of __cuda_array_interface__ shape {cai.get('shape')!r}", where) for x in shape]
    strides = cai.get("strides")
    if strides is not None:
        if not isinstance(strides, tuple):
            raise _type_fail(f"{label}: __cuda_array_interface__ strides are a tuple or None, not {_describe(strides)}", where)
        strides = tuple(_integer(x, f"{label}: a stride of __cuda_array_interface__", where) for x in strides)
        if any(s % element.size for s in strides):
            raise _fail(ErrorCode.InvalidArgument, f"{label} needs contiguous memory; it is given strides {tuple(strides)} (in bytes)", where)
        strides_elems = [s // element.size for s in strides]
        if not _contiguous(shape, strides_elems):
            raise _fail(
                ErrorCode.InvalidArgument,
                f"{label} needs contiguous memory; it is given shape {tuple(shape)} with strides {tuple(strides)} (in bytes)",
                where,
            )
    count = 1
    for extent in shape:
        if extent < 0:
            raise _fail(ErrorCode.InvalidArgument, f"{label}: negative extent {extent}", where)
        count *= extent
    nbytes = _nbytes(count, element, label)
    what = f"{label}: the address in __cuda_array_interface__ data"
    ptr = c_address(_integer(data[0] or 0, what, where), what)
    stream = cai.get("stream") if version >= 3 else None
    if stream is not None:
        if not isinstance(stream, int) or isinstance(stream, bool) or stream == 0:
            raise _fail(ErrorCode.InvalidArgument, f"{label}: __cuda_array_interface__ stream {stream!r} (0 is not allowed)", where)
        stream = c_address(stream, f"{label}: the __cuda_array_interface__ stream")
    # data = (address, read-only flag)
    return Memory(ptr, nbytes, count, kDLCUDA, None, (obj,), "__cuda_array_interface__", stream, bool(data[1]))


def _torch_storage(obj: Any) -> Any:
    """A torch tensor's storage (``untyped_storage()``), or None for other objects. The tensor
    object alone does not keep the memory: ``x.set_(...)`` or ``x.data = ...`` points it at
    other storage and torch frees the old one (its caching allocator hands it out again) while
    the graph still writes there. Duck-typed, so torch need not be imported here."""
    get = getattr(obj, "untyped_storage", None)
    if not callable(get):
        return None
    try:
        return get()
    except Exception:  # noqa: BLE001: a tensor subclass without storage (fake, meta): nothing more to keep
        return None


def import_memory(
    obj: Any, label: str, where: str, element: ElementType, host: bool, stream: Optional[int], written: bool = True
) -> Memory:
    """The memory `obj` lends to a buffer declared with `element` (`host`: a `host` buffer;
    `written`: the pipeline writes it), checked before CUDA is involved. `label` names the
    buffer in messages ("buffer 'x' (f32[n])"), `where` is its declaration's place."""
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        m = _from_dlpack(obj, label, where, element, host, stream)
    else:
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            cai = None
        if cai is None:
            raise _type_fail(
                f"{label} is given {_describe(obj)}, which speaks neither DLPack (__dlpack__) nor the CUDA Array Interface "
                "(torch tensors, CuPy arrays and cuda.core buffers do)",
                where,
            )
        m = _from_cuda_array_interface(obj, cai, label, where, element)
    if m.nbytes and m.ptr % element.size:
        # Kernels read and write whole elements: a misaligned f32 pointer faults or, worse, is
        # rounded down by the hardware.
        raise _fail(
            ErrorCode.InvalidArgument,
            f"{label} is given memory at {m.ptr:#x}, which is not aligned to its elements: {element.name} needs an "
            f"address that is a multiple of {element.size} bytes ({_describe(obj)})",
            where,
        )
    if m.read_only and written:
        flag = "DLPack's read-only flag" if m.source == "DLPack" else "__cuda_array_interface__ data's read-only flag"
        raise _fail(
            ErrorCode.InvalidArgument,
            f"{label} is written by the pipeline, and it is given read-only memory ({_describe(obj)}, {flag} is set); "
            "bind writable memory (a copy)",
            where,
        )
    storage = _torch_storage(obj)
    if storage is not None:
        m.keep = m.keep + (storage,)
    return m
