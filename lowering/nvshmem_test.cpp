// Kernels that call NVSHMEM's device API (lowering/nvshmem.h): found by their code, compiled by
// NVRTC with -rdc and linked by nvJitLink against NVSHMEM's device library into CUBINs, no PTX;
// E0904 naming what is missing where NVSHMEM is not found. The compile-and-link cases need
// NVSHMEM (ORCH_TEST_NVSHMEM_HOME: scripts/fetch-nvshmem's pinned 3.4.5 in .nvshmem/, found by
// CMake); without it they say so and pass. No GPU needed.
#include "lowering/nvshmem.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "compiler/check.h"
#include "lowering/kernel_compiler.h"
#include "lowering/lir.h"
#include "lowering/lower.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

// The pinned NVSHMEM, or empty.
std::string test_nvshmem_home() {
  return ORCH_TEST_NVSHMEM_HOME;
}

// Sets (or unsets, for nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "orch_nvshmem_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One PE puts `n` floats into the next PE's `dst` and then signals it; every PE waits for its
// own signal. What the GPU test (runtime/tests/nvshmem_gpu_test.cpp) runs on two GPUs.
const char* kPutSignal = R"(#include <nvshmem.h>
#include <nvshmemx.h>
extern "C" __global__ void put_signal(unsigned n, const float* src, float* dst, unsigned long long* sig) {
  const int peer = (nvshmem_my_pe() + 1) % nvshmem_n_pes();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) nvshmem_float_p(dst + i, src[i], peer);
  __syncthreads();
  if (threadIdx.x == 0) {
    nvshmem_fence();
    nvshmemx_signal_op(sig, 1, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
  }
}
)";

const char* kPlain = R"(extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

KernelSource source(std::string name, std::string code) {
  KernelSource s;
  s.name = name;
  s.file_name = name + ".cu";
  s.code = std::move(code);
  return s;
}

CompileOptions options(std::vector<std::string> archs, std::string nvshmem_home) {
  CompileOptions o;
  o.archs = std::move(archs);
  o.use_cache = false;
  o.nvshmem_home = std::move(nvshmem_home);
  return o;
}

bool elf_has_symbol(const std::string& image, const std::string& name) {
  // The symbol's name in the ELF string table, NUL on both sides.
  return image.find(std::string(1, '\0') + name + std::string(1, '\0')) != std::string::npos;
}

TEST_SUITE("nvshmem") {

TEST_CASE("kernels that call NVSHMEM are found by their code") {
  CHECK(nvshmem::mentions_nvshmem("#include <nvshmem.h>\n"));
  CHECK(nvshmem::mentions_nvshmem("#include \"nvshmemx.h\"\n"));
  CHECK(nvshmem::mentions_nvshmem("x = nvshmem_my_pe();"));
  CHECK(nvshmem::mentions_nvshmem("nvshmemx_signal_op(s, 1, NVSHMEM_SIGNAL_SET, p);"));
  CHECK_FALSE(nvshmem::mentions_nvshmem(kPlain));
  // Not the tail of another identifier, nor a name that only starts alike.
  CHECK_FALSE(nvshmem::mentions_nvshmem("int my_nvshmem_count = 0; int nvshmemish = 1;"));
}

TEST_CASE("NVSHMEM is looked for in --nvshmem, then ORCH_NVSHMEM_HOME, then NVSHMEM_HOME") {
  ScopedEnv a("ORCH_NVSHMEM_HOME", std::nullopt), b("NVSHMEM_HOME", std::nullopt);
  nvshmem::DeviceLibrary none = nvshmem::find_device_library("");
  CHECK(none.home.empty());
  CHECK(none.problem.find("NVSHMEM was not found: set ORCH_NVSHMEM_HOME") == 0);
  TempDir dir;
  {
    ScopedEnv c("NVSHMEM_HOME", dir.path());
    nvshmem::DeviceLibrary d = nvshmem::find_device_library("");
    CHECK(d.from == "NVSHMEM_HOME");
    ScopedEnv e("ORCH_NVSHMEM_HOME", dir.path() + "/orch");
    CHECK(nvshmem::find_device_library("").from == "ORCH_NVSHMEM_HOME");
    CHECK(nvshmem::find_device_library("/given").from == "--nvshmem");
    CHECK(nvshmem::find_device_library("/given").home == "/given");
  }
  // A folder without the device library names the file it lacks.
  fs::create_directories(fs::path(dir.path()) / "include");
  std::ofstream(fs::path(dir.path()) / "include" / "nvshmem.h") << "\n";
  nvshmem::DeviceLibrary partial = nvshmem::find_device_library(dir.path());
  CHECK(partial.problem == "NVSHMEM at '" + dir.path() + "' (--nvshmem) is incomplete: " + dir.path() +
                               "/lib/libnvshmem_device.a not found; it needs include/nvshmem.h and "
                               "lib/libnvshmem_device.a");
  // Both files but no version header: which release it is cannot be known.
  fs::create_directories(fs::path(dir.path()) / "lib");
  std::ofstream(fs::path(dir.path()) / "lib" / "libnvshmem_device.a") << "!<arch>\n";
  CHECK(nvshmem::find_device_library(dir.path()).problem.find("has no readable include/non_abi/nvshmem_version.h") !=
        std::string::npos);
}

TEST_CASE("a kernel that calls NVSHMEM without NVSHMEM is E0904, naming what to set; other kernels compile") {
  ScopedEnv a("ORCH_NVSHMEM_HOME", std::nullopt), b("NVSHMEM_HOME", std::nullopt);
  DiagnosticEngine diags;
  auto out = compile_kernels({source("put_signal", kPutSignal), source("scale", kPlain)},
                             options({"sm_90"}, ""), diags);
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[0].has_value());
  REQUIRE(out[1].has_value());
  CHECK_FALSE(out[1]->nvshmem);
  CHECK(out[1]->ptx_arch == "compute_90");  // untouched: PTX as ever
  REQUIRE(diags.all().size() == 1);
  CHECK(diags.all()[0].code == "E0904");
  CHECK(diags.all()[0].message ==
        "kernel 'put_signal' calls NVSHMEM's device API, but NVSHMEM was not found: set ORCH_NVSHMEM_HOME "
        "(or NVSHMEM_HOME, or orchc --nvshmem) to the folder that holds include/nvshmem.h and "
        "lib/libnvshmem_device.a (the nvidia-nvshmem-cu13 3.4.5 wheel's nvidia/nvshmem)");
}

TEST_CASE("a kernel that calls NVSHMEM compiles with -rdc and links with libnvshmem_device.a into CUBINs") {
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build (scripts/fetch-nvshmem, then configure again): not compiled");
    return;
  }
  DiagnosticEngine diags;
  auto out = compile_kernels({source("put_signal", kPutSignal)}, options({"sm_80", "sm_90"}, home), diags);
  for (const Diagnostic& d : diags.all()) INFO(d.code << ": " << d.message);
  REQUIRE(out[0].has_value());
  CHECK_FALSE(diags.has_errors());
  const CompiledKernel& k = *out[0];
  CHECK(k.nvshmem);
  CHECK(k.nvshmem_version == "3.4.5");
  CHECK(k.lowered_name == "put_signal");
  REQUIRE(k.cubins.size() == 2);
  for (const KernelImage& img : k.cubins) {
    CAPTURE(img.arch);
    CHECK(img.cubin.rfind("\x7f" "ELF", 0) == 0);
    CHECK(img.cubin[16] == 2);  // ET_EXEC: fully linked
    // The device state nvshmemx_cumodule_init fills in, linked from the device library.
    CHECK(elf_has_symbol(img.cubin, "nvshmemi_device_state_d"));
    CHECK(elf_has_symbol(img.cubin, "put_signal"));
  }
  // No PTX: relocatable PTX would name NVSHMEM's symbols, which no driver resolves.
  CHECK(k.ptx.empty());
  CHECK(k.ptx_arch.empty());
  CHECK_FALSE(k.ptx_relocatable);
}

TEST_CASE("errors in an NVSHMEM kernel keep their lines (NVSHMEM's prelude is not counted)") {
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build: not compiled");
    return;
  }
  SourceManager sm;
  KernelSource s = source("bad", "#include <nvshmem.h>\n"
                                 "extern \"C\" __global__ void bad(float* x) {\n"
                                 "  nvshmem_float_p(x, 1.0f, nope);\n"
                                 "}\n");
  s.origin = {sm.add("bad.cu", s.code), {1, 1}, {1, 1}};
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, options({"sm_90"}, home), diags);
  CHECK_FALSE(out[0].has_value());
  REQUIRE(diags.all().size() == 1);
  const Diagnostic& d = diags.all()[0];
  CHECK(d.code == "E0901");
  CHECK(d.message == "identifier \"nope\" is undefined");
  CHECK(d.range.begin.line == 3);
  CHECK(d.range.begin.col == 28);
}

TEST_CASE("NVSHMEM kernels are cached like others: a second compile reads every CUBIN back") {
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build: not compiled");
    return;
  }
  TempDir cache;
  CompileOptions o = options({"sm_90"}, home);
  o.use_cache = true;
  o.cache_dir = cache.path();
  DiagnosticEngine first, second;
  auto a = compile_kernels({source("put_signal", kPutSignal)}, o, first);
  auto b = compile_kernels({source("put_signal", kPutSignal)}, o, second);
  REQUIRE(a[0].has_value());
  REQUIRE(b[0].has_value());
  CHECK(a[0]->cache_misses == 1);  // the CUBIN; no PTX target
  CHECK(b[0]->cache_hits == 1);
  CHECK(b[0]->cache_misses == 0);
  CHECK(b[0]->nvshmem);
  CHECK(b[0]->cubins.at(0).cubin == a[0]->cubins.at(0).cubin);
  CHECK(b[0]->cubins.at(0).from_cache);
}

TEST_CASE("a kernel that calls NVSHMEM and sets a conditional links with cudadevrt and NVSHMEM in one CUBIN") {
  // What a `while kernel` body that exchanges with a peer compiles to: both libraries, one image.
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build: not compiled");
    return;
  }
  KernelSource s = source("pingpong", R"(#include <nvshmem.h>
extern "C" __global__ void pingpong(int* round, int* buf, unsigned long long* sig, int rounds,
                                    cudaGraphConditionalHandle c) {
  const int me = nvshmem_my_pe(), peer = 1 - me;
  const int r = ++*round;
  if (me == 0) {
    nvshmem_int_put_signal(buf, &r, 1, sig, r, NVSHMEM_SIGNAL_SET, peer);
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, r);
  } else {
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, r);
    nvshmem_int_put_signal(buf, &r, 1, sig, r, NVSHMEM_SIGNAL_SET, peer);
  }
  cudaGraphSetConditional(c, r < rounds);
}
)");
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, options({"sm_90"}, home), diags);
  for (const Diagnostic& d : diags.all()) INFO(d.code << ": " << d.message);
  REQUIRE(out[0].has_value());
  CHECK(out[0]->device_runtime);
  CHECK(out[0]->nvshmem);
  REQUIRE(out[0]->cubins.size() == 1);
  CHECK(out[0]->cubins[0].cubin[16] == 2);
  CHECK(elf_has_symbol(out[0]->cubins[0].cubin, "nvshmemi_device_state_d"));
  CHECK(out[0]->ptx.empty());
}

TEST_CASE("an NVSHMEM kernel with orchc's code at its entry (a programmatic edge's wait) links too") {
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build: not compiled");
    return;
  }
  KernelSource s = source("put_signal", kPutSignal);
  KernelEntry e;
  e.name = "put_signal";
  e.patch.wait = true;
  s.entries = {e};
  DiagnosticEngine diags;
  auto out = compile_kernels({s}, options({"sm_90"}, home), diags);
  for (const Diagnostic& d : diags.all()) INFO(d.code << ": " << d.message);
  REQUIRE(out[0].has_value());
  REQUIRE(out[0]->cubins.size() == 1);
  CHECK(out[0]->cubins[0].cubin[16] == 2);
  CHECK(elf_has_symbol(out[0]->cubins[0].cubin, "nvshmemi_device_state_d"));
  CHECK(out[0]->ptx.empty());
}

// Every NVSHMEM statement, in a loop and in a branch (both decided alike on every PE).
const char* kStatements = R"orch(pipeline statements
target sm_90
comm world
param n: u32 = 1000
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer back: f32[n]
buffer sig: u64 symmetric
buffer t: u32
graph main {
  fill t = 0
  barrier
  while t < 4 {
    put a -> b on (my_pe + 1) % n_pes signal sig += 1
    wait sig >= t + 1
    get b -> back from (my_pe + n_pes - 1) % n_pes
    t += 1
  }
  if t == 4 {
    put a -> b on my_pe
    signal sig = 0 on my_pe
    quiet
  }
}
)orch";

struct LoweredStatements {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked;
  lir::Program lowered;
  std::optional<std::string> bytes;
};

std::unique_ptr<LoweredStatements> lower_statements(const std::string& home) {
  auto l = std::make_unique<LoweredStatements>();
  l->checked = check_text("statements.orch", kStatements, l->sources, {}, l->diags);
  REQUIRE_FALSE(l->diags.has_errors());
  LowerOptions o;
  o.compile.use_cache = false;
  o.compile.nvshmem_home = home;
  l->bytes = lower_to_artifact(*l->checked.program, l->sources, o, l->diags, &l->lowered);
  return l;
}

TEST_CASE("the NVSHMEM statements become kernels in a module of their own, linked with NVSHMEM into CUBINs") {
  const std::string home = test_nvshmem_home();
  if (home.empty()) {
    MESSAGE("no NVSHMEM for this build (scripts/fetch-nvshmem, then configure again): not compiled");
    return;
  }
  auto l = lower_statements(home);
  for (const Diagnostic& d : l->diags.all()) INFO(d.code << ": " << d.message);
  REQUIRE(l->bytes.has_value());
  CHECK(l->lowered.nvshmem_version == "3.4.5");
  // Each statement a kernel orchc wrote (the loop's unrolled copies too), every one in the same
  // module; the other generated kernels (conditions, updates) in another.
  std::set<std::string> ops;
  std::set<int> nvshmem_modules, other_modules;
  std::string a_wait;
  for (const lir::Kernel& k : l->lowered.kernels) {
    if (!k.generated) continue;
    if (k.name.rfind("orch_nvshmem_", 0) == 0) {
      ops.insert(k.name.substr(13, k.name.rfind('_') - 13));
      if (k.name.rfind("orch_nvshmem_wait_", 0) == 0) a_wait = k.name;
      nvshmem_modules.insert(k.module);
      CHECK(k.waits_at_entry);
    } else {
      other_modules.insert(k.module);
    }
  }
  CHECK(ops == std::set<std::string>{"barrier", "get", "put", "quiet", "signal", "wait"});
  // What each calls (the first of each kind; NVSHMEM's signatures in its 3.4.5 headers).
  auto source_of = [&](const std::string& prefix) {
    for (const lir::Kernel& k : l->lowered.kernels)
      if (k.name.rfind(prefix, 0) == 0) return k.source;
    return std::string();
  };
  CHECK(source_of("orch_nvshmem_put_").find("nvshmemx_putmem_signal_block((void*)b1, (const void*)b0, v") !=
        std::string::npos);
  CHECK(source_of("orch_nvshmem_put_").find(", NVSHMEM_SIGNAL_ADD, v") != std::string::npos);
  CHECK(source_of("orch_nvshmem_wait_").find("nvshmem_signal_wait_until((uint64_t*)b3, NVSHMEM_CMP_GE, value.v);") !=
        std::string::npos);
  CHECK(source_of("orch_nvshmem_get_").find("nvshmemx_getmem_block((void*)b2, (const void*)b1, ") != std::string::npos);
  CHECK(source_of("orch_nvshmem_barrier_").find("nvshmemx_barrier_all_block();") != std::string::npos);
  const std::string signal = source_of("orch_nvshmem_signal_");
  CHECK(signal.find("nvshmem_quiet();\n  nvshmemx_signal_op((uint64_t*)b3, ") != std::string::npos);
  REQUIRE(nvshmem_modules.size() == 1);
  REQUIRE(other_modules.size() == 1);
  const lir::Module& m = l->lowered.modules.at(*nvshmem_modules.begin());
  REQUIRE(m.images.size() == 1);
  CHECK(m.images[0].cubin[16] == 2);  // ET_EXEC: fully linked
  CHECK(elf_has_symbol(m.images[0].cubin, "nvshmemi_device_state_d"));
  CHECK(elf_has_symbol(m.images[0].cubin, a_wait));
  CHECK(m.ptx.empty());  // no PTX for NVSHMEM code (relocatable PTX names symbols no driver resolves)
  // The rest keep their PTX and link nothing of NVSHMEM.
  const lir::Module& rest = l->lowered.modules.at(*other_modules.begin());
  CHECK_FALSE(rest.ptx.empty());
  for (const lir::Image& img : rest.images) CHECK_FALSE(elf_has_symbol(img.cubin, "nvshmemi_device_state_d"));
  // --emit=ir shows them as the kernel nodes they are.
  const std::string ir = lir::print(l->lowered, l->sources);
  auto node_line = [&](const std::string& kernel, const std::string& shape) {
    std::istringstream lines(ir);
    for (std::string line; std::getline(lines, line);)
      if (line.find("= kernel " + kernel) != std::string::npos && line.find(shape) != std::string::npos) return true;
    return false;
  };
  CAPTURE(ir);
  CHECK(node_line("orch_nvshmem_put_", "<<<(1, 1, 1), (512, 1, 1), 0>>>"));
  CHECK(node_line("orch_nvshmem_get_", "<<<(1, 1, 1), (512, 1, 1), 0>>>"));
  CHECK(node_line("orch_nvshmem_wait_", "<<<(1, 1, 1), (1, 1, 1), 0>>>"));
  CHECK(node_line("orch_nvshmem_barrier_", "<<<(1, 1, 1), (1, 1, 1), 0>>>"));
}

TEST_CASE("the NVSHMEM statements without NVSHMEM are E0904 at the first of them") {
  ScopedEnv a("ORCH_NVSHMEM_HOME", std::nullopt), b("NVSHMEM_HOME", std::nullopt);
  auto l = lower_statements("");
  CHECK_FALSE(l->bytes.has_value());
  REQUIRE(l->diags.all().size() == 1);
  CHECK(l->diags.all()[0].code == "E0904");
  CHECK(l->diags.all()[0].message.find("kernel 'orchc's NVSHMEM kernels' calls NVSHMEM's device API") == 0);
}

}  // TEST_SUITE("nvshmem")

}  // namespace
}  // namespace orch
