// embed_saxpy: an application with an orch pipeline built into its own binary.
//
// CMakeLists.txt calls orch_add_pipeline(embed_saxpy saxpy.orch): orchc compiles saxpy.orch at
// build time and saxpy_pipeline.h declares the bytes. The program fills x and y with random
// numbers, binds its own device memory to the pipeline's buffers, launches the pipeline, checks
// y = a * x + y against a CPU reference, then changes `a` in place (no new instantiation),
// launches again and checks again.
//
// Usage: embed_saxpy [n]          (default n = 1048576)
// Exit codes: 0 the results match, or there is no CUDA device: then it prints
//             "embed_saxpy: skipped: no CUDA device: <why>" (a machine without a GPU, such as
//             CI, is not the example's failure); 1 an error or a wrong result.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <orch/runtime.h>

#include "saxpy_pipeline.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "embed_saxpy: %s\n", message.c_str());
  return 1;
}

bool cuda_ok(cudaError_t e, const char* what, std::string* error) {
  if (e == cudaSuccess) return true;
  *error = std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  return false;
}

// Device memory that frees itself.
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

// Largest |gpu - reference| relative to max(1, |reference|). The GPU may contract a * x + y
// into one fused multiply-add, so the two differ by rounding only.
double max_error(const std::vector<float>& gpu, const std::vector<float>& reference) {
  double worst = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double r = reference[i];
    worst = std::fmax(worst, std::fabs(gpu[i] - r) / std::fmax(1.0, std::fabs(r)));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned n = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 1u << 20;
  if (n == 0) return fail("n must be a positive number");
  const size_t bytes = size_t{n} * sizeof(float);

  // A machine without a GPU (or without a driver) skips, visibly.
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("embed_saxpy: skipped: no CUDA device: %s\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    return 0;
  }

  // The pipeline, from the bytes orch_add_pipeline embedded.
  auto pipeline = orch::Pipeline::load_from_memory(saxpy_pipeline, saxpy_pipeline_size);
  if (!pipeline) return fail(pipeline.error().to_string());
  std::printf("embed_saxpy: pipeline %s (%zu bytes embedded), %s\n", (*pipeline)->name().c_str(),
              static_cast<size_t>(saxpy_pipeline_size), (*pipeline)->image().c_str());

  // Random inputs, and the application's own device memory for x and y.
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(n), y(n);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = uniform(rng);
    y[i] = uniform(rng);
  }
  std::string error;
  DeviceBuffer dx, dy;
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaMalloc(&dx.ptr, bytes), "cudaMalloc", &error) ||
      !cuda_ok(cudaMalloc(&dy.ptr, bytes), "cudaMalloc", &error) ||
      !cuda_ok(cudaMemcpy(dx.ptr, x.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy", &error) ||
      !cuda_ok(cudaMemcpy(dy.ptr, y.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy", &error) ||
      !cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate", &error))
    return fail(error);

  int rc = 0;
  {
    // Bind params and buffers by name; the runtime checks each against the declarations.
    float a = 3.0f;
    orch::Bindings bindings;
    bindings.param("n", n).param("a", a).buffer("x", dx.ptr, bytes).buffer("y", dy.ptr, bytes);
    auto exec = (*pipeline)->instantiate(bindings, stream);
    if (!exec) return fail(exec.error().to_string());

    std::vector<float> out(n), reference(n);
    for (int round = 0; round < 2 && rc == 0; ++round) {
      if (round == 1) {
        // Patched in the instantiated graph: no rebuild, takes effect at the next launch.
        a = -0.5f;
        orch::Status s = exec.value()->set_param("a", a);
        if (!s) return fail(s.error().to_string());
      }
      orch::Status s = exec.value()->launch(stream);
      if (!s) return fail(s.error().to_string());
      if (!cuda_ok(cudaStreamSynchronize(stream), "the launch", &error) ||
          !cuda_ok(cudaMemcpy(out.data(), dy.ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy", &error))
        return fail(error);
      for (unsigned i = 0; i < n; ++i) reference[i] = a * x[i] + y[i];
      const double err = max_error(out, reference);
      std::printf("embed_saxpy: launch %d, a = %g: max relative error %.3g over %u elements\n", round + 1,
                  static_cast<double>(a), err, n);
      if (err > 1e-6) {
        rc = fail("the GPU result differs from the CPU reference");
      }
      y = out;  // y is updated in place: the next launch starts from this result
    }
  }  // the Executable goes before the stream (everything it launched has finished)
  cudaStreamDestroy(stream);
  if (rc == 0) std::printf("embed_saxpy: ok\n");
  return rc;
}
