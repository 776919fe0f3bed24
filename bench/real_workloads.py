"""The workloads of bench/real_bench.py (issue 19): for each row, the .orch pipeline, its seeded
inputs, a CPU reference (numpy) and, where the workload is expressible there, the same work in
torch's own ops and in JAX. Needs only numpy to import; torch and JAX are imported by the
functions that use them.

Exactness: every workload but the matrix product is built so that its result does not depend on
how the GPU orders or fuses its arithmetic (integers, products by powers of two, sums of small
integers in float32), so each implementation must match the reference bit for bit; the matrix
product is compared within a bound derived below (gemm_bound).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

K, M = 1 << 10, 1 << 20


@dataclasses.dataclass
class Row:
    name: str                    # as printed
    slug: str                    # file stem (the .orch path is in the ejected CUDA, so it is stable)
    orch: str                    # the pipeline
    inputs: Callable[[], dict]   # buffer -> initial contents (seeded); other buffers start zeroed
    outputs: tuple               # buffers compared after one launch
    reference: Callable | None   # inputs -> {buffer: expected}; None where numpy takes too long
    repeat: int                  # timed launches (orch-run --repeat), before --quick
    check: str = "exact"         # "exact", or "bound": within bound(inputs, expected) per element
    bound: Callable | None = None
    torch: str | None = None     # a TORCH key, or None where torch has no equivalent
    jax: dict | None = None      # the JAX worker's task, for the loop rows
    loop: bool = False           # a `while` whose body fits one wave: also timed with --unroll 16
    params: dict = dataclasses.field(default_factory=dict)  # what torch and JAX need


def header(name: str, params: str, buffers: str) -> str:
    return f"pipeline {name}\ntarget sm_90\n{params}{buffers}"


def rng_for(slug: str) -> np.random.Generator:
    # A fixed seed per row (Python's hash() of a str changes per process).
    return np.random.default_rng(int.from_bytes(slug.encode()[:8].ljust(8, b"\0"), "little"))


# ---- x = 0.5 x + 1: chains, a counted loop, a fan-out ----------------------------------------

AXPB = '''kernel axpb(n: u32, x: inout f32[]) source """
extern "C" __global__ void axpb(unsigned n, float* x) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.5f * x[i] + 1.0f;
}
"""
'''


# The same work, four elements a thread through float4 (16-byte) loads and stores, as XLA's fused
# loop kernel does: the 16 M loop's row with it shows what the graph costs apart from the kernel.
AXPB4 = '''kernel axpb4(n: u32, x: inout f32[]) source """
extern "C" __global__ void axpb4(unsigned n, float* x) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (4 * i + 3 < n) {
    float4 v = reinterpret_cast<float4*>(x)[i];
    v.x = 0.5f * v.x + 1.0f; v.y = 0.5f * v.y + 1.0f; v.z = 0.5f * v.z + 1.0f; v.w = 0.5f * v.w + 1.0f;
    reinterpret_cast<float4*>(x)[i] = v;
  } else {
    for (unsigned j = 4 * i; j < n; ++j) x[j] = 0.5f * x[j] + 1.0f;
  }
}
"""
'''


def axpb_ref(x: np.ndarray, times: int) -> np.ndarray:
    x = x.astype(np.float32).copy()
    for _ in range(times):
        y = np.float32(0.5) * x + np.float32(1.0)  # 0.5 x is exact, so an FMA rounds the same
        if np.array_equal(y, x):  # every element at the fixed point (2.0): nothing changes again
            break
        x = y
    return x


def chain_row(n: int, label: str, repeat: int, launches: int = 100, checked: bool = True) -> Row:
    body = "".join("  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n" for _ in range(launches))
    slug = f"chain-{label.replace(' ', '')}"
    return Row(f"chain x{launches}, {label}", slug,
               header("chain", f"param n: u32 = {n}\n", "buffer x: f32[n]\n") + f"{AXPB}graph main {{\n{body}}}\n",
               lambda: {"x": rng_for(slug).random(n, dtype=np.float32)}, ("x",),
               (lambda i: {"x": axpb_ref(i["x"], launches)}) if checked else None, repeat, torch="chain",
               params={"n": n, "launches": launches})


def loop_row(n: int, label: str, repeat: int, iters: int = 1000, vec4: bool = False) -> Row:
    slug = f"loop-{label.replace(' ', '')}" + ("-x4" if vec4 else "")
    launch = "axpb4<<<ceil_div(n, 1024), 256>>>(n, x)" if vec4 else "axpb<<<ceil_div(n, 256), 256>>>(n, x)"
    text = (header("loop", f"param n: u32 = {n}\nparam iters: i32 = {iters}\n", "buffer x: f32[n]\nbuffer c: i32\n")
            + f"{AXPB4 if vec4 else AXPB}graph main {{\n  c = iters\n  while c > 0 {{\n"
            f"    {launch}\n    c -= 1\n  }}\n}}\n")
    return Row(f"loop x{iters}, {label}" + (", float4" if vec4 else ""), slug, text, lambda: {"x": rng_for(slug).random(n, dtype=np.float32)},
               ("x",), lambda i: {"x": axpb_ref(i["x"], iters)}, repeat, torch="chain",
               jax={"kind": "loop", "iters": iters}, loop=True, params={"n": n, "launches": iters})


def fanout_row(n: int, label: str, repeat: int, branches: int = 8, depth: int = 10) -> Row:
    """`branches` independent chains of `depth` launches, each on its own buffer, then one kernel
    that sums them: the graph's parallel branches."""
    bufs = "".join(f"buffer x{b}: f32[n]\n" for b in range(branches)) + "buffer y: f32[n]\n"
    body = "".join(f"  axpb<<<ceil_div(n, 256), 256>>>(n, x{b})\n" for _ in range(depth) for b in range(branches))
    args = ", ".join(f"x{b}" for b in range(branches))
    params = ", ".join(f"x{b}: in f32[]" for b in range(branches))
    cparams = ", ".join(f"const float* x{b}" for b in range(branches))
    total = " + ".join(f"x{b}[i]" for b in range(branches))  # left to right, as the reference adds
    join = (f'kernel join(n: u32, {params}, y: out f32[]) source """\n'
            f'extern "C" __global__ void join(unsigned n, {cparams}, float* y) {{\n'
            f'  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = {total};\n}}\n"""\n')
    slug = f"fanout-{label.replace(' ', '')}"

    def inputs():
        r = rng_for(slug)
        return {f"x{b}": r.random(n, dtype=np.float32) for b in range(branches)}

    def reference(i):
        xs = [axpb_ref(i[f"x{b}"], depth) for b in range(branches)]
        y = xs[0].copy()
        for x in xs[1:]:
            y = y + x
        return {"y": y}

    text = header("fanout", f"param n: u32 = {n}\n", bufs) + AXPB + join + \
        f"graph main {{\n{body}  join<<<ceil_div(n, 256), 256>>>(n, {args}, y)\n}}\n"
    return Row(f"fan-out {branches}x{depth}, {label}", slug, text, inputs, ("y",), reference, repeat, torch="fanout",
               params={"n": n, "branches": branches, "depth": depth})


# ---- compute-bound integer chain ----------------------------------------------------------------

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


def lcg_ref(x: np.ndarray, steps: int) -> np.ndarray:
    """`steps` rounds of v = a v + c (mod 2^32) are one affine map v -> A v + C, composed here in
    Python integers; one pass of numpy's wrapping uint32 arithmetic applies it (any size, exact)."""
    a_total, c_total = 1, 0
    for _ in range(steps):
        a_total, c_total = (1664525 * a_total) % (1 << 32), (1664525 * c_total + 1013904223) % (1 << 32)
    with np.errstate(over="ignore"):
        return x.astype(np.uint32) * np.uint32(a_total) + np.uint32(c_total)


def fma_row(n: int, label: str, repeat: int, launches: int = 20) -> Row:
    body = "".join("  lcg<<<ceil_div(n, 256), 256>>>(n, x)\n" for _ in range(launches))
    slug = f"fma-{label.replace(' ', '')}"
    return Row(f"fma x{launches}, {label}", slug,
               header("fma", f"param n: u32 = {n}\n", "buffer x: u32[n]\n") + f"{LCG}graph main {{\n{body}}}\n",
               lambda: {"x": rng_for(slug).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)}, ("x",),
               lambda i: {"x": lcg_ref(i["x"], launches * 256)}, repeat)


# ---- 2-D heat equation until converged ----------------------------------------------------------

HEAT = '''kernel heat_step(nx: u32, src: in f32[], dst: out f32[]) source """
// One explicit heat step (Jacobi damped by 1/2) on an nx x nx grid whose boundary stays fixed:
//   dst = src / 2 + ((up + down) + (left + right)) / 8.
// Both scalings are by powers of two, so exact: the result is the three adds and the last one
// rounded in this order, FMA or not, which numpy, torch and XLA reproduce bit for bit.
extern "C" __global__ void heat_step(unsigned nx, const float* src, float* dst) {
  const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= nx || y >= nx) return;
  const size_t i = (size_t)y * nx + x;
  if (x == 0 || y == 0 || x == nx - 1 || y == nx - 1) {
    dst[i] = src[i];
    return;
  }
  dst[i] = 0.5f * src[i] + 0.125f * ((src[i - nx] + src[i + nx]) + (src[i - 1] + src[i + 1]));
}
"""
kernel max_change(n: u32, a: in f32[], b: in f32[], residual: inout f32) source """
// residual = max(residual, max |a[i] - b[i]|): a grid-stride pass (each thread loads 4 elements of
// each array before using them, so that enough loads are in flight to run at bandwidth), a warp
// and a block maximum, one atomicMax per block (non-negative floats order like their bits as
// ints). A maximum is exact in any order.
extern "C" __global__ void max_change(unsigned n, const float* a, const float* b, float* residual) {
  const unsigned step = 4 * blockDim.x;
  float m = 0.0f;
  for (unsigned base = blockIdx.x * step + threadIdx.x; base < n; base += gridDim.x * step) {
    float d[4];
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned i = base + k * blockDim.x;
      d[k] = i < n ? a[i] - b[i] : 0.0f;
    }
    #pragma unroll
    for (int k = 0; k < 4; ++k) m = fmaxf(m, fabsf(d[k]));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
  __shared__ float warp_max[32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < (blockDim.x >> 5) ? warp_max[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(residual), __float_as_int(m));
  }
}
"""
'''


def heat_inputs(slug: str, nx: int) -> dict:
    # Random interior in [0, 1), the top edge held at 1 and the other edges at 0. The damped step
    # smooths the noise fast, so the largest change per step falls below 1e-3 after about 200
    # steps at every size here (the hot edge's corners decay last).
    u = rng_for(slug).random((nx, nx), dtype=np.float32)
    u[0, :], u[-1, :], u[:, 0], u[:, -1] = 1, 0, 0, 0
    return {"u0": u.reshape(-1)}


def heat_ref(u0: np.ndarray, nx: int, tol: float, max_iters: int):
    """The pipeline's loop in float32, in the kernel's order of operations; in place on
    preallocated arrays, since at 1024^2 this runs ~200 steps."""
    u = u0.reshape(nx, nx).copy()
    v = u.copy()  # the boundary of v is the boundary of u, and stays so
    s, t = np.empty((nx - 2, nx - 2), np.float32), np.empty((nx - 2, nx - 2), np.float32)
    half, eighth, tol = np.float32(0.5), np.float32(0.125), np.float32(tol)

    def step(src, dst):
        np.add(src[:-2, 1:-1], src[2:, 1:-1], out=s)
        np.add(src[1:-1, :-2], src[1:-1, 2:], out=t)
        np.add(s, t, out=s)
        np.multiply(s, eighth, out=s)
        np.multiply(src[1:-1, 1:-1], half, out=t)
        np.add(t, s, out=dst[1:-1, 1:-1])

    iters = 0
    while True:
        step(u, v)
        step(v, u)
        residual = np.max(np.abs(u - v))
        iters += 2
        if not (residual > tol and iters < max_iters):
            break
    return u.reshape(-1), iters


def heat_row(nx: int, repeat: int, checked: bool, tol: float = 1e-3, max_iters: int = 10000) -> Row:
    slug = f"heat-{nx}"
    blocks = "dim3(ceil_div(nx, 32), ceil_div(nx, 8)), dim3(32, 8)"
    text = header("heat", f"param nx: u32 = {nx}\nparam tol: f32 = {tol}\nparam max_iters: u32 = {max_iters}\n",
                  "buffer u0: f32[nx * nx]\nbuffer u: f32[nx * nx]\nbuffer v: f32[nx * nx]\n"
                  "buffer residual: f32\nbuffer iters: u32\n") + HEAT + f"""graph main {{
  copy u0 -> u
  fill iters = 0
  while iters == 0 || (residual > tol && iters < max_iters) {{
    heat_step<<<{blocks}>>>(nx, u, v)
    heat_step<<<{blocks}>>>(nx, v, u)
    fill residual = 0
    max_change<<<min(ceil_div(nx * nx, 1024), 1024), 256>>>(nx * nx, u, v, residual)
    iters += 2
  }}
}}
"""

    def reference(i):
        u, iters = heat_ref(i["u0"], nx, tol, max_iters)
        return {"u": u, "iters": np.array([iters], np.uint32)}

    p = {"nx": nx, "tol": tol, "max_iters": max_iters}
    return Row(f"heat to {tol:g}, {nx}^2", slug, text, lambda: heat_inputs(slug, nx), ("u", "iters"),
               reference if checked else None, repeat, torch="heat", jax={"kind": "heat", **p}, loop=True, params=p)


# ---- a reduction feeding a `while` condition ----------------------------------------------------

SHRINK = '''kernel shrink(n: u32, x: inout i32[], total: inout u64) source """
// x -= x >> 6 (about x * 63/64 for x >= 0, exact in integers), and total += the new sum of x:
// a grid-stride pass (each thread loads 4 elements before storing any, so that enough loads are
// in flight to run at bandwidth), a warp and a block sum, one 64-bit atomicAdd per block.
extern "C" __global__ void shrink(unsigned n, int* x, unsigned long long* total) {
  const unsigned step = 4 * blockDim.x;
  unsigned long long s = 0;
  for (unsigned base = blockIdx.x * step + threadIdx.x; base < n; base += gridDim.x * step) {
    int v[4];
    #pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = base + k * blockDim.x < n ? x[base + k * blockDim.x] : 0;
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] -= v[k] >> 6;
      if (base + k * blockDim.x < n) x[base + k * blockDim.x] = v[k];
      s += (unsigned)v[k];
    }
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  __shared__ unsigned long long warp_sum[32];
  if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? warp_sum[threadIdx.x] : 0ull;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) atomicAdd(total, s);
  }
}
"""
'''


def shrink_ref(x0: np.ndarray, threshold: int, max_iters: int):
    x, iters = x0.copy(), 0
    while True:
        x -= x >> 6
        total = int(x.sum(dtype=np.int64))
        iters += 1
        if not (total > threshold and iters < max_iters):
            return x, total, iters


def shrink_row(n: int, label: str, repeat: int, checked: bool, max_iters: int = 10000) -> Row:
    # Values in [0, 2^24), mean 2^23; the loop runs until the mean is below 2^14, about
    # 64 ln(2^9) = 400 rounds.
    threshold = n << 14
    slug = f"shrink-{label.replace(' ', '')}"
    text = header("shrink", f"param n: u32 = {n}\nparam threshold: u64 = {threshold}\nparam max_iters: u32 = {max_iters}\n",
                  "buffer x0: i32[n]\nbuffer x: i32[n]\nbuffer total: u64\nbuffer iters: u32\n") + SHRINK + """graph main {
  copy x0 -> x
  fill iters = 0
  while iters == 0 || (total > threshold && iters < max_iters) {
    fill total = 0
    shrink<<<min(ceil_div(n, 1024), 1024), 256>>>(n, x, total)
    iters += 1
  }
}
"""

    def reference(i):
        x, total, iters = shrink_ref(i["x0"], threshold, max_iters)
        return {"x": x, "total": np.array([total], np.uint64), "iters": np.array([iters], np.uint32)}

    p = {"n": n, "threshold": threshold, "max_iters": max_iters}
    return Row(f"sum-while, {label}", slug, text,
               lambda: {"x0": rng_for(slug).integers(0, 1 << 24, n, dtype=np.int32)}, ("x", "total", "iters"),
               reference if checked else None, repeat, torch="shrink", jax={"kind": "shrink", **p}, loop=True, params=p)


# ---- a chain of tiled matrix products -----------------------------------------------------------

SGEMM = '''kernel sgemm(n: u32, a: in f32[], b: in f32[], c: out f32[]) source """
// c = a b for n x n row-major matrices, n a multiple of 64. A block computes one 64 x 64 tile of
// c from 64 x 16 tiles of a and 16 x 64 tiles of b staged in shared memory; each of its 256
// threads accumulates a 4 x 4 grid of it (rows ty + 16 i, columns tx + 16 j) in registers.
extern "C" __global__ void __launch_bounds__(256) sgemm(unsigned n, const float* a, const float* b, float* c) {
  __shared__ float sa[16][68];  // sa[k][r] = a[row0 + r][k0 + k], padded against bank conflicts
  __shared__ float sb[16][64];  // sb[k][j] = b[k0 + k][col0 + j]
  const unsigned tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const unsigned row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (unsigned k0 = 0; k0 < n; k0 += 16) {
    for (unsigned q = threadIdx.x; q < 1024; q += 256) {
      sa[q & 15][q >> 4] = a[(size_t)(row0 + (q >> 4)) * n + k0 + (q & 15)];
      sb[q >> 6][q & 63] = b[(size_t)(k0 + (q >> 6)) * n + col0 + (q & 63)];
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < 16; ++k) {
      float av[4], bv[4];
      #pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = sa[k][ty + 16 * i];
      #pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = sb[k][tx + 16 * j];
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) c[(size_t)(row0 + ty + 16 * i) * n + col0 + tx + 16 * j] = acc[i][j];
}
"""
'''


def gemm_inputs(slug: str, n: int, depth: int) -> dict:
    # a in [-1, 1); each w in [-1, 1) * sqrt(3 / n), variance 1/n, so every product keeps the
    # entries' scale (no overflow or vanishing down the chain).
    r = rng_for(slug)
    out = {"a": (r.random((n, n), dtype=np.float32) * 2 - 1).reshape(-1)}
    for k in range(1, depth + 1):
        out[f"w{k}"] = ((r.random((n, n), dtype=np.float32) * 2 - 1) * np.float32(np.sqrt(3.0 / n))).reshape(-1)
    return out


def gemm_ref(i: dict, n: int, depth: int) -> dict:
    y = i["a"].reshape(n, n).astype(np.float64)
    for k in range(1, depth + 1):
        y = y @ i[f"w{k}"].reshape(n, n).astype(np.float64)
    return {f"y{depth}": y.reshape(-1)}


def gemm_bound(i: dict, n: int, depth: int) -> np.ndarray:
    """How far a float32 result may be from the exact product, per element. A dot product of
    length n in float32, summed in any order, FMA or not, satisfies |fl(x.y) - x.y| <= g |x|.|y|
    with g = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms,
    section 3.1). Down the chain Y_k = Y_(k-1) W_k, with B_k bounding |Y^_k - Y_k|:
      B_1 = g |A| |W_1|,  B_k = (B_(k-1) + g (|Y_(k-1)| + B_(k-1))) |W_k|,
    the first term the error carried in, the second the new rounding on the computed operand.
    Computed in float64 (whose own error, n 2^-53 relative, is far inside the bound) with 1% slack.
    The bound is the worst case, about 1e-4 relative at n = 2048; a wrong index or a lost tile
    is off by O(1)."""
    u = 2.0 ** -24
    g = n * u / (1 - n * u)
    y = i["a"].reshape(n, n).astype(np.float64)
    bound = np.zeros((n, n))
    for k in range(1, depth + 1):
        w = i[f"w{k}"].reshape(n, n).astype(np.float64)
        bound = (bound + g * (np.abs(y) + bound)) @ np.abs(w)
        y = y @ w
    return (bound * 1.01).reshape(-1)


def gemm_row(n: int, repeat: int, depth: int = 4) -> Row:
    slug = f"sgemm-{n}"
    bufs = "buffer a: f32[n * n]\n" + "".join(f"buffer w{k}: f32[n * n]\nbuffer y{k}: f32[n * n]\n"
                                               for k in range(1, depth + 1))
    body = "".join(f"  sgemm<<<dim3(n / 64, n / 64), 256>>>(n, {'a' if k == 1 else f'y{k - 1}'}, w{k}, y{k})\n"
                   for k in range(1, depth + 1))
    return Row(f"sgemm x{depth}, {n}^2", slug, header("sgemm", f"param n: u32 = {n}\n", bufs) + SGEMM +
               f"graph main {{\n{body}}}\n", lambda: gemm_inputs(slug, n, depth), (f"y{depth}",),
               lambda i: gemm_ref(i, n, depth), repeat, check="bound", bound=lambda i: gemm_bound(i, n, depth),
               torch="sgemm", params={"n": n, "depth": depth})


# ---- device-launched dispatch: a mixture of experts ---------------------------------------------

MOE = '''kernel route(tokens: u32, expert_of: in i32[], counts: out i32[], offsets: out i32[], order: out i32[],
             experts: graph[8], finish: graph)
    launches experts fire_and_forget <= 8, finish tail <= 1
    source """
// One block: count the tokens per expert, write each expert's count and first slot, list the
// tokens grouped by expert in `order`, then launch the device graph of every expert that got a
// token (fire-and-forget: the experts run concurrently) and `finish` as the tail launch, which
// starts once every fire-and-forget launch has completed (as in examples/moe.cu).
extern "C" __global__ void route(unsigned tokens, const int* expert_of, int* counts, int* offsets,
                                 int* order, const cudaGraphExec_t* experts, cudaGraphExec_t finish) {
  __shared__ int hist[8];
  __shared__ int cursor[8];
  if (threadIdx.x < 8) hist[threadIdx.x] = 0;
  __syncthreads();
  for (unsigned t = threadIdx.x; t < tokens; t += blockDim.x) atomicAdd(&hist[expert_of[t] & 7], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int start = 0;
    for (int e = 0; e < 8; ++e) {
      counts[e] = hist[e];
      offsets[e] = start;
      cursor[e] = start;
      start += hist[e];
    }
  }
  __syncthreads();
  for (unsigned t = threadIdx.x; t < tokens; t += blockDim.x) order[atomicAdd(&cursor[expert_of[t] & 7], 1)] = (int)t;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int e = 0; e < 8; ++e)
      if (hist[e] > 0) cudaGraphLaunch(experts[e], cudaStreamGraphFireAndForget);
    cudaGraphLaunch(finish, cudaStreamGraphTailLaunch);
  }
}
"""
kernel expert_ffn(e: u32, hidden: u32, x: in f32[], w: in f32[], counts: in i32[], offsets: in i32[],
                  order: in i32[], y: out f32[]) source """
// Expert e: y[t] = relu(x[t] W_e) for each token t routed to e (W_e: hidden x hidden, row-major,
// at w + e hidden^2). A block takes e's tokens 16 at a time (grid-stride over the groups): their
// rows of x into shared memory, then thread h computes column h of the 16 outputs, reading W_e's
// column h once per group (coalesced across the threads).
extern "C" __global__ void expert_ffn(unsigned e, unsigned hidden, const float* x, const float* w,
                                      const int* counts, const int* offsets, const int* order, float* y) {
  extern __shared__ float xs[];  // [16][hidden]
  const int count = counts[e];
  const int* mine = order + offsets[e];
  const float* we = w + (size_t)e * hidden * hidden;
  for (int first = (int)blockIdx.x * 16; first < count; first += (int)gridDim.x * 16) {
    const int rows = min(16, count - first);
    __syncthreads();  // the previous group's rows are no longer read
    for (unsigned q = threadIdx.x; q < 16 * hidden; q += blockDim.x) {
      const int t = (int)(q / hidden);
      xs[q] = t < rows ? x[(size_t)mine[first + t] * hidden + q % hidden] : 0.0f;
    }
    __syncthreads();
    for (unsigned h = threadIdx.x; h < hidden; h += blockDim.x) {
      float acc[16] = {};
      for (unsigned k = 0; k < hidden; ++k) {
        const float wk = we[(size_t)k * hidden + h];
        #pragma unroll
        for (int t = 0; t < 16; ++t) acc[t] = fmaf(xs[t * hidden + k], wk, acc[t]);
      }
      for (int t = 0; t < rows; ++t) y[(size_t)mine[first + t] * hidden + h] = fmaxf(acc[t], 0.0f);
    }
  }
}
"""
kernel combine(n: u32, x: in f32[], y: in f32[], out: out f32[]) source """
// out = x + y: the residual connection around the experts.
extern "C" __global__ void combine(unsigned n, const float* x, const float* y, float* out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i];
}
"""
'''


def moe_inputs(slug: str, tokens: int, hidden: int) -> dict:
    # Integer values in [-4, 4]: every partial sum of a row times a column is an integer of at
    # most 16 hidden <= 2^13 in magnitude, exact in float32 in any order, so the result is exact.
    r = rng_for(slug)
    return {"x": r.integers(-4, 5, tokens * hidden).astype(np.float32),
            "w": r.integers(-4, 5, 8 * hidden * hidden).astype(np.float32),
            "expert_of": r.integers(0, 8, tokens, dtype=np.int32)}


def moe_ref(i: dict, tokens: int, hidden: int) -> dict:
    x = i["x"].reshape(tokens, hidden)
    y = np.zeros_like(x)
    for e in range(8):
        rows = np.flatnonzero(i["expert_of"] == e)
        y[rows] = np.maximum(x[rows].astype(np.float64) @ i["w"].reshape(8, hidden, hidden)[e], 0)
    return {"out": (x + y).reshape(-1)}


def moe_row(tokens: int, hidden: int, repeat: int) -> Row:
    slug = f"moe-{tokens}x{hidden}"
    text = header("moe", f"param tokens: u32 = {tokens}\nparam hidden: u32 = {hidden}\n",
                  "buffer x: f32[tokens * hidden]\nbuffer w: f32[8 * hidden * hidden]\nbuffer y: f32[tokens * hidden]\n"
                  "buffer out: f32[tokens * hidden]\nbuffer expert_of: i32[tokens]\nbuffer counts: i32[8]\n"
                  "buffer offsets: i32[8]\nbuffer order: i32[tokens]\n") + MOE + """
// A group of 16 tokens per block, twice the blocks an even split needs (grid-stride covers the rest).
graph experts[e: 8] device {
  expert_ffn<<<ceil_div(tokens, 128), 256, 64 * hidden>>>(e, hidden, x, w, counts, offsets, order, y)
}
graph finish device {
  combine<<<ceil_div(tokens * hidden, 256), 256>>>(tokens * hidden, x, y, out)
}
graph main {
  route<<<1, 1024>>>(tokens, expert_of, counts, offsets, order, experts, finish)
}
"""
    return Row(f"moe 8 experts, {tokens // K}K x {hidden}", slug, text, lambda: moe_inputs(slug, tokens, hidden),
               ("out",), lambda i: moe_ref(i, tokens, hidden), repeat, torch="moe",
               params={"tokens": tokens, "hidden": hidden})


def rows() -> list:
    # Repeats: the timed launches per column (a third with --quick); rows under 1 ms take more,
    # which costs little next to the processes each column starts.
    return [
        chain_row(K, "1 K", 200), chain_row(64 * K, "64 K", 200), chain_row(M, "1 M", 100),
        chain_row(16 * M, "16 M", 10), chain_row(64 * M, "64 M", 5, checked=False),
        loop_row(K, "1 K", 20), loop_row(64 * K, "64 K", 20), loop_row(M, "1 M", 10), loop_row(16 * M, "16 M", 5),
        loop_row(16 * M, "16 M", 5, vec4=True),
        fanout_row(K, "1 K", 200), fanout_row(M, "1 M", 100),
        fma_row(M, "1 M", 100), fma_row(16 * M, "16 M", 10),
        # The 64 M chain, the 4096^2 heat and the 16 M sum-while take numpy from 10 s to minutes:
        # checked against torch's result instead where torch is present (bit for bit: see the kernels).
        heat_row(256, 30, True), heat_row(1024, 20, True), heat_row(4096, 5, False),
        shrink_row(64 * K, "64 K", 30, True), shrink_row(16 * M, "16 M", 5, False),
        gemm_row(512, 100), gemm_row(2048, 10),
        moe_row(4 * K, 256, 100), moe_row(16 * K, 512, 20),
    ]


# ---- torch: the same work in torch's own ops -----------------------------------------------------

class TorchWork:
    """One launch of a row in torch ops. `load` sets the state from the inputs; `eager` runs one
    launch (host control flow where the pipeline decides on the GPU); `graphable` is the same work
    with a fixed trip count (what torch.cuda.graph can capture), or None; `result` reads back."""

    def __init__(self, torch, key: str, p: dict, inputs: dict, iters: int | None):
        self.t, self.key, self.p = torch, key, p
        dev = "cuda"
        self.inputs = {k: torch.from_numpy(np.ascontiguousarray(v)).to(dev) for k, v in inputs.items()}
        self.state = {k: v.clone() for k, v in self.inputs.items()}
        self.iters = iters  # trips for graphable (heat, shrink): the reference's count
        self.out = {}
        if key in ("chain", "fanout"):
            self.one = torch.ones((), device=dev)
        if key == "heat":
            nx = p["nx"]
            self.u = torch.empty((nx, nx), device=dev)
            self.v = torch.empty((nx, nx), device=dev)
        if key == "shrink":
            self.x = torch.empty(p["n"], dtype=torch.int32, device=dev)
        if key == "sgemm":
            n = p["n"]
            self.ys = [torch.empty((n, n), device=dev) for _ in range(p["depth"])]
        if key == "moe":
            self.y = torch.empty((p["tokens"], p["hidden"]), device=dev)
            self.o = torch.empty_like(self.y)
        self.graphable = None if key == "moe" else self._graphable

    def load(self):
        for k, v in self.inputs.items():
            self.state[k].copy_(v)

    def _axpb(self, x):
        # 1 + 0.5 x in one kernel, in place (torch.add(input, other, alpha): input + alpha other),
        # as orch's kernel; x.mul_(0.5).add_(1) would be two kernels and twice the traffic.
        self.t.add(self.one, x, alpha=0.5, out=x)

    def _heat_step(self, src, dst):
        dst[1:-1, 1:-1] = 0.5 * src[1:-1, 1:-1] + 0.125 * ((src[:-2, 1:-1] + src[2:, 1:-1]) + (src[1:-1, :-2] + src[1:-1, 2:]))

    def _heat_trip(self):
        self._heat_step(self.u, self.v)
        self._heat_step(self.v, self.u)
        return (self.u - self.v).abs().max()

    def _shrink_trip(self):
        self.x.sub_(self.x >> 6)
        return self.x.sum(dtype=self.t.int64)

    def eager(self):
        k, p, s = self.key, self.p, self.state
        if k == "heat":
            nx = p["nx"]
            u0 = s["u0"].view(nx, nx)
            self.u.copy_(u0)
            self.v.copy_(u0)
            iters = 0
            while True:  # the host decides each trip: a device-to-host copy per trip
                r = self._heat_trip()
                iters += 2
                if not (r.item() > np.float32(p["tol"]) and iters < p["max_iters"]):
                    break
            self.out = {"u": self.u.view(-1), "iters": iters}
        elif k == "shrink":
            self.x.copy_(s["x0"])
            iters = 0
            while True:
                total = int(self._shrink_trip().item())
                iters += 1
                if not (total > p["threshold"] and iters < p["max_iters"]):
                    break
            self.out = {"x": self.x, "total": total, "iters": iters}
        elif k == "moe":
            t, hidden = self.t, p["hidden"]
            x, e_of = s["x"].view(-1, hidden), s["expert_of"]
            w = s["w"].view(8, hidden, hidden)
            for e in range(8):
                rows = (e_of == e).nonzero().squeeze(1)  # a device-to-host copy of the count
                self.y[rows] = t.relu(x[rows] @ w[e])
            t.add(x, self.y, out=self.o)
            self.out = {"out": self.o.view(-1)}
        else:
            self._graphable()

    def _graphable(self):
        k, p, s = self.key, self.p, self.state
        if k == "chain":
            for _ in range(p["launches"]):
                self._axpb(s["x"])
            self.out = {"x": s["x"]}
        elif k == "fanout":
            xs = [s[f"x{b}"] for b in range(p["branches"])]
            for _ in range(p["depth"]):
                for x in xs:
                    self._axpb(x)
            y = xs[0].clone()
            for x in xs[1:]:
                y.add_(x)  # left to right, as orch's join kernel
            self.out = {"y": y}
        elif k == "heat":
            nx = p["nx"]
            self.u.copy_(s["u0"].view(nx, nx))
            self.v.copy_(self.u)
            for _ in range(self.iters // 2):
                self._heat_trip()
            self.out = {"u": self.u.view(-1), "iters": self.iters}
        elif k == "shrink":
            self.x.copy_(s["x0"])
            for _ in range(self.iters):
                total = self._shrink_trip()
            self.out = {"x": self.x, "total": total, "iters": self.iters}
        elif k == "sgemm":
            n, y = p["n"], s["a"].view(p["n"], p["n"])
            for d, out in enumerate(self.ys):
                self.t.mm(y, s[f"w{d + 1}"].view(n, n), out=out)
                y = out
            self.out = {f"y{p['depth']}": y.view(-1)}

    def result(self) -> dict:
        res = {}
        for k, v in self.out.items():
            if isinstance(v, int):
                res[k] = np.array([v], np.uint32 if k == "iters" else np.uint64)
            elif k == "total":
                res[k] = np.array([int(v.item())], np.uint64)
            else:
                res[k] = v.detach().cpu().numpy().reshape(-1).copy()
        return res


# ---- JAX: the loop rows with lax.while_loop -------------------------------------------------------

def jax_tasks_run(tasks: list) -> list:
    """Runs in a subprocess of its own (XLA_FLAGS are read once, at start). Each task: its kind and
    params, an input .npy and where to save the outputs; returns per task the time per call (the
    median over batches of the wall time of back-to-back calls, then waiting: XLA exposes no CUDA
    events, and the calls queue on the GPU as the graph launches do) or the error."""
    import time

    import jax
    import jax.numpy as jnp
    from jax import lax
    jax.config.update("jax_enable_x64", True)  # the sum-while's int64 total
    results = []
    for task in tasks:
        kind = task["kind"]
        try:
            x0 = jnp.asarray(np.load(task["input"]))
            if kind == "loop":
                def f(x, iters=task["iters"]):
                    return lax.while_loop(lambda s: s[0] > 0, lambda s: (s[0] - 1, 0.5 * s[1] + 1.0),
                                          (jnp.int32(iters), x))[1:]
                names = ("x",)
            elif kind == "heat":
                nx, tol, cap = task["nx"], np.float32(task["tol"]), task["max_iters"]

                def step(u):
                    inner = 0.5 * u[1:-1, 1:-1] + 0.125 * ((u[:-2, 1:-1] + u[2:, 1:-1]) + (u[1:-1, :-2] + u[1:-1, 2:]))
                    return u.at[1:-1, 1:-1].set(inner)

                def body(s):
                    v = step(s[1])
                    u = step(v)
                    return s[0] + 2, u, jnp.max(jnp.abs(u - v))

                def f(u0):
                    it, u, _ = lax.while_loop(lambda s: (s[0] == 0) | ((s[2] > tol) & (s[0] < cap)), body,
                                              (jnp.int32(0), u0.reshape(nx, nx), jnp.float32(0)))
                    return u.reshape(-1), it
                names = ("u", "iters")
            elif kind == "shrink":
                thr, cap = task["threshold"], task["max_iters"]

                def body(s):
                    x = s[1] - (s[1] >> 6)
                    return s[0] + 1, x, jnp.sum(x, dtype=jnp.int64)

                def f(x):
                    it, x, total = lax.while_loop(lambda s: (s[0] == 0) | ((s[2] > thr) & (s[0] < cap)), body,
                                                  (jnp.int32(0), x, jnp.int64(0)))
                    return x, total, it
                names = ("x", "total", "iters")
            fj = jax.jit(f)
            out = jax.block_until_ready(fj(x0))  # compiles; the result of one call is checked
            for name, v in zip(names, out):
                np.save(f"{task['output']}.{name}.npy", np.asarray(v).reshape(-1))
            for _ in range(2):
                jax.block_until_ready(fj(x0))
            per_call = []
            for _ in range(task["batches"]):
                t0 = time.perf_counter()
                for _ in range(task["calls"]):
                    out = fj(x0)
                jax.block_until_ready(out)
                per_call.append((time.perf_counter() - t0) * 1e6 / task["calls"])
            results.append({"us": float(np.median(per_call)), "outputs": list(names)})
        except Exception as e:  # reported in the table's notes; the other tasks still run
            results.append({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
    return results


# ---- the references against plain loops (real_bench.py --self-test) ----------------------------

def self_test_references() -> list:
    """Each reference on a tiny input against the most direct code for the same thing; returns
    what failed."""
    fails, r = [], np.random.default_rng(7)
    f32 = np.float32

    x = r.random(64, dtype=f32)
    plain = x.copy()
    for _ in range(1000):
        plain = f32(0.5) * plain + f32(1.0)
    if not np.array_equal(axpb_ref(x, 1000), plain):
        fails.append("axpb_ref: the early stop at the fixed point changed the result")

    x = r.integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    plain = x.copy()
    with np.errstate(over="ignore"):
        for _ in range(512):
            plain = plain * np.uint32(1664525) + np.uint32(1013904223)
    if not np.array_equal(lcg_ref(x, 512), plain):
        fails.append("lcg_ref: the composed affine map differs from stepping")

    xs = [r.random(16, dtype=f32) for _ in range(3)]
    want = [sum_in_order([axpb_ref(xb, 4)[i] for xb in xs]) for i in range(16)]
    row = fanout_row(16, "t", 1, branches=3, depth=4)
    if not np.array_equal(row.reference({f"x{b}": xs[b] for b in range(3)})["y"], np.array(want, f32)):
        fails.append("fanout reference: the sum differs from adding element by element")

    nx, tol = 10, 1e-3
    u0 = heat_inputs("t", nx)["u0"]
    u, iters = heat_ref(u0, nx, tol, 10000)
    g, it = [[f32(v) for v in u0[y * nx:(y + 1) * nx]] for y in range(nx)], 0
    while True:
        changes = []
        for _ in range(2):
            h = [row_[:] for row_ in g]
            for y in range(1, nx - 1):
                for x_ in range(1, nx - 1):
                    h[y][x_] = f32(0.5) * g[y][x_] + f32(0.125) * ((g[y - 1][x_] + g[y + 1][x_]) + (g[y][x_ - 1] + g[y][x_ + 1]))
            changes = [abs(h[y][x_] - g[y][x_]) for y in range(nx) for x_ in range(nx)]
            g = h
        it += 2
        if not (max(changes) > f32(tol) and it < 10000):
            break
    if it != iters or not np.array_equal(u, np.array(g, f32).reshape(-1)):
        fails.append(f"heat_ref: {iters} steps against {it} stepping cell by cell, or another grid")

    x0 = r.integers(0, 1 << 24, 50, dtype=np.int32)
    x, total, iters = shrink_ref(x0, 50 << 14, 10000)
    v, it = [int(e) for e in x0], 0
    while True:
        v = [e - (e >> 6) for e in v]
        it += 1
        if not (sum(v) > 50 << 14 and it < 10000):
            break
    if it != iters or total != sum(v) or x.tolist() != v:
        fails.append(f"shrink_ref: {iters} rounds against {it} in Python integers")

    n, depth = 64, 3
    i = gemm_inputs("t", n, depth)
    exact, bound = gemm_ref(i, n, depth)[f"y{depth}"], gemm_bound(i, n, depth)
    y = i["a"].reshape(n, n)
    for k in range(1, depth + 1):
        y = y @ i[f"w{k}"].reshape(n, n)  # float32 products (numpy's sgemm)
    y = y.reshape(-1)
    if not np.all(np.abs(y - exact) <= bound):
        fails.append("gemm_bound: a float32 chain computed by numpy falls outside it")
    y[5] += 1e-2
    if np.all(np.abs(y - exact) <= bound):
        fails.append("gemm_bound: a result off by 1e-2 passes")

    tokens, hidden = 40, 8
    i = moe_inputs("t", tokens, hidden)
    out, w = moe_ref(i, tokens, hidden)["out"], i["w"].reshape(8, hidden, hidden)
    for t in range(tokens):
        xt = i["x"][t * hidden:(t + 1) * hidden]
        yt = [max(0.0, sum(float(xt[k]) * float(w[i["expert_of"][t]][k][h]) for k in range(hidden))) for h in range(hidden)]
        if not np.array_equal(out[t * hidden:(t + 1) * hidden], (xt + np.array(yt, f32))):
            fails.append(f"moe_ref: token {t} differs from its own dot products")
            break
    return fails


def sum_in_order(values):
    total = values[0]
    for v in values[1:]:
        total = np.float32(total + v)
    return total
