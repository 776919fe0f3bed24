// The kernels of examples/moe.orch (`from "moe.cu"`): eight experts, one token each of
// `hidden` floats.

// One block: histogram the tokens by expert, write each expert's count and first slot, list
// the tokens grouped by expert in `order`, then launch the device graph of every expert that
// got a token (fire-and-forget: the experts run concurrently) and queue `finish` as the tail
// launch, which CUDA starts only after every fire-and-forget launch has completed.
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
  __threadfence();  // the experts read order, counts and offsets
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int e = 0; e < 8; ++e)
      if (hist[e] > 0) cudaGraphLaunch(experts[e], cudaStreamGraphFireAndForget);
    cudaGraphLaunch(finish, cudaStreamGraphTailLaunch);
  }
}

// Expert e, block b: the tokens in slots [64b, 64b + 64) of e's group. The "weights" are a
// gain of 1 + e/2, enough to tell the experts apart in a test.
extern "C" __global__ void expert_ffn(unsigned e, unsigned hidden, const float* x, const int* counts,
                                      const int* offsets, const int* order, float* y) {
  const int count = counts[e];
  const int first = (int)blockIdx.x * 64;
  if (first >= count) return;
  const int last = min(first + 64, count);
  const float gain = 1.0f + 0.5f * (float)e;
  for (int k = first; k < last; ++k) {
    const size_t row = (size_t)order[offsets[e] + k] * hidden;
    for (unsigned h = threadIdx.x; h < hidden; h += blockDim.x) y[row + h] = gain * x[row + h];
  }
}

// out = x + y: the residual connection around the experts.
extern "C" __global__ void combine(unsigned tokens, unsigned hidden, const float* x, const float* y, float* out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (size_t)tokens * hidden) out[i] = x[i] + y[i];
}
