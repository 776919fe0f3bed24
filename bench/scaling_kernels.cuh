// The kernels of the scaling benchmark (bench/scaling_bench.cu, docs/multi-gpu.md "Scaling"):
// one source for both variants, compiled by NVRTC for the orch pipelines (scaling_dp.orch and
// scaling_halo.orch declare them `from` this file) and by nvcc for the step captured by hand
// (scaling_bench.cu includes it), so the two run the same code.
//
// Every result the benchmark checks is exact in f32 (see scaling_bench.cu), so the arithmetic
// here may be contracted into FMAs or not without changing a bit; the stencil adds in a fixed
// order, which the CPU reference repeats.
#pragma once

// ---- The data-parallel step: 4 layers, each a parameter vector w of p floats and a local batch
// of b samples x[b][p] (sample-major). The loss of a layer is mean over the batch of
// 0.5 * |w - x_k|^2, so its gradient is w - mean_k x_k; `d_in` -> `d_out` is the backward
// signal passed from layer to layer (one float, copied), which orders the layers' gradient
// kernels as a backward pass does, last layer first.
extern "C" __global__ void grad(unsigned p, unsigned b, float inv_b, const float* w, const float* x,
                                const float* d_in, float* g, float* d_out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) d_out[0] = d_in[0];
  if (i >= p) return;
  float s = 0.0f;
  for (unsigned k = 0; k < b; ++k) s += x[(unsigned long long)k * p + i];
  g[i] = w[i] - inv_b * s;
}

// Plain SGD on the summed gradient: w -= lr * (g / world_size).
extern "C" __global__ void sgd(unsigned p, float lr, float scale, float* w, const float* g) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p) w[i] -= lr * scale * g[i];
}

// ---- The halo-exchange solver: a 2-D Jacobi (heat) sweep on rows x nx interior cells per rank,
// stored with one halo row above and below ((rows + 2) x nx, row-major). Columns 0 and nx - 1
// are fixed boundary values; the halo rows of the first and last rank hold the grid's fixed top
// and bottom rows, the others' are refreshed from the neighbours before every sweep.
//
// orch has no send/recv: each rank packs its first and last interior rows into `edges`
// (2 x nx), one allgather gives every rank every rank's edges, and `unpack` copies the
// neighbours' rows into the halo: rank r - 1's last row above, rank r + 1's first row below.
extern "C" __global__ void pack(unsigned nx, unsigned rows, const float* u, float* edges) {
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nx) return;
  edges[c] = u[(unsigned long long)1 * nx + c];
  edges[nx + c] = u[(unsigned long long)rows * nx + c];
}

extern "C" __global__ void unpack(unsigned nx, unsigned rows, unsigned rank, unsigned world, const float* gathered,
                                  float* u) {
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= nx) return;
  if (rank > 0) u[c] = gathered[(unsigned long long)(rank - 1) * 2 * nx + nx + c];
  if (rank + 1 < world) u[(unsigned long long)(rows + 1) * nx + c] = gathered[(unsigned long long)(rank + 1) * 2 * nx + c];
}

// dst = the mean of src's four neighbours on the interior rows 1..rows, columns 1..nx-2.
// Launched with 32 x 8 blocks over (nx, rows).
extern "C" __global__ void sweep(unsigned nx, unsigned rows, const float* src, float* dst) {
  const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned r = blockIdx.y * blockDim.y + threadIdx.y + 1;
  if (c == 0 || c + 1 >= nx || r > rows) return;
  const unsigned long long i = (unsigned long long)r * nx + c;
  dst[i] = 0.25f * (((src[i - nx] + src[i + nx]) + src[i - 1]) + src[i + 1]);
}
