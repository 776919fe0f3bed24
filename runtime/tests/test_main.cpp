// orch_runtime_tests' main: CPU tests run everywhere; the GPU tests (test suite "gpu") run
// where a CUDA device is present and are skipped visibly, with the reason, where none is.
// Run with --test-suite=gpu alone, a machine without a GPU exits 77 (ctest: skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "artifact/artifact.h"
#include "runtime/tests/device_check.h"
#include "runtime/tests/test_util.h"
#include "support/test_paths.h"

namespace orch::test {

const std::string& gpu_unavailable_reason() {
  static const std::string reason = sm90_device_problem(0);
  return reason;
}

const std::string& multi_gpu_unavailable_reason() {
  static const std::string reason = [] {
    const std::string& one = gpu_unavailable_reason();
    if (!one.empty()) return one;
    return sm90_device_problem(1);
  }();
  return reason;
}

std::string checkout() { return test_paths::checkout(ORCH_RUNTIME_SOURCE_DIR); }

std::string pipelines_dir() { return test_paths::located("ORCH_PIPELINES_DIR", checkout() + "/pipelines"); }

std::map<std::string, RankScenario>& rank_scenarios() {
  static std::map<std::string, RankScenario> m;
  return m;
}

bool register_rank_scenario(const char* name, RankScenario fn) {
  rank_scenarios()[name] = fn;
  return true;
}

std::string examples_dir() { return test_paths::located("ORCH_EXAMPLES_DIR", checkout() + "/examples"); }

std::string nvshmem_home() {
  const char* given = std::getenv("ORCH_NVSHMEM_HOME");
  for (const char* h : {given, static_cast<const char*>(ORCH_TEST_NVSHMEM_HOME)}) {
    std::error_code ec;
    if (h && *h && std::filesystem::exists(std::string(h) + "/lib/libnvshmem_host.so.3", ec)) return h;
  }
  return {};
}

std::string temp_dir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "orch-runtime-tests-XXXXXX").string();
    char* d = mkdtemp(tmpl.data());
    return d ? std::string(d) : std::string("/tmp");
  }();
  return dir;
}

namespace {

// `options` (words for the shell) go to orchc, else $ORCH_ORCHC_OPTIONS: the whole suite runs
// with, say, ORCH_ORCHC_OPTIONS="--no-pdl --unroll 1" (scripts/gpu-check does).
std::string run_orchc(const std::string& src, const std::string& out, std::string* log,
                      const char* options = nullptr) {
  const std::string orchc = test_paths::located("ORCH_ORCHC", test_paths::built(ORCH_ORCHC_PATH, "compiler/orchc"));
  const std::string log_file = out + ".log";
  const char* env_options = std::getenv("ORCH_ORCHC_OPTIONS");
  const std::string flags = options ? options : env_options ? env_options : "";
  const std::string cmd = "'" + orchc + "' " + flags + " '" + src + "' -o '" + out + "' >'" + log_file + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log_file);
  std::stringstream s;
  s << in.rdbuf();
  if (log) *log = "$ " + cmd + "\n" + s.str();
  return rc == 0 ? out : std::string();
}

}  // namespace

std::string compile_example(const std::string& name, std::string* log) {
  static std::map<std::string, std::string> done;
  auto it = done.find(name);
  if (it != done.end()) return it->second;
  std::string out = run_orchc(examples_dir() + "/" + name + ".orch", temp_dir() + "/" + name + ".bin", log);
  if (!out.empty()) done[name] = out;
  return out;
}

OpenedExample open_example(const std::string& name) {
  std::string log;
  std::string path = compile_example(name, &log);
  INFO(log);
  REQUIRE(!path.empty());
  return open_artifact(path);
}

OpenedExample open_artifact(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  OpenedExample o;
  o.size = bytes.size();
  o.storage.assign(bytes.size() / 8 + 1, 0);
  std::memcpy(o.storage.data(), bytes.data(), bytes.size());
  auto r = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(o.storage.data()), o.size);
  INFO(path, ": ", r.error);
  REQUIRE(r.ok());
  o.p = r.pipeline;
  return o;
}

std::string compile_file(const std::string& name, const std::string& path, std::string* log) {
  return run_orchc(path, temp_dir() + "/" + name + ".bin", log);
}

std::string compile_source(const std::string& name, const std::string& source, std::string* log,
                           const char* options) {
  const std::string src = temp_dir() + "/" + name + ".orch";
  std::ofstream(src) << source;
  return run_orchc(src, temp_dir() + "/" + name + ".bin", log, options);
}

}  // namespace orch::test

int main(int argc, char** argv) {
  orch::test_paths::isolate_environment(orch::test::checkout(),
                                        (orch::test_paths::build_root() / "test-cache").string());
  // NVLink multicast stays off in every test and every rank process they start.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const char* worker_flag = "--orch-rank-worker=";
  if (argc > 1 && std::strncmp(argv[1], worker_flag, std::strlen(worker_flag)) == 0) {
    std::vector<std::string> args(argv + 2, argv + argc);
    return orch::test::run_rank_worker(argv[1] + std::strlen(worker_flag), args);
  }
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  bool gpu_only = false, multi_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--test-suite=gpu") || !std::strcmp(argv[i], "-ts=gpu")) gpu_only = true;
    if (!std::strcmp(argv[i], "--test-suite=multi-gpu") || !std::strcmp(argv[i], "-ts=multi-gpu")) multi_only = true;
  }
  const std::string& reason = orch::test::gpu_unavailable_reason();
  const std::string& multi_reason = orch::test::multi_gpu_unavailable_reason();
  if (!reason.empty()) {
    std::printf("SKIPPED: the GPU tests (test suite \"gpu\"): %s\n", reason.c_str());
    if (gpu_only) return 77;
    ctx.addFilter("test-suite-exclude", "gpu");
  }
  if (!multi_reason.empty()) {
    std::printf("SKIPPED: the multi-GPU tests (test suite \"multi-gpu\"): %s\n", multi_reason.c_str());
    if (multi_only) return 77;
    ctx.addFilter("test-suite-exclude", "multi-gpu");
  }
  // GPU cases named "with NCCL" need the library: without it they are skipped, visibly.
  std::string nccl_reason;
  if (reason.empty()) {
    auto nccl = orch::nccl_version();
    if (!nccl.ok()) nccl_reason = nccl.error().message();
  }
  bool nccl_only = false;
  for (int i = 1; i < argc; ++i)
    if (std::strstr(argv[i], "with NCCL") &&
        (std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0))
      nccl_only = true;
  if (!nccl_reason.empty()) {
    std::printf("SKIPPED: the GPU cases that need NCCL (\"*with NCCL*\"): %s\n",
                nccl_reason.c_str());
    if (nccl_only) return 77;
    ctx.addFilter("test-case-exclude", "*with NCCL*");
  }
  int rc = ctx.run();
  if (!nccl_reason.empty())
    std::printf("SKIPPED: the GPU cases that need NCCL (\"*with NCCL*\"): %s\n",
                nccl_reason.c_str());
  if (!reason.empty()) std::printf("SKIPPED: the GPU tests (test suite \"gpu\"): %s\n", reason.c_str());
  if (!multi_reason.empty())
    std::printf("SKIPPED: the multi-GPU tests (test suite \"multi-gpu\"): %s\n", multi_reason.c_str());
  std::error_code ec;
  if (!std::getenv("ORCH_KEEP_TEST_FILES")) std::filesystem::remove_all(orch::test::temp_dir(), ec);
  return rc;
}
