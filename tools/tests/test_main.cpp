// orch_tools_tests' main. The CPU cases run everywhere. The GPU cases (test suite "gpu") need a
// CUDA device: where there is none they are skipped visibly (a SKIPPED line with the reason),
// and run alone (--test-suite=gpu) the executable exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "artifact/artifact.h"
#include "tools/orch_run/options.h"
#include "tools/orch_run/runner.h"
#include "runtime/tests/device_check.h"
#include "support/test_paths.h"
#include "tools/tests/test_util.h"

namespace orch::tools_test {

const std::string& gpu_unavailable_reason() {
  static const std::string reason = orch::test::sm90_device_problem(0);
  return reason;
}

const std::string& temp_dir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "orch-tools-tests-XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    return d ? std::string(d) : std::string("/tmp");
  }();
  return dir;
}

std::string checkout() { return test_paths::checkout(ORCH_TOOLS_SOURCE_DIR); }
std::string examples_dir() { return test_paths::located("ORCH_EXAMPLES_DIR", checkout() + "/examples"); }
std::string pipelines_dir() { return test_paths::located("ORCH_PIPELINES_DIR", checkout() + "/pipelines"); }
std::string targets_dir() { return checkout() + "/targets"; }
std::string orchc_path() {
  return test_paths::located("ORCH_ORCHC", test_paths::built(ORCH_TOOLS_ORCHC, "compiler/orchc"));
}
std::string orch_run_path() {
  return test_paths::located("ORCH_RUN", test_paths::built(ORCH_RUN_PATH, "tools/orch-run"));
}

std::string compiled(const std::string& orch_file, std::string* log, const char* options) {
  // $ORCH_ORCHC_OPTIONS: orchc's options for every pipeline the tests compile that names none.
  if (!options) options = std::getenv("ORCH_ORCHC_OPTIONS");
  const std::string key = orch_file + '\n' + (options ? options : "");
  static std::map<std::string, std::pair<std::string, std::string>> done;  // path and options: bin, log
  auto it = done.find(key);
  if (it == done.end()) {
    const std::string orchc = orchc_path();
    const std::string stem = std::filesystem::path(orch_file).stem().string();
    const std::string out = temp_dir() + "/" + stem + "-" + std::to_string(done.size()) + ".bin";
    const std::string log_file = out + ".log";
    const std::string cmd = "'" + orchc + "' " + (options ? options : "") + " '" + orch_file + "' -o '" + out +
                            "' >'" + log_file + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(log_file);
    std::stringstream s;
    s << in.rdbuf();
    it = done.emplace(key, std::make_pair(rc == 0 ? out : std::string(), "$ " + cmd + "\n" + s.str())).first;
  }
  if (log) *log = it->second.second;
  return it->second.first;
}

std::string compiled_saxpy(std::string* log) {
  return compiled(checkout() + "/examples/embed_saxpy/saxpy.orch", log);
}

// A top-level fill of 16 KiB (what CUDA may run as its memset32 kernel) and a fill of the same
// size inside a while body: the case issue 13 reported attributed to no statement, or to the
// loop's fill. Also runs on the GPU (gpu_observe_test.cpp): acc = rounds * src after a launch.
const char* fills_orch() {
  return R"(// Fills in and out of a loop.
pipeline fills
target sm_90

param n: u32 = 4096
param rounds: u32 = 3

buffer src: f32[n]
buffer tmp: f32[n]
buffer acc: f32[n]
buffer i: u32

kernel step(n: u32, src: in f32[], tmp: inout f32[], acc: inout f32[]) source """
extern "C" __global__ void step(unsigned n, const float* src, float* tmp, float* acc) {
  unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    tmp[k] += src[k];
    acc[k] += tmp[k];
  }
}
"""

graph main {
  fill acc = 0
  fill i = 0
  while i < rounds {
    fill tmp = 0
    step<<<ceil_div(n, 256), 256>>>(n, src, tmp, acc)
    i += 1
  }
}
)";
}

const char* nested_orch() {
  return R"(// Two sibling conditional bodies, each with a conditional body nested in it and a node after
// that: which order CUDA numbers nested graphs' nodes in an executable graph.
pipeline nested
target sm_90

param n: u32 = 4096
param go: u32 = 1

buffer x: f32[n]
buffer ya: f32[n]
buffer za: f32[n]
buffer wa: f32[n]
buffer yb: f32[n]
buffer zb: f32[n]
buffer wb: f32[n]

kernel a1(n: u32, x: in f32[], ya: out f32[]) source """
extern "C" __global__ void a1(unsigned n, const float* x, float* ya) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ya[i] = 2.0f * x[i] + 1.0f;
}
"""
kernel a2(n: u32, ya: in f32[], za: out f32[]) source """
extern "C" __global__ void a2(unsigned n, const float* ya, float* za) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) za[i] = 3.0f * ya[i];
}
"""
kernel a3(n: u32, za: in f32[], wa: out f32[]) source """
extern "C" __global__ void a3(unsigned n, const float* za, float* wa) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) wa[i] = za[i] - 0.5f;
}
"""
kernel b1(n: u32, x: in f32[], yb: out f32[]) source """
extern "C" __global__ void b1(unsigned n, const float* x, float* yb) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) yb[i] = x[i] - 4.0f;
}
"""
kernel b2(n: u32, yb: in f32[], zb: out f32[]) source """
extern "C" __global__ void b2(unsigned n, const float* yb, float* zb) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) zb[i] = yb[i] * yb[i];
}
"""
kernel b3(n: u32, zb: in f32[], wb: out f32[]) source """
extern "C" __global__ void b3(unsigned n, const float* zb, float* wb) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) wb[i] = zb[i] + 7.0f;
}
"""

graph main {
  if go == 1 {
    a1<<<ceil_div(n, 256), 256>>>(n, x, ya)
    if go != 0 {
      a2<<<ceil_div(n, 256), 256>>>(n, ya, za)
    }
    a3<<<ceil_div(n, 256), 256>>>(n, za, wa)
  }
  if go > 0 {
    b1<<<ceil_div(n, 256), 256>>>(n, x, yb)
    if go < 2 {
      b2<<<ceil_div(n, 256), 256>>>(n, yb, zb)
    }
    b3<<<ceil_div(n, 256), 256>>>(n, zb, wb)
  }
}
)";
}

const char* reduce_orch() {
  return R"(pipeline reduce
target sm_90
param n: u32 = 65536
buffer g: f32[n]
buffer s: f32[n]
buffer r: f32[n]
comm world
kernel twice(n: u32, g: in f32[], s: out f32[]) source """
extern "C" __global__ void twice(unsigned n, const float* g, float* s) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) s[i] = 2.0f * g[i];
}
"""
graph main {
  twice<<<ceil_div(n, 256), 256>>>(n, g, s)
  allreduce sum s -> r on world
}
)";
}

LoadedPipeline load_pipeline(const std::string& bin) {
  LoadedPipeline l;
  const std::string bytes = read_all(bin);
  l.storage.assign((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(l.storage.data(), bytes.data(), bytes.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(l.storage.data()), bytes.size());
  if (opened.ok()) l.pipeline = opened.pipeline;
  else l.error = opened.error;
  return l;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string test_out_dir() {
  const char* env = std::getenv("ORCH_TEST_OUT");
  return env && *env ? env : "";
}

RunOutput orch_run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  orch::run::Options options;
  RunOutput r;
  const auto parsed = orch::run::parse_command_line(args, &options, out, err);
  r.exit_code = parsed.run ? orch::run::run(options, out, err) : parsed.exit_code;
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace orch::tools_test

int main(int argc, char** argv) {
  orch::test_paths::isolate_environment(orch::tools_test::checkout(),
                                        (orch::test_paths::build_root() / "test-cache").string());
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  bool gpu_only = false;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--test-suite=gpu") || !std::strcmp(argv[i], "-ts=gpu")) gpu_only = true;
  const std::string& reason = orch::tools_test::gpu_unavailable_reason();
  if (!reason.empty()) {
    std::printf("SKIPPED: the GPU tests (test suite \"gpu\"): %s\n", reason.c_str());
    if (gpu_only) return 77;
    ctx.addFilter("test-suite-exclude", "gpu");
  }
  const int rc = ctx.run();
  if (!reason.empty()) std::printf("SKIPPED: the GPU tests (test suite \"gpu\"): %s\n", reason.c_str());
  std::error_code ec;
  if (!std::getenv("ORCH_KEEP_TEST_FILES")) std::filesystem::remove_all(orch::tools_test::temp_dir(), ec);
  return rc;
}
