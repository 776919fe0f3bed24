// Helpers of the runtime's GPU tests (suite "gpu"), shared by every *_gpu_test.cpp: a checked
// CUDA call, fresh random inputs, RAII streams and memory, pipelines compiled from text and
// instantiated, buffers read and written, and a tolerance check.
#pragma once

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "orch/runtime.h"
#include "runtime/tests/test_util.h"

// REQUIREs that a CUDA call succeeded, naming the call and the error.
#define CUDA_REQUIRE(x)                                                \
  do {                                                                 \
    cudaError_t e_ = (x);                                              \
    INFO(#x, ": ", cudaGetErrorName(e_), " ", cudaGetErrorString(e_)); \
    REQUIRE(e_ == cudaSuccess);                                        \
  } while (0)

namespace orch::test {

// One generator for the process, seeded afresh each run: the inputs are never the same twice.
inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

inline std::vector<float> random_floats(size_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng());
  return v;
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s; }
};

// Device memory the test owns.
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { CUDA_REQUIRE(cudaMalloc(&p, n)); }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Pinned, device-mapped host memory the test owns.
struct PinnedBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit PinnedBuffer(size_t n) : bytes(n) { CUDA_REQUIRE(cudaHostAlloc(&p, n, cudaHostAllocMapped)); }
  ~PinnedBuffer() {
    if (p) cudaFreeHost(p);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  float* f() { return static_cast<float*>(p); }
};

// A pipeline given as text, compiled with orchc (with `options` instead of $ORCH_ORCHC_OPTIONS
// when given) and loaded.
inline std::unique_ptr<Pipeline> load_source(const std::string& name, const std::string& source,
                                             const char* options = nullptr) {
  std::string log;
  std::string path = compile_source(name, source, &log, options);
  INFO(log);
  REQUIRE(!path.empty());
  auto p = Pipeline::load(path);
  ORCH_REQUIRE_OK(p);
  return std::move(p.value());
}

inline std::unique_ptr<Executable> instantiate(const Pipeline& p, const Bindings& b, cudaStream_t s) {
  auto x = p.instantiate(b, s);
  ORCH_REQUIRE_OK(x);
  return std::move(x.value());
}

// One launch, waited for; a CUDA error left behind fails the test.
inline void run(Executable& x, cudaStream_t s) {
  ORCH_REQUIRE_OK(x.launch(s));
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  CUDA_REQUIRE(cudaGetLastError());
}

template <class T>
std::vector<T> read(const Executable& x, const char* name, size_t count) {
  std::vector<T> out(count);
  void* p = x.buffer(name);
  REQUIRE(p != nullptr);
  CUDA_REQUIRE(cudaMemcpy(out.data(), p, count * sizeof(T), cudaMemcpyDefault));
  return out;
}

template <class T>
void write(Executable& x, const char* name, const std::vector<T>& v) {
  void* p = x.buffer(name);
  REQUIRE(p != nullptr);
  REQUIRE(x.buffer_bytes(name) >= v.size() * sizeof(T));
  CUDA_REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyDefault));
  // A pageable upload may still be in flight when cudaMemcpy returns, and the test streams
  // do not wait for the legacy stream.
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

// |got - want| <= tol * max(1, |want|) everywhere (NaN matches NaN); reports the first mismatch.
template <class T>
void check_close(const std::vector<T>& got, const std::vector<T>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    const bool ok = std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w)) || (std::isnan(g) && std::isnan(w));
    if (!ok && bad++ == 0) first = i;
  }
  INFO(std::string(what), ": ", bad, " of ", got.size(), " differ; first at ", first, ": got ",
       got.empty() ? 0.0 : double(got[first]), ", want ", want.empty() ? 0.0 : double(want[first]));
  CHECK(bad == 0);
}

}  // namespace orch::test
