"""orch from Python without a GPU: compile, check, load, describe, every binding error that can
be provoked before CUDA is involved (with objects that fake DLPack and the CUDA Array
Interface), bad artifacts, DLPack export on host memory, streams."""

from __future__ import annotations

import ctypes
import gc
import pathlib
import re
import subprocess
import warnings

import pytest

import orch
from orch import _memory
from orch._pipeline import Buffer, BufferInfo, _ExecHandle

from conftest import ERRORS, EXAMPLE_NAMES, EXAMPLES

SAXPY_TEXT = '''pipeline saxpy_text
target sm_90
param n: u32 = 1024
param a: f32 = 2.0
buffer x: f32[n]
buffer y: f32[n]
kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
graph main {
  saxpy<<<ceil_div(n, 256), 256>>>(n, a, x, y)
}
'''

# A param without a default, a block size from a param (a bind check), every element type.
TYPES_TEXT = '''pipeline types
target sm_90
param n: u32
param threads: u32 = 128
buffer a: u8[n]
buffer b: i16[n]
buffer c: f16[n]
buffer d: bf16[n]
buffer e: f64[n]
buffer f: bool[n]
buffer g: i64[2 * n]
buffer flag: u32
buffer staging: f32[n] host
kernel touch(n: u32, g: inout i64[]) source """
extern "C" __global__ void touch(unsigned n, long long* g) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] += 1;
}
"""
graph main {
  touch<<<ceil_div(n, threads), threads>>>(n, g)
}
'''


# ---- fakes ----------------------------------------------------------------------------------

FAKE_PTR = 0x7F00_0000_0000  # never dereferenced: the checks here happen before CUDA


class FakeCAI:
    """An object with only __cuda_array_interface__."""

    def __init__(self, shape, typestr="<f4", strides=None, version=3, stream=None, mask=None, ptr=FAKE_PTR):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "version": version,
            "strides": strides,
        }
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


class FakeDLPack:
    """An object that speaks DLPack, with a hand-built DLManagedTensor (legacy or versioned)
    whose deleter counts its calls."""

    def __init__(self, shape, code=2, bits=32, device=(2, 0), strides=None, versioned=True, ptr=FAKE_PTR):
        self.shape = tuple(shape)
        self.code, self.bits = code, bits
        self.device = device
        self.strides = strides
        self.versioned = versioned
        self.ptr = ptr
        self.calls = []
        self.deleted = 0  # deleter calls for this object's capsules

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        self.calls.append((stream, max_version))
        versioned = self.versioned and max_version is not None and max_version >= (1, 0)
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*self.strides) if self.strides else None
        m = _memory.DLManagedTensorVersioned() if versioned else _memory.DLManagedTensor()
        if versioned:
            m.version = _memory.DLPackVersion(1, 0)
        t = m.dl_tensor
        t.data = self.ptr
        t.device = _memory.DLDevice(*self.device)
        t.ndim = ndim
        t.dtype = _memory.DLDataType(self.code, self.bits, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides else None
        keep = (m, shape, strides)

        @_memory._Deleter
        def deleter(address, owner=self):
            owner.deleted += 1
            _live.pop(address, None)

        m.deleter = deleter
        _live[ctypes.addressof(m)] = (keep, deleter)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        return _make_capsule(ctypes.addressof(m), name)


_live: dict = {}


@_memory._CapsuleDestructor
def _fake_capsule_destructor(capsule):
    for name, cls in ((b"dltensor_versioned", _memory.DLManagedTensorVersioned), (b"dltensor", _memory.DLManagedTensor)):
        if _memory._IsValidRaw(capsule, name):
            address = _memory._GetPointerRaw(capsule, name)
            ctypes.cast(address, ctypes.POINTER(cls)).contents.deleter(address)
            return


def _make_capsule(address, name):
    return _memory._api.PyCapsule_New(address, name, _fake_capsule_destructor)


# ---- compile and check ----------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_every_example_compiles_and_loads(examples, compiled, name):
    data = compiled(name)
    assert data[:8] == b"ORCHPIPE"
    p = orch.load(data)
    assert p.name == name
    assert p.artifact == data
    assert "main" in p.graphs and p.graphs["main"].main
    assert orch.check(EXAMPLES / f"{name}.orch") == []


def test_compile_text_and_path_give_the_same_pipeline(examples, cache_dir):
    path = EXAMPLES / "saxpy.orch"
    from_text = orch.load(orch.compile(path.read_text(), path=str(path), cache_dir=cache_dir))
    from_path = orch.load(orch.compile(path, cache_dir=cache_dir))
    assert from_text.params == from_path.params
    assert from_text.buffers == from_path.buffers


def test_compile_text_finds_from_files_next_to_path(examples, cache_dir, tmp_path):
    text = (EXAMPLES / "jacobi.orch").read_text()
    with pytest.raises(orch.CompileError) as e:
        orch.compile(text, path=str(tmp_path / "jacobi.orch"), cache_dir=cache_dir)
    assert any(d.code == "E0110" for d in e.value.diagnostics)  # jacobi.cu is not in tmp_path
    (tmp_path / "jacobi.cu").write_text((EXAMPLES / "jacobi.cu").read_text())
    p = orch.load(orch.compile(text, path=str(tmp_path / "jacobi.orch"), cache_dir=cache_dir))
    assert p.buffers["residual"].scalar


def test_compile_options_arch_target_and_no_cache(examples):
    data = orch.compile(SAXPY_TEXT, arch=["sm_80", "sm_90"], cache_dir="")
    (kernel,) = orch.load(data).kernels
    assert kernel.archs == ("sm_80", "sm_90") and kernel.ptx_arch == "compute_90"
    data = orch.compile(SAXPY_TEXT, arch="sm_80", target="sm_80", cache_dir="")
    assert orch.load(data).kernels[0].archs == ("sm_80",)
    assert orch.load(data).targets == ("sm_80",)
    with pytest.raises(ValueError):
        orch.compile(SAXPY_TEXT, arch="sm_80,sm_90")
    with pytest.raises(ValueError):
        orch.compile(SAXPY_TEXT, jobs=-1)
    with pytest.raises(TypeError):
        orch.compile(42)  # type: ignore[arg-type]


COUNTDOWN_TEXT = '''pipeline countdown
target sm_90
param n: i32 = 100
buffer c: i32
kernel step(c: inout i32) source """
extern "C" __global__ void step(int* c) { if (threadIdx.x == 0) --(*c); }
"""
graph main {
  fill c = n
  while c > 0 {
    step<<<1, 32>>>(c)
  }
}
'''


def test_compile_options_pdl_and_unroll(examples, cache_dir):
    # Unrolled by default: the loop's guard slots are a buffer of their own, and step has a guarded
    # variant; --no-pdl --unroll 1 gives the plain graph.
    fast = orch.load(orch.compile(COUNTDOWN_TEXT, cache_dir=cache_dir))
    plain = orch.load(orch.compile(COUNTDOWN_TEXT, cache_dir=cache_dir, pdl=False, unroll=1))
    assert "orch.guard.0" in fast.buffers and "orch.guard.0" not in plain.buffers
    assert len(fast.kernels) > len(plain.kernels)
    three = orch.load(orch.compile(COUNTDOWN_TEXT, cache_dir=cache_dir, unroll=3))
    assert three.buffers["orch.guard.0"].count == "2"  # one slot per copy from the second
    with pytest.raises(ValueError):
        orch.compile(COUNTDOWN_TEXT, unroll=65)
    with pytest.raises(ValueError):
        orch.compile(COUNTDOWN_TEXT, unroll=-1)
    with pytest.raises(TypeError):
        orch.compile(COUNTDOWN_TEXT, pdl=1)  # type: ignore[arg-type]


def test_text_pipelines_are_named_string_in_diagnostics():
    (d,) = orch.check("pipeline p\ngraph main {\n  fill nope = 0\n}\n")
    assert d.file == "<string>" and d.line == 3 and d.severity == "error"


def _error_lines(path: pathlib.Path):
    m = re.match(r"// error-line: ([\d ]+)", path.read_text().splitlines()[0])
    return [int(x) for x in m.group(1).split()]


def _error_code(path: pathlib.Path):
    m = re.match(r"// error-code: (E\d{4})$", path.read_text().splitlines()[1])
    return m.group(1)


@pytest.mark.parametrize("path", sorted(ERRORS.glob("*.orch")), ids=lambda p: p.stem)
def test_every_example_error_is_reported_at_its_line(path):
    diagnostics = orch.check(path)
    errors = [d for d in diagnostics if d.severity == "error"]
    assert errors, "no error"
    assert errors[0].line in _error_lines(path)
    assert errors[0].file == str(path)
    assert errors[0].code == _error_code(path)
    with pytest.raises(orch.CompileError) as e:
        orch.compile(path)
    assert [d.code for d in e.value.diagnostics] == [d.code for d in diagnostics]


@pytest.mark.parametrize("path", sorted(ERRORS.glob("*.orch")), ids=lambda p: p.stem)
def test_compile_error_text_is_what_orchc_prints(path, orchc):
    with pytest.raises(orch.CompileError) as e:
        orch.compile(path)
    run = subprocess.run([orchc, "--check", "--color=never", str(path)], capture_output=True, text=True)
    assert run.returncode == 1
    assert str(e.value) == run.stderr
    json_run = subprocess.run([orchc, "--check", "--diagnostics-format=json", str(path)], capture_output=True, text=True)
    import json

    want = json.loads(json_run.stdout)["diagnostics"]
    got = e.value.diagnostics
    assert [(d["code"], d["message"], d["location"]["line"], d["location"]["column"]) for d in want] == [
        (d.code, d.message, d.line, d.column) for d in got
    ]


def test_a_missing_file_is_a_diagnostic(tmp_path):
    (d,) = orch.check(tmp_path / "nope.orch")
    assert d.code == "E0004" and "nope.orch" in d.message


def test_compiler_warnings_are_python_warnings(cache_dir):
    text = SAXPY_TEXT.replace("unsigned i = blockIdx.x", "int unused = 0; unsigned i = blockIdx.x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = orch.compile(text, cache_dir="")
    assert data[:8] == b"ORCHPIPE"
    ws = [w for w in caught if issubclass(w.category, orch.CompileWarning)]
    if ws:  # NVRTC warns about the unused variable
        assert "warning" in str(ws[0].message)


# ---- load and describe ----------------------------------------------------------------------


def test_describe_saxpy(compiled):
    p = orch.load(compiled("saxpy"))
    assert list(p.params) == ["n", "a"]
    assert p.params["n"] == orch.ParamInfo("n", "u32", 1048576, p.params["n"].where)
    assert p.params["a"].type == "f32" and p.params["a"].default == 2.0
    assert p.params["n"].where.endswith("saxpy.orch:5:1")
    assert list(p.buffers) == ["x_host", "y_host", "x", "y"]
    x_host = p.buffers["x_host"]
    assert (x_host.type, x_host.count, x_host.host, x_host.scalar, x_host.element_size) == ("f32", "n", True, False, 4)
    assert x_host.declaration == "f32[n] host"
    assert not p.buffers["x"].host
    assert p.comms == {}
    assert list(p.graphs) == ["main"]
    assert p.device is None and p.image is None  # nothing loaded on a device yet
    assert "saxpy" in repr(p)


def test_describe_every_kind_of_declaration(compiled):
    moe = orch.load(compiled("moe"))
    assert moe.buffers["x"].count == "tokens * hidden"
    assert moe.buffers["counts"].count == "8"
    assert moe.graphs["experts"].device and moe.graphs["experts"].family_size == 8
    assert moe.graphs["finish"].device and not moe.graphs["finish"].segment
    dp = orch.load(compiled("dp_step"))
    assert list(dp.comms) == ["world"]
    assert dp.params["n"].default == 1 << 22
    jacobi = orch.load(compiled("jacobi"))
    assert jacobi.buffers["residual"].scalar and jacobi.buffers["residual"].count == "1"
    assert jacobi.buffers["residual"].declaration == "f32"
    assert jacobi.params["tol"].default == pytest.approx(1e-6)
    types = orch.load(orch.compile(TYPES_TEXT, cache_dir=""))
    assert types.params["n"].default is None
    assert [b.type for b in types.buffers.values()] == ["u8", "i16", "f16", "bf16", "f64", "bool", "i64", "u32", "f32"]
    assert types.buffers["g"].count == "2 * n"


def test_load_from_a_path(compiled, tmp_path):
    f = tmp_path / "saxpy.bin"
    f.write_bytes(compiled("saxpy"))
    assert orch.load(f).name == "saxpy"
    assert orch.load(str(f)).name == "saxpy"


def test_bad_artifacts_are_errors(compiled, tmp_path):
    good = compiled("saxpy")
    cases = {
        "empty": b"",
        "not a pipeline": b"hello world, not a pipeline at all" * 4,
        "truncated": good[: len(good) // 2],
        "one byte flipped": good[:100] + bytes([good[100] ^ 0xFF]) + good[101:],
        "wrong magic": b"XRCHPIPE" + good[8:],
        "future version": good[:8] + (999).to_bytes(4, "little") + good[12:],
    }
    for what, data in cases.items():
        with pytest.raises(orch.Error) as e:
            orch.load(data)
        assert e.value.code == orch.ErrorCode.InvalidArtifact, what
        assert e.value.message, what
    with pytest.raises(orch.Error) as e:
        orch.load(tmp_path / "missing.bin")
    assert e.value.code == orch.ErrorCode.Io and "missing.bin" in e.value.message
    with pytest.raises(orch.Error) as e:
        orch.load(tmp_path)  # a directory
    assert e.value.code == orch.ErrorCode.Io
    with pytest.raises(TypeError):
        orch.load(3.5)  # type: ignore[arg-type]


# ---- bindings checked without a GPU ---------------------------------------------------------


@pytest.fixture(scope="module")
def saxpy(compiled):
    return orch.load(compiled("saxpy"))


@pytest.fixture(scope="module")
def types_pipeline():
    return orch.load(orch.compile(TYPES_TEXT, cache_dir=""))


def _raises(code, fn, *args, **kw) -> orch.Error:
    with pytest.raises(orch.Error) as e:
        fn(*args, **kw)
    assert e.value.code == code, str(e.value)
    return e.value


def test_good_bindings_pass_the_cpu_checks(saxpy):
    n = 1000
    saxpy.check(params={"n": n, "a": 0.5}, buffers={"x": FakeCAI((n,)), "y": FakeDLPack((n,))})
    saxpy.check(params={"n": n}, buffers={"x": FakeCAI((10, 100)), "y": FakeDLPack((2, 500), versioned=False)})
    saxpy.check()  # everything unbound: defaults, allocated at instantiate


def test_param_errors(saxpy, types_pipeline):
    e = _raises(orch.ErrorCode.UnknownName, saxpy.check, params={"m": 1})
    assert "m" in e.message and "n, a" in e.message
    e = _raises(orch.ErrorCode.InvalidValue, saxpy.check, params={"n": -5})
    assert e.where.endswith("saxpy.orch:5:1") and "-5" in e.message
    _raises(orch.ErrorCode.InvalidValue, saxpy.check, params={"n": 1 << 40})
    _raises(orch.ErrorCode.InvalidValue, saxpy.check, params={"n": 2.5})
    _raises(orch.ErrorCode.InvalidValue, saxpy.check, params={"n": 1 << 70})
    _raises(orch.ErrorCode.InvalidValue, saxpy.check, params={"a": 1e39})
    with pytest.raises(TypeError):
        saxpy.check(params={"n": "4096"})
    saxpy.check(params={"n": True, "a": 3})  # bool and int convert exactly
    e = _raises(orch.ErrorCode.Unbound, types_pipeline.check)
    assert "'n'" in e.message or "`n`" in e.message
    types_pipeline.check(params={"n": 16})


def test_a_bind_check_names_the_statement(types_pipeline):
    e = _raises(orch.ErrorCode.BindCheckFailed, types_pipeline.check, params={"n": 16, "threads": 2048})
    assert re.search(r"<string>:\d+:\d+", e.where), e.where
    assert "E0201" in e.message or "1024" in e.message
    assert str(e).startswith(e.where + ": error: ")


def test_buffer_too_small_names_the_declaration(saxpy):
    e = _raises(orch.ErrorCode.BufferTooSmall, saxpy.check, params={"n": 100}, buffers={"x": FakeCAI((99,))})
    assert e.message.startswith("buffer 'x'") and "400" in e.message and "396" in e.message
    assert e.where.endswith("saxpy.orch:10:1")
    _raises(orch.ErrorCode.BufferTooSmall, saxpy.check, params={"n": 100}, buffers={"y": FakeDLPack((10, 9))})


def test_unknown_buffer_and_foreign_objects(saxpy):
    e = _raises(orch.ErrorCode.UnknownName, saxpy.check, buffers={"z": FakeCAI((4,))})
    assert "x_host, y_host, x, y" in e.message
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, buffers={"x": [1.0, 2.0]})
    assert "buffer 'x' (f32[n])" in e.message and "DLPack" in e.message
    assert e.where.endswith("saxpy.orch:10:1")


def test_element_types_are_checked(saxpy, types_pipeline):
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, buffers={"x": FakeCAI((1 << 20,), typestr="<f2")})
    assert "buffer 'x' (f32[n]) has f32 elements; it is given typestr '<f2'" in e.message
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, buffers={"x": FakeDLPack((1 << 20,), code=2, bits=64)})
    assert "f32 elements; it is given f64" in e.message
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, buffers={"x": FakeCAI((1 << 20,), typestr=">f4")})
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, buffers={"x": FakeDLPack((1 << 20,), code=0, bits=32)})
    n = 8
    good = {
        "a": FakeDLPack((n,), 1, 8),
        "b": FakeCAI((n,), "<i2"),
        "c": FakeDLPack((n,), 2, 16),
        "d": FakeDLPack((n,), 4, 16),
        "e": FakeCAI((n,), "<f8"),
        "f": FakeDLPack((n,), 6, 8),
        "g": FakeCAI((2 * n,), "<i8"),
        "flag": FakeCAI((), "<u4"),
        "staging": FakeDLPack((n,), 2, 32, device=(1, 0)),
    }
    types_pipeline.check(params={"n": n}, buffers=good)
    e = _raises(orch.ErrorCode.InvalidArgument, types_pipeline.check, params={"n": n}, buffers={"d": FakeCAI((n,), "<f2")})
    assert "bf16 has no typestr" in e.message
    _raises(orch.ErrorCode.InvalidArgument, types_pipeline.check, params={"n": n}, buffers={"f": FakeDLPack((n,), 1, 8)})
    _raises(orch.ErrorCode.BufferTooSmall, types_pipeline.check, params={"n": n}, buffers={"g": FakeCAI((2 * n - 1,), "<i8")})


def test_contiguity_is_checked(saxpy):
    n = 64
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeCAI((8, 8), strides=(4, 32))})
    assert "contiguous" in e.message and "(4, 32)" in e.message
    saxpy.check(params={"n": n}, buffers={"x": FakeCAI((8, 8), strides=(32, 4))})
    saxpy.check(params={"n": n}, buffers={"x": FakeCAI((1, 64), strides=(4, 4))})  # size-1 dims may have any stride
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeDLPack((8, 8), strides=(1, 8))})
    saxpy.check(params={"n": n}, buffers={"x": FakeDLPack((8, 8), strides=(8, 1))})
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeDLPack((64,), strides=(2,))})


def test_devices_and_interfaces_are_checked(saxpy):
    n = 16
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeDLPack((n,), device=(1, 0))})
    assert "on the CPU" in e.message and "CUDA device memory" in e.message
    saxpy.check(params={"n": n}, buffers={"x_host": FakeDLPack((n,), device=(1, 0))})  # pinned memory looks like CPU memory
    saxpy.check(params={"n": n}, buffers={"x": FakeDLPack((n,), device=(13, 0))})  # managed
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeDLPack((n,), device=(10, 0))})
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeCAI((n,), version=1)})
    _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeCAI((n,), mask=object())})
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeCAI((n,), stream=0)})
    assert "stream" in e.message


def test_dlpack_protocol_details(saxpy):
    n = 16
    new, old = FakeDLPack((n,)), FakeDLPack((n,), versioned=False)
    saxpy.check(params={"n": n}, buffers={"x": new, "y": old})
    assert new.calls[0][1] == (1, 0)  # asks for DLPack 1.x
    assert new.calls[0][0] == 1  # no stream given to check: the legacy default stream (1), never 0
    gc.collect()
    assert (new.deleted, old.deleted) == (1, 1)  # the capsules were given back to their producers

    # Host memory takes no stream (torch refuses one for its pinned CPU tensors), pinned
    # (kDLCUDAHost) or plain CPU alike.
    pinned, cpu = FakeDLPack((n,), device=(3, 0)), FakeDLPack((n,), device=(1, 0))
    saxpy.check(params={"n": n}, buffers={"x_host": pinned, "y_host": cpu})
    assert pinned.calls[0][0] is None and cpu.calls[0][0] is None

    class OldProducer(FakeDLPack):
        def __dlpack__(self, stream=None):  # no max_version: a producer from before DLPack 1.0
            return super().__dlpack__(stream=stream)

    saxpy.check(params={"n": n}, buffers={"x": OldProducer((n,))})

    class Broken(FakeDLPack):
        def __dlpack__(self, stream=None, max_version=None):
            return "not a capsule"

    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": Broken((n,))})
    assert "not a DLPack capsule" in e.message


def test_comms_are_bound_or_reported(compiled):
    dp = orch.load(compiled("dp_step"))
    e = _raises(orch.ErrorCode.Unbound, dp.check)
    assert "world" in e.message
    with pytest.raises(TypeError):
        dp.check(comms={"world": "nccl"})
    _raises(orch.ErrorCode.InvalidArgument, dp.check, comms={"world": orch.UniqueIdComm(b"short", 0, 1)})
    dp.check(comms={"world": orch.UniqueIdComm(bytes(128), 0, 1)})
    _raises(orch.ErrorCode.InvalidValue, dp.check, comms={"world": orch.UniqueIdComm(bytes(128), 3, 2)})


def test_instantiate_without_a_gpu_says_so_after_the_cpu_checks(saxpy):
    # The CPU checks come first, so a binding mistake is reported on any machine...
    _raises(orch.ErrorCode.BufferTooSmall, saxpy.instantiate, params={"n": 100}, buffers={"x": FakeCAI((10,))}, stream=0)
    try:
        saxpy.load_kernels()
    except orch.Error as e:  # ...and the missing device after them
        assert e.code == orch.ErrorCode.NoDevice
        _raises(orch.ErrorCode.NoDevice, saxpy.instantiate, params={"n": 100}, stream=0)
    else:
        pytest.skip("a GPU is present: the GPU suite covers instantiate")


# ---- DLPack export (host memory needs no GPU) -----------------------------------------------


def _host_buffer(values, type_name="f32"):
    import numpy as np

    array = np.ascontiguousarray(values, dtype={"f32": np.float32, "i32": np.int32, "bool": np.bool_}[type_name])
    info = BufferInfo("h", type_name, "n", False, True, array.itemsize, "t.orch:1:1")
    handle = _ExecHandle(None, {"h": (array,)})  # no executable: nothing to destroy
    return Buffer(info, array.ctypes.data, array.nbytes, 0, handle), array


def test_buffers_export_dlpack_zero_copy():
    np = pytest.importorskip("numpy")
    base = _memory.live_exports()
    buf, array = _host_buffer([1.5, 2.5, -3.0])
    assert buf.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(buf)
    assert view.dtype == np.float32 and view.tolist() == [1.5, 2.5, -3.0]
    array[1] = 7.0
    assert view[1] == 7.0  # the same memory
    assert _memory.live_exports() == base + 1
    del view
    gc.collect()
    assert _memory.live_exports() == base
    legacy = buf.__dlpack__(max_version=None)  # an old consumer: a "dltensor" capsule
    assert _memory._api.PyCapsule_IsValid(legacy, b"dltensor")
    del legacy  # never consumed: the capsule's destructor releases it
    gc.collect()
    assert _memory.live_exports() == base
    assert np.asarray(buf).tolist() == [1.5, 7.0, -3.0]  # __array_interface__ of a host buffer
    with pytest.raises(BufferError):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(2, 0))


def test_exported_bool_and_int_buffers():
    np = pytest.importorskip("numpy")
    buf, _ = _host_buffer([True, False, True], "bool")
    assert np.from_dlpack(buf).tolist() == [True, False, True]
    buf, _ = _host_buffer([1, -2], "i32")
    assert buf.__cuda_array_interface__["typestr"] == "<i4"
    assert buf.__cuda_array_interface__["stream"] is None
    assert len(buf) == 2 and buf.shape == (2,)


def test_the_executable_lives_while_an_exported_tensor_does():
    np = pytest.importorskip("numpy")
    buf, _ = _host_buffer([1.0, 2.0])
    import weakref

    handle = weakref.ref(buf._handle)
    view = np.from_dlpack(buf)
    del buf
    gc.collect()
    assert handle() is not None  # the tensor keeps the executable (its handle) alive
    del view
    gc.collect()
    assert handle() is None


# ---- streams --------------------------------------------------------------------------------


def test_streams():
    class TorchLike:
        cuda_stream = 0x1234

    class CupyLike:
        ptr = 0x5678

    class CudaCoreLike:
        def __cuda_stream__(self):
            return (0, 0x9ABC)

    assert orch.stream_handle(7) == 7
    assert orch.stream_handle(TorchLike()) == 0x1234
    assert orch.stream_handle(CupyLike()) == 0x5678
    assert orch.stream_handle(CudaCoreLike()) == 0x9ABC
    with pytest.raises(ValueError):
        orch.stream_handle(-1)
    with pytest.raises(TypeError):
        orch.stream_handle("stream")
    import sys

    if "torch" not in sys.modules:
        assert orch.stream_handle(None) == 0  # the legacy default stream
