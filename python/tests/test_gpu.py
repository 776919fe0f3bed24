"""orch from Python on a GPU (skipped, with the reason, where there is none): every example
run on torch tensors against a CPU reference (numpy) and against the C++ runtime (orch-run with
the same inputs, --dump), a pipeline interleaved with torch ops on one stream, CuPy arrays,
runtime-allocated buffers through torch.from_dlpack, set_param / rebind, and what torch's own
graphs allow. Run by scripts/gpu-check; ORCH_RUN names the orch-run binary (the C++ runtime
comparison is skipped, visibly, without it)."""

from __future__ import annotations

import gc
import os
import pathlib
import shutil
import subprocess
import weakref

import pytest

import orch

from conftest import EXAMPLES, ROOT

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("gpu")

RNG = np.random.default_rng()


@pytest.fixture(scope="module", autouse=True)
def torch_cuda(gpu):
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    torch.cuda.init()


def pinned(values, dtype=torch.float32):
    t = torch.empty(len(values), dtype=dtype, pin_memory=True)
    t.copy_(torch.as_tensor(np.asarray(values)))
    return t


def cuda(values, dtype=None):
    return torch.as_tensor(np.asarray(values), dtype=dtype).cuda()


def u32(values):
    """A CUDA tensor of torch.uint32 (made through int32 and a view: same bits)."""
    return torch.as_tensor(np.asarray(values, dtype=np.uint32).view(np.int32)).cuda().view(torch.uint32)


def to_numpy(t):
    if t.dtype == torch.uint32:
        return t.view(torch.int32).cpu().numpy().view(np.uint32)
    return t.cpu().numpy()


def read(exe, name):
    """A buffer's contents, through torch.from_dlpack (zero-copy) and a copy to the host."""
    return to_numpy(torch.from_dlpack(exe.buffer(name)))


def close(got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = ~((np.abs(got - want) <= tol * np.maximum(1.0, np.abs(want))) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), f"{what}: {bad.sum()} of {got.size} differ; first at {np.argmax(bad)}: got {got[bad][0]}, want {want[bad][0]}"


# ---- the C++ runtime, for comparison ----------------------------------------------------------


def orch_run_binary():
    for c in (os.environ.get("ORCH_RUN"), str(ROOT / "build" / "tools" / "orch-run"), shutil.which("orch-run")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def run_cpp(tmp_path, artifact, params, fills, dumps):
    """One launch of the pipeline by orch-run (the C++ runtime) with the same params and inputs;
    returns the dumped buffers as numpy arrays of their element types."""
    exe = orch_run_binary()
    if exe is None:
        pytest.skip("no orch-run binary (set ORCH_RUN): the comparison with the C++ runtime needs it")
    p = orch.load(artifact)
    binary = tmp_path / "p.bin"
    binary.write_bytes(artifact)
    cmd = [exe, str(binary), "--warmup", "0", "--repeat", "1"]
    for k, v in params.items():
        cmd += ["--param", f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}"]
    for name, array in fills.items():
        f = tmp_path / f"fill_{name}.bin"
        f.write_bytes(np.ascontiguousarray(array).tobytes())
        cmd += ["--fill", f"{name}=file:{f}"]
    for name in dumps:
        cmd += ["--dump", f"{name}={tmp_path / f'dump_{name}.bin'}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    types = {"u8": np.uint8, "u32": np.uint32, "i32": np.int32, "f32": np.float32, "f64": np.float64, "i64": np.int64}
    return {name: np.fromfile(tmp_path / f"dump_{name}.bin", dtype=types[p.buffers[name].type]) for name in dumps}


def same(got, want, what):
    assert np.array_equal(np.asarray(got), np.asarray(want), equal_nan=True), f"{what}: Python and the C++ runtime differ"


# ---- every example -------------------------------------------------------------------


def test_saxpy(compiled, tmp_path):
    p = orch.load(compiled("saxpy"))
    n = 10007
    xs = RNG.uniform(-1, 1, n).astype(np.float32)
    ys = RNG.uniform(-1, 1, n).astype(np.float32)
    x_host, y_host = pinned(xs), pinned(ys)
    x, y = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    stream = torch.cuda.Stream()
    exe = p.instantiate(params={"n": n, "a": 3.0}, buffers={"x_host": x_host, "y_host": y_host, "x": x, "y": y}, stream=stream)
    assert p.device == torch.cuda.current_device() and "sm_" in p.image
    exe.launch(stream)
    stream.synchronize()
    want = np.float32(3.0) * xs + ys
    close(y_host.numpy(), want, 1e-6, "y = 3x + y in the bound pinned tensor")
    close(to_numpy(y), want, 1e-6, "y on the device, in the bound tensor")
    same(y_host.numpy(), run_cpp(tmp_path, p.artifact, {"n": n, "a": 3.0}, {"x_host": xs, "y_host": ys}, ["y_host"])["y_host"], "saxpy")

    y_host.copy_(torch.from_numpy(ys))
    exe.set_param("a", -0.5)
    exe.launch(stream)
    stream.synchronize()
    close(y_host.numpy(), np.float32(-0.5) * xs + ys, 1e-6, "after set_param a = -0.5")
    assert exe.stats.nodes_patched_in_place == 1 and exe.stats.graph_updates == 0

    # rebind x_host to another pinned tensor
    x2 = RNG.uniform(5, 6, n).astype(np.float32)
    other = pinned(x2)
    y_host.copy_(torch.from_numpy(ys))
    exe.rebind("x_host", other, stream=stream)
    exe.launch(stream)
    stream.synchronize()
    close(y_host.numpy(), np.float32(-0.5) * x2 + ys, 1e-6, "after rebind x_host")
    assert exe.device_status() is None


def test_jacobi(compiled, tmp_path):
    p = orch.load(compiled("jacobi"))
    n, tol = 16, 1e-6
    u0 = RNG.uniform(0, 1, n).astype(np.float32)
    rhs = RNG.uniform(0, 1e-3, n).astype(np.float32)
    u_host, rhs_host = pinned(u0), pinned(rhs)
    params = {"n": n, "tol": tol, "max_iters": 100000}
    exe = p.instantiate(params=params, buffers={"u_host": u_host, "rhs_host": rhs_host})
    exe.launch()
    torch.cuda.synchronize()
    iters = int(read(exe, "iters")[0])
    assert iters % 2 == 0 and 2 < iters < 100000

    u, v = u0.copy(), np.zeros(n, np.float32)
    half = np.float32(0.5)

    def sweep(src, dst):
        left = np.concatenate(([np.float32(0)], src[:-1]))
        right = np.concatenate((src[1:], [np.float32(0)]))
        dst[:] = half * (rhs + left + right)
        return np.max(np.abs(dst - src))

    last = 0.0
    for _ in range(iters // 2):
        last = max(sweep(u, v), sweep(v, u))
    assert last <= tol * 1.01
    close(u_host.numpy(), u, 1e-5, "GPU vs the same sweeps on the CPU")
    assert abs(float(read(exe, "residual")[0]) - float(last)) <= 1e-6
    cpp = run_cpp(tmp_path, p.artifact, params, {"u_host": u0, "rhs_host": rhs}, ["u_host", "iters", "residual"])
    same(u_host.numpy(), cpp["u_host"], "u")
    same(read(exe, "iters"), cpp["iters"], "iters")
    same(read(exe, "residual"), cpp["residual"], "residual")

    exe.set_param("tol", 1e-3)  # read by the condition kernels on the GPU
    u_host.copy_(torch.from_numpy(u0))
    exe.launch()
    torch.cuda.synchronize()
    assert int(read(exe, "iters")[0]) < iters


def test_branch(compiled, tmp_path):
    p = orch.load(compiled("branch"))
    n, lr = 1000, np.float32(0.01)
    w, g = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    mode_bits = torch.zeros(1, dtype=torch.int32, device="cuda")  # written as i32, bound as u32
    mode = mode_bits.view(torch.uint32)
    exe = p.instantiate(params={"n": n}, buffers={"w": w, "g": g, "mode": mode})
    for nan, m in ((False, 0), (False, 1), (False, 7), (True, 0), (True, 1), (True, 2)):
        ws = RNG.uniform(-1, 1, n).astype(np.float32)
        gs = RNG.uniform(-1, 1, n).astype(np.float32)
        if nan:
            gs[n // 3] = np.nan
        w.copy_(torch.from_numpy(ws))
        g.copy_(torch.from_numpy(gs))
        mode_bits.fill_(m)
        exe.launch()  # torch's current stream: ordered after the copies
        torch.cuda.synchronize()
        wi = ws if nan else ws - lr * gs
        want_w = wi * np.float32(0.5) if m == 0 else wi * np.float32(2.0) if m == 1 else np.zeros(n, np.float32)
        want_g = np.zeros(n, np.float32) if nan else gs
        assert int(read(exe, "overflow")[0]) == int(nan)
        close(to_numpy(g), want_g, 0, f"g (nan={nan}, mode={m})")
        close(to_numpy(w), want_w, 1e-6, f"w (nan={nan}, mode={m})")
        cpp = run_cpp(tmp_path, p.artifact, {"n": n}, {"w": ws, "g": gs, "mode": np.array([m], np.uint32)}, ["w", "g", "overflow"])
        same(to_numpy(w), cpp["w"], "w")
        same(to_numpy(g), cpp["g"], "g")
        same(read(exe, "overflow"), cpp["overflow"], "overflow")


def test_countdown(compiled, tmp_path):
    p = orch.load(compiled("countdown"))
    trace = torch.zeros(1024, dtype=torch.int32, device="cuda")
    exe = p.instantiate(buffers={"trace": trace})
    for launch in (1, 2):
        exe.launch()
        torch.cuda.synchronize()
        assert int(read(exe, "counter")[0]) == 0
        t = to_numpy(trace)
        assert (t[:1000] == launch).all() and (t[1000:] == 0).all()
    cpp = run_cpp(tmp_path, p.artifact, {}, {}, ["trace", "counter"])
    assert (cpp["trace"][:1000] == 1).all() and cpp["counter"][0] == 0


def test_moe(compiled, tmp_path):
    p = orch.load(compiled("moe"))
    tokens, hidden = 300, 64
    x = torch.empty(tokens * hidden, device="cuda")
    expert_of = torch.empty(tokens, dtype=torch.int32, device="cuda")
    exe = p.instantiate(params={"tokens": tokens, "hidden": hidden}, buffers={"x": x, "expert_of": expert_of})
    for experts in ([0, 1, 2, 3, 4, 5, 6, 7], [1, 4], [7]):
        xs = RNG.uniform(-1, 1, tokens * hidden).astype(np.float32)
        routing = RNG.choice(np.array(experts, np.int32), tokens)
        x.copy_(torch.from_numpy(xs))
        expert_of.copy_(torch.from_numpy(routing))
        exe.launch()
        torch.cuda.synchronize()
        gain = (np.float32(1) + np.float32(0.5) * routing.astype(np.float32)).repeat(hidden)
        close(read(exe, "out"), xs + gain * xs, 1e-6, f"out for experts {experts}")
        assert (read(exe, "counts") == np.bincount(routing, minlength=8)).all()
        cpp = run_cpp(tmp_path, p.artifact, {"tokens": tokens, "hidden": hidden}, {"x": xs, "expert_of": routing}, ["out", "counts"])
        same(read(exe, "out"), cpp["out"], "out")
        same(read(exe, "counts"), cpp["counts"], "counts")
    assert exe.device_status() is None


def test_scheduler(compiled, tmp_path):
    p = orch.load(compiled("scheduler"))
    items, batch = 200000, 16384
    work0 = RNG.uniform(0, 1, items).astype(np.float32)
    work = cuda(work0)
    exe = p.instantiate(params={"items": items, "batch": batch}, buffers={"work": work})
    exe.launch()
    torch.cuda.synchronize()
    assert int(read(exe, "round")[0]) == -(-items // batch)
    assert int(read(exe, "head")[0]) == items
    got = to_numpy(work)
    kmax = (np.arange(items, dtype=np.uint64) * 2654435761 % (1 << 32)) % 256
    plain = work0.copy()
    fused = work0.astype(np.float64)
    for k in range(256):
        m = k < kmax
        plain = np.where(m, plain * np.float32(0.999) + np.float32(1.0), plain).astype(np.float32)
        fused = np.where(m, (fused * np.float64(np.float32(0.999)) + 1.0).astype(np.float32).astype(np.float64), fused)
    tol = 1e-5 * np.maximum(1.0, np.abs(fused))
    assert ((np.abs(got - fused) <= tol) | (np.abs(got - plain) <= tol)).all()
    cpp = run_cpp(tmp_path, p.artifact, {"items": items, "batch": batch}, {"work": work0}, ["work", "round"])
    same(got, cpp["work"], "work")


def test_dp_step_with_nccl(compiled, tmp_path):
    p = orch.load(compiled("dp_step"))
    try:
        unique_id = orch.nccl_unique_id()
    except orch.Error as e:
        pytest.skip(f"NCCL cannot be loaded: {e}")
    n = 5003
    ws = RNG.uniform(-1, 1, n).astype(np.float32)
    data = RNG.uniform(-1, 1, n).astype(np.float32)
    w, d = cuda(ws), cuda(data)
    exe = p.instantiate(params={"n": n, "lr": 0.25}, buffers={"w": w, "data": d}, comms={"world": orch.UniqueIdComm(unique_id, 0, 1)})
    assert (exe.rank, exe.world_size) == (0, 1) and exe.comm("world") != 0
    exe.launch()
    torch.cuda.synchronize()
    want = ws - np.float32(0.25) * ((ws - data) * np.float32(1.0))
    close(to_numpy(w), want, 1e-6, "w after one step")
    cpp = run_cpp(tmp_path, p.artifact, {"n": n, "lr": 0.25}, {"w": ws, "data": data}, ["w"])
    same(to_numpy(w), cpp["w"], "w")
    exe.set_param("n", n - 1000)
    assert exe.stats.segments_rebuilt == 1


# ---- composition with torch, CuPy and DLPack ------------------------------------------------

AXPY = '''pipeline axpy
target sm_90
param n: u32
param a: f32 = 2.0
buffer x: f32[n]
buffer y: f32[n]
kernel axpy(n: u32, a: f32, x: in f32[], y: inout f32[]) source """
extern "C" __global__ void axpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
graph main {
  axpy<<<ceil_div(n, 256), 256>>>(n, a, x, y)
}
'''


@pytest.fixture(scope="module")
def axpy(cache_dir):
    return orch.load(orch.compile(AXPY, cache_dir=cache_dir))


def test_interleaved_with_torch_ops_on_one_stream(axpy):
    n = 1 << 22  # large enough that a missing dependency would show
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.empty(n, device="cuda")
        y = torch.empty(n, device="cuda")
        exe = axpy.instantiate(params={"n": n, "a": 3.0}, buffers={"x": x, "y": y})  # default: torch's current stream
        want = None
        for step in range(5):
            x.uniform_(-1, 1)
            y.uniform_(-1, 1)
            y0 = y.clone()
            exe.launch()  # y = 3x + y, ordered after the torch ops on `stream`
            z = y * 2 + 1  # torch reads what orch wrote
            exe.launch()  # y = 3x + y again
            y.sub_(x)
            want = ((3 * x + y0) * 2 + 1, 3 * x + (3 * x + y0) - x)
            got = (z, y)
            torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    stream.synchronize()


def test_runtime_buffers_through_torch_from_dlpack(axpy):
    n = 4096
    exe = axpy.instantiate(params={"n": n, "a": 0.5}, stream=0)
    x = torch.from_dlpack(exe.buffer("x"))
    y = torch.from_dlpack(exe.buffer("y"))
    assert x.device.type == "cuda" and x.dtype == torch.float32 and x.shape == (n,)
    assert x.data_ptr() == exe.buffer("x").ptr  # zero-copy
    assert (y == 0).all()  # runtime-allocated buffers start zeroed
    x.uniform_(-1, 1)
    y.fill_(1.0)
    torch.cuda.synchronize()
    exe.launch(0)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 0.5 * x + 1)
    # The tensors keep the executable alive after the Executable object is gone.
    handle = weakref.ref(exe._handle)
    del exe
    gc.collect()
    assert handle() is not None
    torch.testing.assert_close(y, 0.5 * x + 1)
    del x, y
    gc.collect()
    assert handle() is None


def test_cupy_arrays(axpy):
    cp = pytest.importorskip("cupy")
    n = 100003
    x = cp.random.uniform(-1, 1, n, dtype=cp.float32)
    y = cp.random.uniform(-1, 1, n, dtype=cp.float32)
    y0 = y.copy()
    stream = cp.cuda.Stream(non_blocking=True)

    class OnlyCAI:  # CuPy arrays speak DLPack too; this one only the CUDA Array Interface
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    exe = axpy.instantiate(params={"n": n, "a": -2.0}, buffers={"x": OnlyCAI(x), "y": y}, stream=stream)
    exe.launch(stream)
    stream.synchronize()
    cp.testing.assert_allclose(y, -2.0 * x + y0, rtol=1e-6, atol=1e-6)
    # exported the other way: the CUDA Array Interface and DLPack
    x2 = cp.asarray(exe.buffer("x"))
    assert x2.data.ptr == x.data.ptr
    y2 = cp.from_dlpack(exe.buffer("y"))
    cp.testing.assert_allclose(y2, y)


def test_cuda_array_interface_stream_is_waited_for(axpy):
    n = 1 << 22
    producer = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    x = torch.empty(n, device="cuda")
    y = torch.zeros(n, device="cuda")

    class Producing:
        def __init__(self, t, stream):
            cai = dict(t.__cuda_array_interface__)
            cai["version"] = 3  # torch's is version 2, which has no stream entry
            cai["stream"] = stream.cuda_stream
            self.__cuda_array_interface__ = cai

    with torch.cuda.stream(producer):
        torch.cuda._sleep(50_000_000)  # keep the producer busy
        x.fill_(4.0)
    exe = axpy.instantiate(params={"n": n, "a": 1.0}, buffers={"x": Producing(x, producer), "y": y}, stream=consumer)
    exe.launch(consumer)
    consumer.synchronize()
    assert bool((y == 4.0).all()), "the launch ran before the producer's fill"


def test_torch_graphs_compose_where_cuda_allows(axpy):
    n = 1 << 16
    x = torch.rand(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    exe = axpy.instantiate(params={"n": n, "a": 1.0}, buffers={"x": x, "y": y})
    g = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(g, stream=stream):
            y.mul_(2)
            # A graph launch cannot be captured into another graph: refused before it touches the
            # capturing stream, whose capture stays intact.
            with pytest.raises(orch.Error) as e:
                exe.launch()
            assert e.value.code == orch.ErrorCode.Unsupported
        # Next to a replayed torch graph on one stream, orch composes: y = ((0*2 + x)*2 + x)
        g.replay()
        exe.launch()
        g.replay()
        exe.launch()
    stream.synchronize()
    torch.testing.assert_close(y, (x * 2) + x)


# ---- errors on the device ---------------------------------------------------------------------


def test_binding_errors_on_the_gpu(compiled, axpy):
    p = orch.load(compiled("saxpy"))
    n = 1000
    with pytest.raises(orch.Error) as e:  # a host buffer needs host memory
        p.instantiate(params={"n": n}, buffers={"x_host": torch.empty(n, device="cuda")})
    assert e.value.code == orch.ErrorCode.InvalidArgument and "x_host" in e.value.message
    with pytest.raises(orch.Error) as e:  # pageable CPU memory is not CUDA's
        p.instantiate(params={"n": n}, buffers={"x_host": torch.empty(n)})
    assert e.value.code == orch.ErrorCode.InvalidArgument and "x_host" in e.value.message
    with pytest.raises(orch.Error) as e:
        p.instantiate(params={"n": n}, buffers={"x": torch.empty(n - 1, device="cuda")})
    assert e.value.code == orch.ErrorCode.BufferTooSmall and e.value.where.endswith(":10:1")
    with pytest.raises(orch.Error) as e:
        p.instantiate(params={"n": n}, buffers={"x": torch.empty(n, device="cuda", dtype=torch.float16)})
    assert "f32 elements; it is given f16" in e.value.message
    with pytest.raises(orch.Error) as e:
        p.instantiate(params={"n": n}, buffers={"x": torch.empty(2 * n, device="cuda")[::2]})
    assert "contiguous" in e.value.message
    # overlapping buffers where the pipeline writes one of them
    t = torch.empty(2 * n, device="cuda")
    with pytest.raises(orch.Error) as e:
        axpy.instantiate(params={"n": n}, buffers={"x": t[:n], "y": t[n // 2 : n // 2 + n]})
    assert e.value.code == orch.ErrorCode.BuffersOverlap
    # exported bf16 buffers go through DLPack only
    if torch.cuda.device_count() > 1:
        other = torch.empty(n, device="cuda:1")
        with pytest.raises(orch.Error) as e:
            axpy.instantiate(params={"n": n}, buffers={"x": other})
        assert "cuda:1" in e.value.message


def test_the_documented_example_runs(capsys):
    import runpy

    runpy.run_path(str(ROOT / "python" / "examples" / "saxpy_torch.py"), run_name="__main__")
    assert "saxpy: ok" in capsys.readouterr().out


def test_a_bound_tensors_storage_outlives_set_(axpy):
    # The executable holds the bound tensor's storage, not only the tensor object: after
    # y.set_() points the tensor elsewhere, torch must not hand the old memory out again while
    # the graph still writes it.
    n = 1 << 20
    x = torch.ones(n, device="cuda")
    y = torch.zeros(n, device="cuda")
    ptr = y.data_ptr()
    exe = axpy.instantiate(params={"n": n, "a": 2.0}, buffers={"x": x, "y": y}, stream=0)
    y.set_(torch.empty(0, device="cuda"))
    gc.collect()
    others = [torch.full((n,), 7.0, device="cuda") for _ in range(4)]  # what the allocator has free
    assert all(o.data_ptr() != ptr for o in others)
    exe.launch(0)
    torch.cuda.synchronize()
    assert all(bool((o == 7.0).all()) for o in others)
    out = torch.from_dlpack(exe.buffer("y"))
    assert out.data_ptr() == ptr and bool((out == 2.0).all())
