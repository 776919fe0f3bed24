// The kernel of examples/jacobi.orch, kept in its own file (`from "jacobi.cu"`).
// One Jacobi sweep of the 1-D Poisson problem -u'' = rhs with zero boundaries:
//   dst[i] = (rhs[i] + src[i-1] + src[i+1]) / 2
// and the largest |dst[i] - src[i]| folded into *residual. Non-negative floats order like
// their bit patterns as ints, so an integer atomicMax on the bits is a float max.
extern "C" __global__ void sweep(unsigned n, const float* src, const float* rhs, float* dst, float* residual) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float left = i > 0 ? src[i - 1] : 0.0f;
  const float right = i + 1 < n ? src[i + 1] : 0.0f;
  const float next = 0.5f * (rhs[i] + left + right);
  dst[i] = next;
  atomicMax(reinterpret_cast<int*>(residual), __float_as_int(fabsf(next - src[i])));
}
