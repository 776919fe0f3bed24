"""orch from Python without a GPU: compile, check, load, describe, every binding error that can
be provoked before CUDA is involved (with objects that fake DLPack and the CUDA Array
Interface), bad artifacts, DLPack export on host memory, streams."""

from __future__ import annotations

import copy
import ctypes
import gc
import json
import pathlib
import pickle
import re
import subprocess
import warnings
import weakref

import pytest

import orch
from orch import _memory
from orch._pipeline import Buffer, BufferInfo, _ExecHandle

from conftest import ERRORS, EXAMPLE_NAMES, EXAMPLES, NVSHMEM_EXAMPLES

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

    def __init__(self, shape, typestr="<f4", strides=None, version=3, stream=None, mask=None, ptr=FAKE_PTR, readonly=False):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, readonly),
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

    def __init__(self, shape, code=2, bits=32, device=(2, 0), strides=None, versioned=True, ptr=FAKE_PTR, read_only=False, byte_offset=0):
        self.shape = tuple(shape)
        self.code, self.bits = code, bits
        self.device = device
        self.strides = strides
        self.versioned = versioned
        self.ptr = ptr
        self.read_only = read_only  # DLPack 1.0's DLPACK_FLAG_BITMASK_READ_ONLY (versioned capsules only)
        self.byte_offset = byte_offset
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
            m.flags = _memory.DLPACK_FLAG_BITMASK_READ_ONLY if self.read_only else 0
        t = m.dl_tensor
        t.data = self.ptr
        t.byte_offset = self.byte_offset
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
    if name in NVSHMEM_EXAMPLES:
        assert orch.check(EXAMPLES / f"{name}.orch") == []
        pytest.skip("uses NVSHMEM: checked here; compiled and run by the multi-GPU suite (docs/multi-gpu.md)")
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


def _countdown_profile(tmp_path, name, blocks, pipeline="countdown"):
    """A profile as orch-run --profile writes it: the loop body's kernel (`step`, line 11) ran
    `blocks` blocks of 1024 threads."""
    node = {"file": "countdown.orch", "line": 11, "column": 5, "kernel": "step", "launches": 100,
            "median_ns": 2000, "min_ns": 2000, "grid": [blocks, 1, 1], "block": [1024, 1, 1], "registers": 16,
            "static_shared_bytes": 0, "dynamic_shared_bytes": 0}
    doc = {"format": "orch-profile", "version": 1,
           "device": {"name": "NVIDIA H200", "sms": 132, "compute_capability": 90},
           "pipeline": {"name": pipeline}, "nodes": [node]}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_compile_option_profile(tmp_path, cache_dir):
    # As orchc --profile: a loop body whose launch ran in more than 4 waves (blocks of 1024
    # threads: 2 fit an SM, 264 the H200's 132 at once; 4 x 264 + 1 is a fifth wave) is not
    # unrolled, one that ran in 4 is; another pipeline's profile is ignored with W0006.
    def compiled(profile):
        return orch.load(orch.compile(COUNTDOWN_TEXT, path="countdown.orch", cache_dir=cache_dir, profile=profile))

    assert "orch.guard.0" not in compiled(_countdown_profile(tmp_path, "waves.json", 4 * 264 + 1)).buffers
    assert "orch.guard.0" in compiled(_countdown_profile(tmp_path, "wave.json", 4 * 264)).buffers
    with pytest.warns(orch.CompileWarning, match="W0006"):
        other = compiled(_countdown_profile(tmp_path, "other.json", 4 * 264 + 1, pipeline="other"))
    assert "orch.guard.0" in other.buffers
    with pytest.raises(orch.CompileError) as missing:
        compiled(tmp_path / "missing.json")
    assert [d.code for d in missing.value.diagnostics] == ["E0004"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "orch-profile", "version": 1,,}')
    with pytest.raises(orch.CompileError) as invalid:
        compiled(bad)
    assert [d.code for d in invalid.value.diagnostics] == ["E0006"]
    with pytest.raises(TypeError):
        orch.compile(COUNTDOWN_TEXT, profile=3)  # type: ignore[arg-type]


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
    with pytest.raises(TypeError):
        orch.compile(COUNTDOWN_TEXT, memory_plan=0)  # type: ignore[arg-type]


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


# ---- the Python boundary: what crosses into C is checked, never truncated or wrapped --------


def _fake_executable(pipeline):
    """An Executable around no native executable: a call that reaches C fails there ("`exec` is
    NULL", an orch.Error), so an error of another kind shows that Python refused it first."""
    return orch.Executable(pipeline, _ExecHandle(None, {}), 0)


def test_a_nul_in_a_name_is_refused_never_truncated(saxpy, compiled):
    exe = _fake_executable(saxpy)
    with pytest.raises(ValueError, match="`name` contains a NUL character"):
        exe.set_param("a\x00junk", 5)  # c_char_p would cut it at the NUL and set `a`
    for call in (lambda: exe.rebind("x\x00", FakeCAI((4,))), lambda: exe.buffer("x\x00y"), lambda: exe.comm("world\x00")):
        with pytest.raises(ValueError, match="`name` contains a NUL character"):
            call()
    with pytest.raises(ValueError, match="a key of `params` contains a NUL character"):
        saxpy.check(params={"a\x00junk": 5})
    with pytest.raises(ValueError, match="a key of `buffers` contains a NUL character"):
        saxpy.check(buffers={"x\x00": FakeCAI((4,))})
    with pytest.raises(ValueError, match="a name in `allow_overlap` contains a NUL character"):
        saxpy.check(allow_overlap=[("x", "y\x00junk")])
    dp = orch.load(compiled("dp_step"))
    with pytest.raises(ValueError, match="a key of `comms` contains a NUL character"):
        dp.check(comms={"world\x00": orch.UniqueIdComm(bytes(128), 0, 1)})
    with pytest.raises(ValueError, match="NUL character"):
        orch.load("saxpy.bin\x00junk")
    with pytest.raises(ValueError, match="`path` contains a NUL character"):
        orch.compile(SAXPY_TEXT, path="p.orch\x00junk", cache_dir="")


def test_names_that_are_not_str_are_type_errors(saxpy):
    exe = _fake_executable(saxpy)
    calls = [
        lambda: exe.set_param(1.5, 1),
        lambda: exe.buffer(3),
        lambda: exe.rebind(b"x", FakeCAI((4,))),
        lambda: exe.comm(None),
        lambda: saxpy.check(params={1.5: 1}),
        lambda: saxpy.check(buffers={3: FakeCAI((4,))}),
        lambda: saxpy.check(allow_overlap=[("x", 2)]),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="is a name \\(str\\)"):
            call()


def test_integers_are_range_checked_never_wrapped(saxpy, compiled):
    n = 16
    # Sizes that do not fit size_t: ctypes would wrap 2**64 bytes to 0.
    for shape in [(1 << 62,), (1 << 64,), (1 << 80,), (1 << 40, 1 << 40)]:
        with pytest.raises(OverflowError, match="buffer 'x' \\(f32\\[n\\]\\).*size_t"):
            saxpy.check(params={"n": n}, buffers={"x": FakeCAI(shape)})
    for shape in [(1 << 62,), (1 << 40, 1 << 40)]:
        with pytest.raises(OverflowError, match="buffer 'y'"):
            saxpy.check(params={"n": n}, buffers={"y": FakeDLPack(shape)})
    # Addresses outside [0, 2**64), from the interface or data + byte_offset.
    for ptr in (1 << 64, -4):
        with pytest.raises(OverflowError, match="buffer 'x'.*address"):
            saxpy.check(params={"n": n}, buffers={"x": FakeCAI((n,), ptr=ptr)})
    with pytest.raises(OverflowError, match="buffer 'y'.*byte_offset"):
        saxpy.check(params={"n": n}, buffers={"y": FakeDLPack((n,), ptr=(1 << 64) - 64, byte_offset=128)})
    for stream in (1 << 64, -2):
        with pytest.raises(OverflowError, match="buffer 'x'.*stream"):
            saxpy.check(params={"n": n}, buffers={"x": FakeCAI((n,), stream=stream)})
    # Stream handles: 2**64 would be the legacy default stream (0) after ctypes.
    with pytest.raises(OverflowError, match="`stream`"):
        orch.stream_handle(1 << 64)
    with pytest.raises(ValueError):  # an OverflowError that is a ValueError too, as before for negatives
        orch.stream_handle(-1)

    class TorchLike:
        cuda_stream = 1 << 64

    class CudaCoreLike:
        def __cuda_stream__(self):
            return (0, -1)

    for stream in (TorchLike(), CudaCoreLike()):
        with pytest.raises(OverflowError):
            orch.stream_handle(stream)
    with pytest.raises(OverflowError, match="`stream`"):
        _fake_executable(saxpy).launch(1 << 64)
    with pytest.raises(OverflowError, match="`stream`"):
        saxpy.instantiate(params={"n": n}, stream=1 << 64)
    # Communicators, ranks and world sizes (int32).
    dp = orch.load(compiled("dp_step"))
    for comm, what in [
        ((1 << 64, 0, 1), "ncclComm_t"),
        (-1, "ncclComm_t"),
        ((0x1000, 1 << 31, 2), "rank"),
        ((0x1000, 0, -(1 << 31) - 1), "world size"),
        (orch.UniqueIdComm(bytes(128), 0, 1 << 32), "world size"),
        (orch.UniqueIdComm(bytes(128), -(1 << 40), 1), "rank"),
    ]:
        with pytest.raises(OverflowError, match=f"comm 'world': the {what}"):
            dp.check(comms={"world": comm})
    # orchc's jobs is an unsigned int.
    with pytest.raises(OverflowError, match="`jobs`"):
        orch.compile(SAXPY_TEXT, jobs=1 << 32, cache_dir="")


def test_written_buffers_follow_the_runtimes_rule(saxpy, compiled):
    # saxpy copies x_host -> x and y_host -> y, runs saxpy(x: in, y: inout), copies y -> y_host.
    assert saxpy.written_buffers == {"y_host", "x", "y"}
    assert orch.load(orch.compile(SAXPY_TEXT, cache_dir="")).written_buffers == {"y"}
    moe = orch.load(compiled("moe"))
    assert {"x", "expert_of"}.isdisjoint(moe.written_buffers) and "y" in moe.written_buffers
    assert orch.load(compiled("countdown")).written_buffers == {"counter", "trace"}  # fills and kernels
    dp = orch.load(compiled("dp_step"))
    assert "g" in dp.written_buffers and "data" not in dp.written_buffers  # the all-reduce writes g
    # The runtime's describe says it per buffer, in the pipeline's order.
    assert [b["written"] for b in saxpy._doc["buffers"]] == [False, True, True, True]


def test_read_only_memory_is_refused_for_a_buffer_the_pipeline_writes(saxpy):
    n = 16
    for obj in (FakeCAI((n,), readonly=True), FakeDLPack((n,), read_only=True)):
        e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"y": obj})
        assert e.message.startswith("buffer 'y' (f32[n]) is written by the pipeline, and it is given read-only memory"), e.message
        assert e.where.endswith("saxpy.orch:11:1")
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"y_host": FakeDLPack((n,), device=(1, 0), read_only=True)})
    assert "buffer 'y_host'" in e.message and "DLPack's read-only flag" in e.message
    # Read-only memory for a buffer the pipeline only reads is fine.
    saxpy.check(params={"n": n}, buffers={"x_host": FakeDLPack((n,), device=(1, 0), read_only=True)})
    text = orch.load(orch.compile(SAXPY_TEXT, cache_dir=""))
    text.check(params={"n": n}, buffers={"x": FakeCAI((n,), readonly=True), "y": FakeDLPack((n,))})
    # A legacy capsule has no flag: nothing to refuse.
    saxpy.check(params={"n": n}, buffers={"y": FakeDLPack((n,), read_only=True, versioned=False)})
    # numpy marks a read-only array's DLPack 1.0 capsule so.
    np = pytest.importorskip("numpy")
    frozen = np.zeros(n, dtype=np.float32)
    frozen.flags.writeable = False
    saxpy.check(params={"n": n}, buffers={"x_host": frozen})
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"y_host": frozen})
    assert "numpy.ndarray" in e.message


def test_misaligned_memory_is_refused_at_bind(saxpy, types_pipeline):
    n = 16
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"x": FakeCAI((n,), ptr=FAKE_PTR + 2)})
    assert e.message.startswith(f"buffer 'x' (f32[n]) is given memory at {FAKE_PTR + 2:#x}, which is not aligned"), e.message
    assert "multiple of 4 bytes" in e.message and e.where.endswith("saxpy.orch:10:1")
    e = _raises(orch.ErrorCode.InvalidArgument, saxpy.check, params={"n": n}, buffers={"y": FakeDLPack((n,), byte_offset=2)})
    assert f"{FAKE_PTR + 2:#x}" in e.message  # the byte offset counts
    saxpy.check(params={"n": n}, buffers={"y": FakeDLPack((n,), byte_offset=64)})
    types_pipeline.check(params={"n": n}, buffers={"a": FakeDLPack((n,), 1, 8, ptr=FAKE_PTR + 1)})  # u8: any address
    e = _raises(orch.ErrorCode.InvalidArgument, types_pipeline.check, params={"n": n}, buffers={"g": FakeCAI((2 * n,), "<i8", ptr=FAKE_PTR + 4)})
    assert "multiple of 8 bytes" in e.message


def test_copies_of_a_pipeline_are_independent(compiled):
    p = orch.load(compiled("saxpy"))
    for make in (copy.copy, copy.deepcopy, lambda q: pickle.loads(pickle.dumps(q))):
        c = make(p)
        assert c is not p and c._artifact != p._artifact  # its own native handle
        assert c.artifact == p.artifact and c.buffers == p.buffers and c.params == p.params
        c.check(params={"n": 16})
        del c
        gc.collect()
        p.check(params={"n": 16})  # was: "`artifact` is not a live orch_artifact"
    a, b = copy.deepcopy([p, p])
    assert a is b and a is not p


def test_an_executable_cannot_be_copied_or_pickled(saxpy):
    exe = _fake_executable(saxpy)
    for make in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="orch.Executable cannot be copied or pickled"):
            make(exe)
        with pytest.raises(TypeError, match="cannot be copied or pickled"):
            make(exe._handle)  # the owner of the orch_executable*
    pytest.importorskip("numpy")
    buf, _ = _host_buffer([1.0, 2.0])
    view = copy.copy(buf)  # another view, sharing the executable
    assert view is not buf and view.ptr == buf.ptr and view._handle is buf._handle
    for make in (copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be deep-copied or pickled"):
            make(buf)


def test_errors_survive_pickle(saxpy):
    errors = [
        _raises(orch.ErrorCode.BufferTooSmall, saxpy.check, params={"n": 100}, buffers={"x": FakeCAI((99,))}),
        orch.Error(orch.ErrorCode.Cuda, "cudaGraphLaunch failed", "", 700),
    ]
    with pytest.raises(orch.Error) as e:
        saxpy.check(buffers={"x": [1.0]})
    errors.append(e.value)
    for err in errors:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err)
        assert (back.code, back.message, back.where, back.cuda_error) == (err.code, err.message, err.where, err.cuda_error)
        assert str(back) == str(err) and back.args == err.args and repr(back) == repr(err)
    assert isinstance(pickle.loads(pickle.dumps(errors[-1])), TypeError)
    path = sorted(ERRORS.glob("*.orch"))[0]
    with pytest.raises(orch.CompileError) as c:
        orch.compile(path)
    back = pickle.loads(pickle.dumps(c.value))
    assert type(back) is orch.CompileError and str(back) == str(c.value) and back.args == c.value.args
    assert back.diagnostics == c.value.diagnostics and back.diagnostics


def test_wrong_python_types_are_type_errors(saxpy, compiled):
    n = 16
    exe = _fake_executable(saxpy)
    dp = orch.load(compiled("dp_step"))
    calls = [
        lambda: saxpy.check(params=[("n", n)]),
        lambda: saxpy.check(buffers=[FakeCAI((n,))]),
        lambda: dp.check(comms=["world"]),
        lambda: saxpy.check(buffers={"x": object()}),
        lambda: saxpy.check(buffers={"x": FakeCAI((n, 2.0))}),  # int(2.0) would quietly be 2
        lambda: exe.rebind("x", [1.0] * n),
        lambda: dp.check(comms={"world": orch.UniqueIdComm("x" * 128, 0, 1)}),  # type: ignore[arg-type]
        lambda: dp.check(comms={"world": (0x1000, 0.0, 1)}),
        lambda: orch.compile(SAXPY_TEXT, jobs="4", cache_dir=""),  # type: ignore[arg-type]
        lambda: orch.compile(SAXPY_TEXT, arch=[90], cache_dir=""),  # type: ignore[list-item]
        lambda: orch.Pipeline(5),  # type: ignore[arg-type]
        lambda: orch.stream_handle(1.0),
        lambda: orch.stream_handle(True),
    ]
    for call in calls:
        with pytest.raises(TypeError):
            call()
    # A buffer given the wrong kind of object stays an orch.Error naming the buffer, and is a TypeError.
    with pytest.raises(TypeError) as e:
        saxpy.check(buffers={"x": [1.0] * n})
    assert isinstance(e.value, orch.Error) and e.value.code == orch.ErrorCode.InvalidArgument
    assert "buffer 'x' (f32[n])" in e.value.message and e.value.where.endswith("saxpy.orch:10:1")
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match="param 'n'"):
        saxpy.check(params={"n": np.arange(3)})


def test_allow_overlap_takes_pairs_of_known_buffer_names(saxpy):
    for bad in ("xy", ["xy"], [("x",)], [("x", "y", "x_host")], 5, [None]):
        with pytest.raises(TypeError, match="allow_overlap takes pairs of buffer names"):
            saxpy.check(allow_overlap=bad)
    # The runtime's own error (it checks these at instantiate, with the memory).
    e = _raises(orch.ErrorCode.UnknownName, saxpy.check, allow_overlap=[("x", "nope")])
    assert e.message == "allow_overlap(\"x\", \"nope\"): pipeline 'saxpy' has no buffer 'nope'"
    saxpy.check(allow_overlap=[("x", "y"), ["x_host", "y_host"]])


class FakeStorage:
    pass


class FakeTensor(FakeDLPack):
    """torch-like: DLPack, untyped_storage(), and set_() that points it at other storage (torch
    then frees the old storage unless something else holds it)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.storage = FakeStorage()

    def untyped_storage(self):
        return self.storage

    def set_(self, storage):
        self.storage = storage


def test_a_binding_keeps_a_tensors_storage_alive():
    t = FakeTensor((16,))
    old = weakref.ref(t.untyped_storage())
    m = _memory.import_memory(t, "buffer 'y' (f32[n])", "", _memory.ELEMENT_TYPES["f32"], False, None)
    t.set_(FakeStorage())
    gc.collect()
    assert old() is not None and any(k is old() for k in m.keep)  # held by the binding, not only the tensor
    del m
    gc.collect()
    assert old() is None


def test_a_binding_keeps_a_torch_tensors_storage_alive():
    torch = pytest.importorskip("torch", reason="torch is not installed (the fake-tensor test covers the logic)")
    t = torch.arange(16, dtype=torch.float32)  # CPU memory: a host buffer's, checked without a GPU
    m = _memory.import_memory(t, "buffer 'h' (f32[n] host)", "", _memory.ELEMENT_TYPES["f32"], True, None)
    (storage,) = [k for k in m.keep if isinstance(k, torch.UntypedStorage)]
    assert storage.data_ptr() == m.ptr
    t.set_(torch.empty(0))
    gc.collect()
    assert storage.data_ptr() == m.ptr and storage.nbytes() == 64


# ---- a fuzzer of the boundary (issue 21) ------------------------------------------------------

_FUZZ_NAMES = ["n", "a", "x", "y", "", "a\x00b", "x\x00", "\udcff", "é", "n" * 300, "x y", "\n", "%s"]
_FUZZ_INTS = [0, 1, -1, 7, 1 << 31, -(1 << 31) - 1, (1 << 32), (1 << 63), (1 << 64) - 1, 1 << 64, -(1 << 64), 1 << 80]


def _fuzz_value(rng):
    pick = rng.randrange(8)
    if pick == 0:
        return rng.choice(_FUZZ_INTS)
    if pick == 1:
        return rng.choice([0.5, -0.0, float("inf"), float("nan"), 1e300])
    if pick == 2:
        return rng.choice(_FUZZ_NAMES)
    if pick == 3:
        return FakeCAI((rng.choice([0, 1, 16, 1 << 20]),), ptr=rng.choice([FAKE_PTR, FAKE_PTR + 2, 0, (1 << 64) - 4]),
                       readonly=rng.random() < 0.3, stream=rng.choice([None, 2, (1 << 64) + 2]))
    if pick == 4:
        return FakeDLPack((rng.choice([0, 4, 1 << 20]),), ptr=rng.choice([FAKE_PTR, FAKE_PTR + 1]),
                          read_only=rng.random() < 0.3, byte_offset=rng.choice([0, 2, 1 << 66]))
    if pick == 5:
        return [rng.choice(_FUZZ_INTS)]
    if pick == 6:
        return None
    return object()


def test_fuzz_the_python_boundary_never_crashes_and_refuses_with_python_errors(saxpy):
    """Random names (NULs, surrogates, empty, long), integers around every C type's range, floats and
    memory objects (misaligned, read-only, huge offsets, bad streams) through check() and the
    binding helpers: every refusal is an orch.Error, TypeError, ValueError or OverflowError, never
    another exception, a crash or a silent wrap. Seeded, 2000 calls."""
    import random

    rng = random.Random(20261128)
    allowed = (orch.Error, TypeError, ValueError, OverflowError)
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(2000):
        params = {rng.choice(_FUZZ_NAMES + [1, None]): _fuzz_value(rng) for _ in range(rng.randrange(3))}
        buffers = {rng.choice(_FUZZ_NAMES + [3]): _fuzz_value(rng) for _ in range(rng.randrange(3))}
        overlap = rng.choice([(), [("x", "y")], "xy", [("x",)], [("x", "a\x00")], 5])
        try:
            saxpy.check(params=params, buffers=buffers, allow_overlap=overlap)
            outcomes["ok"] += 1
        except allowed:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 1000 and outcomes["ok"] >= 0
