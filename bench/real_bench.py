#!/usr/bin/env python3
"""orch on kernels that do real work (issue 19): each row a pipeline compiled with orchc's defaults
and with the speed passes off in turn, timed by orch-run on the same GPU in one run, its result
checked against a CPU reference (numpy) first.

  bench/real_bench.py BUILD_DIR [--quick] [--only SUBSTRING]

BUILD_DIR holds compiler/orchc and tools/orch-run (a build tree or scripts/stage-gpu's copy).
Prints one table: per row the median time per launch of each option set, and the default's ratio
to the best of the others (< 1.00 is faster). The workloads:
  chain   100 launches of x = 0.5 x + 1 over n floats (bandwidth-bound), n from 1 K to 64 M
  loop    while c > 0 { x = 0.5 x + 1; c -= 1 }, 1,000 iterations decided on the GPU
  fma     20 launches of a compute-bound kernel (256 dependent integer multiply-adds per element)
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

OPTIONS = {"default": [], "--no-pdl": ["--no-pdl"], "--unroll 1": ["--unroll", "1"],
           "--no-pdl --unroll 1": ["--no-pdl", "--unroll", "1"]}
# Not a default: what a guarded copy costs where the compiler would not unroll (loops only).
FORCED = {"--unroll 16": ["--unroll", "16"]}

AXPB = '''kernel axpb(n: u32, x: inout f32[]) source """
extern "C" __global__ void axpb(unsigned n, float* x) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.5f * x[i] + 1.0f;
}
"""
'''
LCG = '''kernel lcg(n: u32, x: inout u32[]) source """
extern "C" __global__ void lcg(unsigned n, unsigned* x) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  #pragma unroll 16
  for (int k = 0; k < 256; ++k) v = v * 1664525u + 1013904223u;
  x[i] = v;
}
"""
'''


def chain(n: int, launches: int = 100) -> str:
    body = "".join("  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n" for _ in range(launches))
    return f"pipeline chain\ntarget sm_90\nparam n: u32 = {n}\nbuffer x: f32[n]\n{AXPB}graph main {{\n{body}}}\n"


def loop(n: int, iters: int = 1000) -> str:
    return (f"pipeline loop\ntarget sm_90\nparam n: u32 = {n}\nparam iters: i32 = {iters}\nbuffer x: f32[n]\n"
            f"buffer c: i32\n{AXPB}graph main {{\n  c = iters\n  while c > 0 {{\n"
            "    axpb<<<ceil_div(n, 256), 256>>>(n, x)\n    c -= 1\n  }\n}\n")


def fma(n: int, launches: int = 20) -> str:
    body = "".join("  lcg<<<ceil_div(n, 256), 256>>>(n, x)\n" for _ in range(launches))
    return f"pipeline fma\ntarget sm_90\nparam n: u32 = {n}\nbuffer x: u32[n]\n{LCG}graph main {{\n{body}}}\n"


def fanout(n: int, branches: int = 8, depth: int = 10) -> str:
    """`branches` independent chains of `depth` launches, each on its own buffer, then one kernel
    that sums them: the graph's parallel branches."""
    bufs = "".join(f"buffer x{b}: f32[n]\n" for b in range(branches))
    body = ""
    for d in range(depth):
        for b in range(branches):
            body += f"  axpb<<<ceil_div(n, 256), 256>>>(n, x{b})\n"
    args = ", ".join(f"x{b}" for b in range(branches))
    params = ", ".join(f"x{b}: in f32[]" for b in range(branches))
    cparams = ", ".join(f"const float* x{b}" for b in range(branches))
    total = " + ".join(f"x{b}[i]" for b in range(branches))
    join = (f'kernel join(n: u32, {params}, y: out f32[]) source """\n'
            f'extern "C" __global__ void join(unsigned n, {cparams}, float* y) {{\n'
            f'  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = {total};\n}}\n"""\n')
    return (f"pipeline fanout\ntarget sm_90\nparam n: u32 = {n}\n{bufs}buffer y: f32[n]\n{AXPB}{join}"
            f"graph main {{\n{body}  join<<<ceil_div(n, 256), 256>>>(n, {args}, y)\n}}\n")


def axpb_ref(x: np.ndarray, times: int) -> np.ndarray:
    x = x.astype(np.float32).copy()
    for _ in range(times):
        x = np.float32(0.5) * x + np.float32(1.0)  # 0.5 x is exact, so FMA rounds the same
    return x


def lcg_ref(x: np.ndarray, times: int) -> np.ndarray:
    x = x.astype(np.uint32).copy()
    with np.errstate(over="ignore"):
        for _ in range(times * 256):
            x = x * np.uint32(1664525) + np.uint32(1013904223)
    return x


K, M = 1 << 10, 1 << 20
ROWS = [
    # name, pipeline text, elements, dtype, reference of one launch, repeat
    ("chain x100, 1 K", chain(K), K, np.float32, lambda x: axpb_ref(x, 100), 50),
    ("chain x100, 64 K", chain(64 * K), 64 * K, np.float32, lambda x: axpb_ref(x, 100), 50),
    ("chain x100, 1 M", chain(M), M, np.float32, lambda x: axpb_ref(x, 100), 30),
    ("chain x100, 16 M", chain(16 * M), 16 * M, np.float32, lambda x: axpb_ref(x, 100), 10),
    ("chain x100, 64 M", chain(64 * M), 64 * M, np.float32, None, 5),
    ("loop x1000, 1 K", loop(K), K, np.float32, lambda x: axpb_ref(x, 1000), 20),
    ("loop x1000, 64 K", loop(64 * K), 64 * K, np.float32, lambda x: axpb_ref(x, 1000), 20),
    ("loop x1000, 1 M", loop(M), M, np.float32, lambda x: axpb_ref(x, 1000), 10),
    ("loop x1000, 16 M", loop(16 * M), 16 * M, np.float32, None, 5),
    ("fan-out 8x10, 1 K", fanout(K), K, np.float32, None, 50),
    ("fan-out 8x10, 1 M", fanout(M), M, np.float32, None, 20),
    ("fma x20, 1 M", fma(M), M, np.uint32, lambda x: lcg_ref(x, 20), 20),
    ("fma x20, 16 M", fma(16 * M), 16 * M, np.uint32, None, 5),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"$ {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    orchc, orch_run = build / "compiler" / "orchc", build / "tools" / "orch-run"
    gpu = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).strip().splitlines()[0]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"real_bench: {gpu}; {now}; orch-run medians (CUDA events) per launch of the pipeline")
    names = list(OPTIONS)
    print(f"{'row':22}" + "".join(f"{n:>20}" for n in names) + f"{'default/best':>14}  checked"
          + "".join(f"{n:>20}" for n in FORCED))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name, text, n, dtype, ref, repeat in ROWS:
            if a.only and a.only not in name:
                continue
            src = tmp / "p.orch"
            src.write_text(text)
            times, checked = {}, "-"
            rng = np.random.default_rng(abs(hash(name)) % (1 << 32))
            x0 = (rng.random(n, dtype=np.float32) if dtype == np.float32
                  else rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32))
            x0.tofile(tmp / "x0.bin")
            want = ref(x0) if ref else None
            for label, opts in list(OPTIONS.items()) + (list(FORCED.items()) if name.startswith("loop") else []):
                binf = tmp / f"p-{len(times)}.bin"
                run([orchc, *opts, src, "-o", binf])
                if want is not None:
                    run([orch_run, binf, "--warmup", "0", "--repeat", "1", "--fill", f"x=file:{tmp / 'x0.bin'}",
                         "--dump", f"x={tmp / 'x1.bin'}"])
                    got = np.fromfile(tmp / "x1.bin", dtype=dtype)
                    if not np.array_equal(got, want):
                        bad = int(np.sum(got != want))
                        print(f"{name}: {label}: {bad} of {n} elements differ from the CPU", file=sys.stderr)
                        return 1
                    checked = "exact"
                fills = ["--fill", f"x=file:{tmp / 'x0.bin'}"] if "buffer x:" in text else []
                out = run([orch_run, binf, "--warmup", "3", "--repeat", str(max(3, repeat // (3 if a.quick else 1))),
                           *fills])
                m = re.search(r"median ([0-9.]+) (us|ms|s)\b", out)
                scale = {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]
                times[label] = float(m.group(1)) * scale
            best = min(v for k, v in times.items() if k in OPTIONS and k != "default")
            ratio = times["default"] / best
            worst = max(worst, ratio)
            forced = "".join(f"{times[k]:>17.1f} us" for k in FORCED if k in times)
            print(f"{name:22}" + "".join(f"{times[k]:>17.1f} us" for k in names) + f"{ratio:>14.3f}  {checked:7}" + forced)
    print(f"worst default/best: {worst:.3f} (target: <= 1.02)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
