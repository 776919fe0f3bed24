// GPU tests (suite "gpu") of orch's one expression language:
// - the expression table's printed device code (tests/expr_table.cpp, generated into
//   expr_table_device.h at build time), compiled with NVRTC and run: every row must give the
//   table's value or error, as the evaluator and the printed host code do;
// - generated kernels on errors: a failed condition is false, a failed scalar update leaves the
//   scalar unchanged;
// - params converted exactly or refused (issue 9), by bind and set_param, in the C++ and C APIs,
//   with param_as_double reporting what the graph holds.
// NVRTC is opened with dlopen: the runtime's tests link no NVRTC (see runtime/CMakeLists.txt).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "expr_table_device.h"
#include "orch/orch.h"
#include "orch/runtime.h"
#include "runtime/tests/gpu_util.h"
#include "runtime/tests/test_util.h"

using namespace orch::test;

namespace {

// The NVRTC calls this test needs, from the toolkit's shared library.
struct Nvrtc {
  void* lib = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  std::string error;

  Nvrtc() {
    const std::string dir = ORCH_NVRTC_LIBRARY_DIR;
    for (const std::string& name : {std::string("libnvrtc.so.13"), dir + "/libnvrtc.so.13", std::string("libnvrtc.so"),
                                     dir + "/libnvrtc.so"}) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      const char* e = dlerror();
      error = std::string("cannot open libnvrtc: ") + (e ? e : "?");
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) error += std::string(error.empty() ? "" : ", ") + "no " + name;
    };
    sym(create, "nvrtcCreateProgram");
    sym(compile, "nvrtcCompileProgram");
    sym(log_size, "nvrtcGetProgramLogSize");
    sym(log, "nvrtcGetProgramLog");
    sym(cubin_size, "nvrtcGetCUBINSize");
    sym(cubin, "nvrtcGetCUBIN");
    sym(destroy, "nvrtcDestroyProgram");
  }
  ~Nvrtc() {
    if (lib) dlclose(lib);
  }
};

template <class T>
T read_buffer(const orch::Executable& x, const char* name, size_t index = 0) {
  T v{};
  CUDA_REQUIRE(cudaMemcpy(&v, static_cast<const char*>(x.buffer(name)) + index * sizeof(T), sizeof(T),
                               cudaMemcpyDefault));
  return v;
}

// A kernel that stores the bits of the params it gets, so the test sees what the GPU sees.
const char* kProbe = R"orch(pipeline probe
param h: f16 = 1.5
param b: bf16 = 2
param big: u64 = 7
param f: f32 = 0.25
buffer out: u64[4]
kernel probe(h: f16, b: bf16, big: u64, f: f32, out: out u64[]) source """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void probe(__half h, __nv_bfloat16 b, unsigned long long big, float f,
                                 unsigned long long* out) {
  out[0] = __half_as_ushort(h);
  out[1] = __bfloat16_as_ushort(b);
  out[2] = big;
  out[3] = __float_as_uint(f);
}
"""
graph main { probe<<<1, 1>>>(h, b, big, f, out) }
)orch";

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("expression table: the printed device code gives every row's result on the GPU") {
  Nvrtc nvrtc;
  INFO(nvrtc.error);
  REQUIRE(nvrtc.error.empty());
  int device = 0, major = 0, minor = 0;
  CUDA_REQUIRE(cudaGetDevice(&device));
  CUDA_REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string arch = "-arch=sm_" + std::to_string(major * 10 + minor);

  nvrtcProgram prog = nullptr;
  REQUIRE(nvrtc.create(&prog, kOrchTableSource, "expr_table.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  const char* opts[] = {arch.c_str(), "-std=c++17"};
  const nvrtcResult compiled = nvrtc.compile(prog, 2, opts);
  size_t log_size = 0;
  REQUIRE(nvrtc.log_size(prog, &log_size) == NVRTC_SUCCESS);
  std::string log(log_size, '\0');
  REQUIRE(nvrtc.log(prog, log.data()) == NVRTC_SUCCESS);
  INFO(log);
  REQUIRE(compiled == NVRTC_SUCCESS);
  size_t cubin_size = 0;
  REQUIRE(nvrtc.cubin_size(prog, &cubin_size) == NVRTC_SUCCESS);
  std::vector<char> cubin(cubin_size);
  REQUIRE(nvrtc.cubin(prog, cubin.data()) == NVRTC_SUCCESS);
  nvrtc.destroy(&prog);

  cudaLibrary_t library = nullptr;
  CUDA_REQUIRE(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  CUDA_REQUIRE(cudaLibraryGetKernel(&kernel, library, "orch_expr_table"));

  const size_t inputs = sizeof(kOrchTableInputs) / sizeof(kOrchTableInputs[0]);
  DeviceBuffer in(inputs * 8), bits(kOrchTableRows * 8), err(kOrchTableRows * sizeof(int));
  CUDA_REQUIRE(cudaMemcpy(in.p, kOrchTableInputs, inputs * 8, cudaMemcpyHostToDevice));
  // Poison the outputs, so a row the kernel never writes cannot pass.
  CUDA_REQUIRE(cudaMemset(bits.p, 0xA5, kOrchTableRows * 8));
  CUDA_REQUIRE(cudaMemset(err.p, 0xA5, kOrchTableRows * sizeof(int)));
  void* args[] = {&in.p, &bits.p, &err.p};
  CUDA_REQUIRE(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, nullptr));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<unsigned long long> got_bits(kOrchTableRows);
  std::vector<int> got_err(kOrchTableRows);
  CUDA_REQUIRE(cudaMemcpy(got_bits.data(), bits.p, kOrchTableRows * 8, cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaMemcpy(got_err.data(), err.p, kOrchTableRows * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaLibraryUnload(library));

  unsigned agree = 0;
  for (unsigned i = 0; i < kOrchTableRows; ++i) {
    const bool ok = orch_table_matches(i, got_err[i], got_bits[i]);
    agree += ok;
    char bits_hex[32];
    std::snprintf(bits_hex, sizeof bits_hex, "0x%llx", got_bits[i]);
    CHECK_MESSAGE(ok, "row ", std::string(kOrchTableExpect[i].row), ": the GPU gave error ", got_err[i], ", bits ", bits_hex);
  }
  MESSAGE(agree, " of ", kOrchTableRows, " rows agree on the GPU");
  CHECK(kOrchTableRows >= 200);
}

TEST_CASE("generated kernels: a failed condition is false, a failed scalar update changes nothing") {
  auto p = load_source("expr_faults", R"orch(pipeline expr_faults
buffer s: u8
buffer z: i32
buffer taken: i32
buffer loops: i32
graph main {
  fill s = 200
  fill z = 0
  fill loops = 0
  s = s * 2
  if 100 / z > 0 { fill taken = 1 } else { fill taken = 2 }
  while 1 / z > 0 && loops < 5 { loops += 1 }
}
)orch");
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto x = p->instantiate(orch::Bindings(), stream);
  ORCH_REQUIRE_OK(x);
  ORCH_REQUIRE_OK(x.value()->launch(stream));
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CHECK(read_buffer<uint8_t>(*x.value(), "s") == 200);    // 400 does not fit u8: unchanged
  CHECK(read_buffer<int32_t>(*x.value(), "taken") == 2);  // division by zero: the condition is false
  CHECK(read_buffer<int32_t>(*x.value(), "loops") == 0);  // ... and the loop never runs
  x.value().reset();
  cudaStreamDestroy(stream);
}

TEST_CASE("params are converted exactly or refused, by bind and set_param (C++ API)") {
  auto p = load_source("expr_probe", kProbe);
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto refused = [&](orch::Bindings b, const char* why) {
    auto x = p->instantiate(b, stream);
    REQUIRE_FALSE(x.ok());
    INFO(x.error().to_string());
    CHECK(x.error().code() == orch::ErrorCode::InvalidValue);
    CHECK(x.error().message().find(why) != std::string::npos);
  };
  refused(orch::Bindings().param("h", 1e6), "does not fit f16");
  refused(orch::Bindings().param("h", 65520.0), "does not fit f16");
  refused(orch::Bindings().param("b", 1e39), "does not fit bf16");
  refused(orch::Bindings().param("b", 3.5e38), "does not fit bf16");
  refused(orch::Bindings().param("f", 16777217), "not exactly representable in f32");
  refused(orch::Bindings().param("big", -1), "does not fit u64");

  // UINT64_MAX binds and reaches the kernel; 65519 rounds to f16's 65504, and that is what
  // param_as_double reports.
  auto x = p->instantiate(orch::Bindings().param("big", UINT64_MAX).param("h", 65519.0), stream);
  ORCH_REQUIRE_OK(x);
  orch::Executable& e = *x.value();
  ORCH_REQUIRE_OK(e.launch(stream));
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CHECK(read_buffer<uint64_t>(e, "out", 0) == 0x7bff);
  CHECK(read_buffer<uint64_t>(e, "out", 1) == 0x4000);  // bf16 2
  CHECK(read_buffer<uint64_t>(e, "out", 2) == UINT64_MAX);
  CHECK(read_buffer<uint64_t>(e, "out", 3) == 0x3e800000);  // f32 0.25
  CHECK(*e.param_as_double("h") == 65504.0);

  // Refused set_params change nothing: not the graph, not param_as_double.
  CHECK(e.set_param("h", 1e6).error().code() == orch::ErrorCode::InvalidValue);
  CHECK(e.set_param("h", 65520.0).error().code() == orch::ErrorCode::InvalidValue);
  CHECK(e.set_param("b", 3.5e38).error().code() == orch::ErrorCode::InvalidValue);
  CHECK(e.set_param("f", 16777217).error().code() == orch::ErrorCode::InvalidValue);
  CHECK(*e.param_as_double("h") == 65504.0);
  CHECK(*e.param_as_double("f") == 0.25);
  // Accepted ones are exact: 1e19 is an integer within u64, 0.1 is held as f32 0.1.
  ORCH_CHECK_OK(e.set_param("big", 1e19));
  ORCH_CHECK_OK(e.set_param("f", 0.1));
  CHECK(*e.param_as_double("f") == static_cast<double>(0.1f));
  ORCH_REQUIRE_OK(e.launch(stream));
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  CHECK(read_buffer<uint64_t>(e, "out", 0) == 0x7bff);
  CHECK(read_buffer<uint64_t>(e, "out", 2) == 10000000000000000000ull);
  float f = 0;
  const uint32_t fbits = static_cast<uint32_t>(read_buffer<uint64_t>(e, "out", 3));
  std::memcpy(&f, &fbits, 4);
  CHECK(f == 0.1f);
  x.value().reset();
  cudaStreamDestroy(stream);
}

TEST_CASE("params are converted exactly or refused, by bind and set_param (C API)") {
  std::string log;
  std::string path = orch::test::compile_source("expr_probe_c", kProbe, &log);
  INFO(log);
  REQUIRE(!path.empty());
  orch_pipeline* p = nullptr;
  REQUIRE(orch_pipeline_load(path.c_str(), &p) == nullptr);
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  orch_bindings* bad = orch_bindings_create();
  orch_bindings_param_f64(bad, "h", 1e6);
  orch_executable* x = nullptr;
  orch_error* e = orch_instantiate(p, bad, stream, &x);
  REQUIRE(e != nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_VALUE);
  CHECK(std::string(orch_error_message(e)).find("does not fit f16") != std::string::npos);
  orch_error_destroy(e);
  orch_bindings_destroy(bad);

  orch_bindings* b = orch_bindings_create();
  orch_bindings_param_u64(b, "big", UINT64_MAX);
  orch_bindings_param_f64(b, "h", 65519.0);
  REQUIRE(orch_instantiate(p, b, stream, &x) == nullptr);
  e = orch_set_param_f64(x, "h", 65520.0);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_VALUE);
  orch_error_destroy(e);
  e = orch_set_param_f64(x, "b", 1e39);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_VALUE);
  orch_error_destroy(e);
  e = orch_set_param_i64(x, "f", 16777217);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_VALUE);
  orch_error_destroy(e);
  e = orch_set_param_i64(x, "big", -1);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_VALUE);
  orch_error_destroy(e);
  REQUIRE(orch_set_param_f64(x, "f", 0.5) == nullptr);
  REQUIRE(orch_launch(x, stream) == nullptr);
  CUDA_REQUIRE(cudaStreamSynchronize(stream));
  uint64_t out[4] = {};
  CUDA_REQUIRE(cudaMemcpy(out, orch_executable_buffer(x, "out"), sizeof out, cudaMemcpyDefault));
  CHECK(out[0] == 0x7bff);  // 65519 held as 65504; 65520 was refused
  CHECK(out[2] == UINT64_MAX);
  CHECK(out[3] == 0x3f000000);  // f32 0.5
  orch_executable_destroy(x);
  orch_bindings_destroy(b);
  orch_pipeline_destroy(p);
  cudaStreamDestroy(stream);
}

}  // TEST_SUITE("gpu")
