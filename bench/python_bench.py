#!/usr/bin/env python3
"""orch from Python against PyTorch, on a solver loop decided on the GPU, and Python's cost per
launch() over the C++ runtime.

1. Jacobi sweeps on a 1-D Poisson problem until the largest change is below tol, three ways:
     eager   PyTorch ops, two sweeps per iteration, the residual read on the host (.item())
             every iteration to decide whether to go on;
     graph   the iteration's body captured once with torch.cuda.graph, replayed from a host
             loop that reads the residual each time;
     orch    the whole loop in one orch pipeline (a `while` decided on the GPU): one launch().
   Same problem, same arithmetic (0.5 * (rhs + left + right); the residual is the largest
   change of the iteration's two sweeps), same starting point each solve; times per solve (the
   median of --reps solves, host wall clock around the solve, GPU synchronized) and ratios.
2. Python's added cost per launch(): host time per Executable.launch() on a one-kernel
   pipeline, minus what the C++ runtime's launch costs (a bare ctypes call of orch_launch, less
   the cost of a ctypes call of a C function that returns at once).
   Without a GPU (or with --overhead-only) only the second part runs, with a C function that
   returns at once in place of orch_launch: then the number is the binding's own cost.

    python3 bench/python_bench.py [--sizes 16,32,64] [--reps 3] [--overhead-only]

Needs the orch package (the wheel, or ORCH_LIBRARY_DIR=build/python PYTHONPATH=python), and
for part 1 torch with CUDA. Prints the GPU, driver, date and versions with the numbers.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import platform
import shutil
import statistics
import subprocess
import sys
import time

import orch
from orch import _native, _pipeline

JACOBI = r'''pipeline jacobi_bench
target sm_90
param n: u32 = 64
param tol: f32 = 1e-5
param max_iters: u32 = 20000
buffer u: f32[n]
buffer v: f32[n]
buffer rhs: f32[n]
buffer residual: f32
buffer iters: u32
kernel sweep(n: u32, src: in f32[], rhs: in f32[], dst: out f32[], residual: inout f32) source """
extern "C" __global__ void sweep(unsigned n, const float* src, const float* rhs, float* dst, float* residual) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float left = i > 0 ? src[i - 1] : 0.0f;
  float right = i + 1 < n ? src[i + 1] : 0.0f;
  float next = 0.5f * (rhs[i] + left + right);
  dst[i] = next;
  float change = fabsf(next - src[i]);
  atomicMax(reinterpret_cast<int*>(residual), __float_as_int(change));
}
"""
graph main {
  fill iters = 0
  fill residual = 0
  while iters == 0 || (residual > tol && iters < max_iters) {
    fill residual = 0
    sweep<<<ceil_div(n, 256), 256>>>(n, u, rhs, v, residual)
    sweep<<<ceil_div(n, 256), 256>>>(n, v, rhs, u, residual)
    iters += 2
  }
}
'''

TICK = r'''pipeline tick
target sm_90
buffer c: i32
kernel tick(c: inout i32) source """
extern "C" __global__ void tick(int* c) { if (threadIdx.x == 0) c[0] += 1; }
"""
graph main {
  tick<<<1, 32>>>(c)
}
'''


def machine_line(torch=None) -> str:
    gpu, driver = "no GPU", "n/a"
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
        if q.returncode == 0 and q.stdout.strip():
            gpu, driver = [x.strip() for x in q.stdout.strip().splitlines()[0].split(",", 1)]
    versions = f"Python {platform.python_version()}, orch {orch.__version__}"
    if torch is not None:
        versions += f", torch {torch.__version__} (CUDA {torch.version.cuda})"
    return f"{gpu}, driver {driver}; {versions}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"


# ---- part 1: Jacobi three ways ----------------------------------------------------------------


def torch_sweep(torch, src, rhs):
    left = torch.nn.functional.pad(src[:-1], (1, 0))
    right = torch.nn.functional.pad(src[1:], (0, 1))
    dst = 0.5 * (rhs + left + right)
    return dst, (dst - src).abs().max()


def solve_eager(torch, u, rhs, tol, max_iters):
    sweeps = 0
    while True:
        v, c1 = torch_sweep(torch, u, rhs)
        u2, c2 = torch_sweep(torch, v, rhs)
        u.copy_(u2)
        sweeps += 2
        if torch.maximum(c1, c2).item() <= tol or sweeps >= max_iters:  # the host decides
            return sweeps


class GraphedBody:
    def __init__(self, torch, u, rhs):
        self.torch, self.u, self.rhs = torch, u, rhs
        self.res = torch.zeros((), device=u.device)
        self.graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up before capture, as torch's docs ask
                self._body()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(self.graph):
            self._body()

    def _body(self):
        v, c1 = torch_sweep(self.torch, self.u, self.rhs)
        u2, c2 = torch_sweep(self.torch, v, self.rhs)
        self.u.copy_(u2)
        self.res.copy_(self.torch.maximum(c1, c2))

    def solve(self, tol, max_iters):
        sweeps = 0
        while True:
            self.graph.replay()
            sweeps += 2
            if self.res.item() <= tol or sweeps >= max_iters:
                return sweeps


def timed(torch, reset, solve, reps):
    times, sweeps = [], None
    for _ in range(reps):
        reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        sweeps = solve()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), sweeps


def bench_jacobi(torch, sizes, reps, tol, max_iters):
    print(f"Jacobi until the largest change <= {tol:g} (at most {max_iters} sweeps); median of {reps} solves per cell")
    print(f"{'n':>6} {'sweeps':>16} {'eager':>11} {'graph+host':>11} {'orch':>11} {'eager/orch':>11} {'graph/orch':>11}")
    pipeline = orch.load(orch.compile(JACOBI))
    gen = torch.Generator(device="cpu").manual_seed(1)
    rows = []
    for n in sizes:
        u0 = torch.rand(n, generator=gen).cuda()
        rhs = (torch.rand(n, generator=gen) * 1e-3).cuda()
        u = torch.empty_like(u0)

        def reset():
            u.copy_(u0)

        t_eager, s_eager = timed(torch, reset, lambda: solve_eager(torch, u, rhs, tol, max_iters), reps)
        reset()
        body = GraphedBody(torch, u, rhs)
        t_graph, s_graph = timed(torch, reset, lambda: body.solve(tol, max_iters), reps)
        stream = torch.cuda.current_stream()
        exe = pipeline.instantiate(params={"n": n, "tol": tol, "max_iters": max_iters}, buffers={"u": u, "rhs": rhs}, stream=stream)
        iters = torch.from_dlpack(exe.buffer("iters"))
        handle = stream.cuda_stream

        def solve_orch():
            exe.launch(handle)
            return None

        t_orch, _ = timed(torch, reset, solve_orch, reps)
        s_orch = int(iters.view(torch.int32).item())
        sweeps = f"{s_eager}/{s_graph}/{s_orch}"
        print(
            f"{n:>6} {sweeps:>16} {t_eager * 1e3:>9.2f}ms {t_graph * 1e3:>9.2f}ms {t_orch * 1e3:>9.2f}ms "
            f"{t_eager / t_orch:>10.1f}x {t_graph / t_orch:>10.1f}x"
        )
        rows.append((n, t_eager / t_orch, t_graph / t_orch))
    print("(sweeps: eager/graph/orch; each solve starts from the same u0; targets: eager/orch >= 5x, graph/orch >= 2x)")
    return rows


# ---- part 2: Python's cost per launch() -------------------------------------------------------


def per_call_us(fn, calls, batch, sync=None):
    """Median host time per call over batches of `batch` calls (synchronized between batches,
    untimed, so the launch queue never fills)."""
    samples = []
    for _ in range(calls // batch):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch)
        if sync:
            sync()
    return statistics.median(samples) * 1e6


def bench_overhead_cpu(calls):
    """No GPU: Executable.launch() with a C function that returns at once in place of orch_launch
    (orch_stream_wait of a stream with itself): the binding's own cost per launch()."""
    rt = _native.runtime
    noop = rt.orch_stream_wait  # (stream, stream) -> NULL without a CUDA call when both are equal
    handle = _pipeline._ExecHandle(None, {})

    class FakeRuntime:
        def __getattr__(self, name):
            return getattr(rt, name)

    fake = FakeRuntime()
    fake.orch_launch = noop
    exe = _pipeline.Executable.__new__(_pipeline.Executable)
    exe._handle, exe._h, exe.device, exe._buffers = handle, 7, 0, {}
    saved = _pipeline._rt
    _pipeline._rt = fake
    try:
        stream = 7  # the same value as the "handle": orch_stream_wait(7, 7) returns at once
        t_wrapper = per_call_us(lambda: exe.launch(stream), calls, 1000)
    finally:
        _pipeline._rt = saved
    t_ctypes = per_call_us(lambda: noop(7, 7), calls, 1000)
    null = rt.orch_pipeline_device
    t_null = per_call_us(lambda: null(None), calls, 1000)
    print("Python's cost per launch() (no GPU: a C function that returns at once stands in for orch_launch)")
    print(f"  Executable.launch(int stream) around it: {t_wrapper:.3f} us per call")
    print(f"  a bare ctypes call of it:                {t_ctypes:.3f} us per call")
    print(f"  a bare ctypes call with one argument:    {t_null:.3f} us per call")
    print(f"  => the binding adds {t_wrapper:.2f} us per launch() over a C++ caller (target <= 2 us)")
    return t_wrapper


def bench_overhead_gpu(torch, calls):
    pipeline = orch.load(orch.compile(TICK))
    stream = torch.cuda.Stream()
    exe = pipeline.instantiate(stream=stream)
    s = stream.cuda_stream
    rt = _native.runtime
    launch_c = rt.orch_launch
    h = exe._h
    noop = rt.orch_stream_wait
    sync = stream.synchronize
    for _ in range(200):
        exe.launch(s)
    sync()
    t_py = per_call_us(lambda: exe.launch(s), calls, 100, sync)
    t_py_obj = per_call_us(lambda: exe.launch(stream), calls, 100, sync)
    with torch.cuda.stream(stream):
        t_py_default = per_call_us(lambda: exe.launch(), calls, 100, sync)  # torch's current stream
    t_raw = per_call_us(lambda: launch_c(h, s), calls, 100, sync)
    t_noop = per_call_us(lambda: noop(s, s), calls, 100)
    cpp = t_raw - t_noop  # what the C++ runtime's launch costs the host
    added = t_py - cpp
    print(f"Python's cost per launch() (one-kernel pipeline, host time per call, median of batches of 100, {calls} calls)")
    print(f"  Executable.launch(int stream):           {t_py:.2f} us")
    print(f"  Executable.launch(torch.cuda.Stream):    {t_py_obj:.2f} us")
    print(f"  Executable.launch() (torch's current):   {t_py_default:.2f} us")
    print(f"  bare ctypes orch_launch(h, stream):      {t_raw:.2f} us")
    print(f"  bare ctypes call that returns at once:   {t_noop:.2f} us")
    print(f"  => the C++ runtime's launch: {cpp:.2f} us; Python adds {added:.2f} us per launch() (target <= 2 us)")
    return added


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="16,32,64", help="problem sizes n (comma-separated)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--max-iters", type=int, default=20000, help="sweeps at most")
    ap.add_argument("--calls", type=int, default=20000, help="launch() calls timed for part 2")
    ap.add_argument("--overhead-only", action="store_true", help="only part 2, without a GPU")
    args = ap.parse_args(argv)

    torch = None
    if not args.overhead_only:
        try:
            import torch as torch_module

            if torch_module.cuda.is_available():
                torch = torch_module
        except ImportError:
            pass
    print(f"python_bench: {machine_line(torch)}")
    if torch is None:
        if not args.overhead_only:
            print("python_bench: no torch with CUDA here: part 1 skipped; part 2 without a GPU")
        bench_overhead_cpu(args.calls)
        return 0
    sizes = [int(x) for x in args.sizes.split(",") if x]
    bench_jacobi(torch, sizes, args.reps, args.tol, args.max_iters)
    print()
    bench_overhead_gpu(torch, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
