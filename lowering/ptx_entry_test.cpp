// The PTX entry patcher on NVRTC's real output (no GPU needed): the PDL wait goes first in every
// kind of kernel, a guard call with appended parameters links, and what cannot be patched says
// why. Every patched module is linked to an sm_90 CUBIN by nvJitLink, as orchc does.
#include "lowering/ptx_entry.h"

#include <doctest/doctest.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lowering/inspect_ptx.h"
#include "lowering/kernel_compiler.h"

namespace orch::lowering {
namespace {

// Kernels of every shape the patcher must handle, in one file (several entries).
const char* const kKernels = R"(
template <class T> __global__ void scale(unsigned n, T a, T* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
template __global__ void scale<float>(unsigned, float, float*);
extern "C" __global__ void no_params() { }
__device__ __noinline__ int helper(int x) { return x * 5 + 1; }
extern "C" __global__ void dynamic_shared(int* out) {
  extern __shared__ int s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = helper(s[blockDim.x - 1 - threadIdx.x]);
}
struct S { int a; double b; char c[5]; };
extern "C" __global__ void by_struct(S s, int* out) {
  __shared__ int t[32];
  t[threadIdx.x % 32] = s.a;
  __syncthreads();
  out[0] = t[0] + (int)s.b + s.c[1];
}
extern "C" __global__ void __launch_bounds__(256) bounded(char c, short h, int* out) {
  int local[40];
  for (int i = 0; i < 40; i++) local[i] = i * c;
  out[threadIdx.x] = local[threadIdx.x % 40] + h;
}
extern "C" __global__ void loops_at_once(int* x, int n) {
  for (int i = 0; i < n; ++i) x[i] += i;
}
)";

// NVRTC's PTX of `code` for `arch` (a virtual arch); the lowered names of `names` in order.
std::string nvrtc_ptx(const std::string& code, const std::string& arch, const std::vector<std::string>& names,
                      std::vector<std::string>* lowered = nullptr, bool rdc = false) {
  nvrtcProgram prog = nullptr;
  REQUIRE(nvrtcCreateProgram(&prog, code.c_str(), "k.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  for (const std::string& n : names) REQUIRE(nvrtcAddNameExpression(prog, n.c_str()) == NVRTC_SUCCESS);
  std::vector<std::string> opts = {"-arch=" + arch, "-std=c++17"};
  if (rdc) opts.push_back("-rdc=true");
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  INFO(log);
  REQUIRE(r == NVRTC_SUCCESS);
  for (const std::string& n : names) {
    const char* l = nullptr;
    REQUIRE(nvrtcGetLoweredName(prog, n.c_str(), &l) == NVRTC_SUCCESS);
    if (lowered) lowered->push_back(l);
  }
  size_t size = 0;
  REQUIRE(nvrtcGetPTXSize(prog, &size) == NVRTC_SUCCESS);
  std::string ptx(size, '\0');
  REQUIRE(nvrtcGetPTX(prog, ptx.data()) == NVRTC_SUCCESS);
  nvrtcDestroyProgram(&prog);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

// nvJitLink's verdict on `ptx` for sm_90: "" when it links to a CUBIN, else its log.
std::string link_problem(const std::string& ptx) {
  nvJitLinkHandle h = nullptr;
  const char* opts[] = {"-arch=sm_90"};
  if (nvJitLinkCreate(&h, 1, opts) != NVJITLINK_SUCCESS) return "nvJitLinkCreate failed";
  std::string problem;
  if (nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx.data(), ptx.size(), "patched.ptx") != NVJITLINK_SUCCESS ||
      nvJitLinkComplete(h) != NVJITLINK_SUCCESS) {
    size_t size = 0;
    nvJitLinkGetErrorLogSize(h, &size);
    std::string log(size, '\0');
    if (size) nvJitLinkGetErrorLog(h, log.data());
    problem = "does not link: " + log;
  } else {
    size_t size = 0;
    if (nvJitLinkGetLinkedCubinSize(h, &size) != NVJITLINK_SUCCESS || size == 0) problem = "no CUBIN";
  }
  nvJitLinkDestroy(&h);
  return problem;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The lines of the body of entry `name`, trimmed, comments and blank lines dropped.
std::vector<std::string> body_lines(const std::string& ptx, const std::string& name) {
  size_t at = ptx.find(".entry " + name + "(");
  REQUIRE_MESSAGE(at != std::string::npos, name);
  size_t open = ptx.find('{', at);
  std::vector<std::string> out;
  int depth = 0;
  std::istringstream in(ptx.substr(open));
  std::string line;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    for (char c : t) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (!t.empty() && t.rfind("//", 0) != 0) out.push_back(t);
    if (depth == 0) break;
  }
  return out;
}

bool is_declaration(const std::string& line) {
  for (const char* d : {".reg", ".local", ".shared", ".param"})
    if (line.rfind(d, 0) == 0) return true;
  return false;
}

// The first instruction of entry `name`, and whether every declaration came before it.
std::string first_instruction(const std::string& ptx, const std::string& name, bool* declarations_first) {
  std::vector<std::string> lines = body_lines(ptx, name);
  *declarations_first = true;
  std::string first;
  int depth = 1;
  for (size_t i = 1; i < lines.size(); ++i) {  // lines[0] is the `{`
    const std::string& l = lines[i];
    // Blocks inside the body (a call's, the guard's) declare their own.
    if (depth == 1 && is_declaration(l)) {
      if (!first.empty()) *declarations_first = false;
    } else if (first.empty()) {
      first = l;
    }
    for (char c : l) depth += c == '{' ? 1 : c == '}' ? -1 : 0;
  }
  return first;
}

const std::vector<std::string> kEntries = {"scale<float>", "no_params", "dynamic_shared", "by_struct", "bounded",
                                           "loops_at_once"};

// A guard module as orchc writes one: every argument 8 bytes, thread 0's decision returned (the
// patched entry ORs it over the block).
const char* const kGuard = R"(
extern "C" __device__ unsigned orch_guard(unsigned long long a0, unsigned long long a1, unsigned long long a2,
                                          unsigned long long a3) {
  unsigned go = 0u;
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
    go = *(const volatile int*)a0 > (int)(unsigned)a1 + (short)(unsigned short)a2 + (signed char)a3 ? 1u : 0u;
  return go;
}
)";

}  // namespace

TEST_CASE("ptx entry: the PDL wait goes first in every kind of kernel, and the module still links") {
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(kKernels, "compute_90", kEntries, &lowered);
  for (size_t k = 0; k < lowered.size(); ++k) {
    CAPTURE(kEntries[k]);
    PtxEntryPatch patch;
    patch.wait = true;
    std::string error;
    std::optional<std::string> out = patch_ptx_entry(ptx, lowered[k], patch, &error);
    INFO(error);
    REQUIRE(out.has_value());
    bool declarations_first = false;
    CHECK(first_instruction(*out, lowered[k], &declarations_first) == "griddepcontrol.wait;");
    CHECK(declarations_first);
    // The trigger right after it, so the next kernel may launch once this one is past its wait.
    const std::vector<std::string> lines = body_lines(*out, lowered[k]);
    const auto wait_line = std::find(lines.begin(), lines.end(), "griddepcontrol.wait;");
    REQUIRE(wait_line != lines.end());
    REQUIRE(wait_line + 1 != lines.end());
    CHECK(*(wait_line + 1) == "griddepcontrol.launch_dependents;");
    // Exactly one wait and one trigger, in this entry; every other entry as it was.
    CHECK(out->find("griddepcontrol.wait") == out->rfind("griddepcontrol.wait"));
    CHECK(out->find("griddepcontrol.launch_dependents") == out->rfind("griddepcontrol.launch_dependents"));
    for (size_t j = 0; j < lowered.size(); ++j)
      if (j != k) CHECK(body_lines(*out, lowered[j]) == body_lines(ptx, lowered[j]));
    // The entry's parameters are untouched.
    CHECK(parse_ptx(*out).functions.at(lowered[k]).params.size() ==
          parse_ptx(ptx).functions.at(lowered[k]).params.size());
    CHECK(link_problem(*out) == "");
  }
}

TEST_CASE("ptx entry: a guard call with appended parameters of 8, 4, 2 and 1 bytes links") {
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(kKernels, "compute_90", kEntries, &lowered);
  const std::string guard = nvrtc_ptx(kGuard, "compute_90", {}, nullptr, /*rdc=*/true);
  REQUIRE(guard.find("orch_guard") != std::string::npos);
  std::string error;
  std::optional<std::string> joined = merge_ptx_modules(ptx, guard, &error);
  INFO(error);
  REQUIRE(joined.has_value());
  CHECK(link_problem(*joined) == "");
  for (size_t k = 0; k < lowered.size(); ++k) {
    CAPTURE(kEntries[k]);
    PtxEntryPatch patch;
    patch.wait = true;
    patch.guard = "orch_guard";
    patch.extra_params = {8, 4, 2, 1};
    std::optional<std::string> out = patch_ptx_entry(*joined, lowered[k], patch, &error);
    INFO(error);
    REQUIRE(out.has_value());
    bool declarations_first = false;
    CHECK(first_instruction(*out, lowered[k], &declarations_first) == "griddepcontrol.wait;");
    CHECK(declarations_first);
    const std::vector<PtxParam> before = parse_ptx(*joined).functions.at(lowered[k]).params;
    const std::vector<PtxParam> after = parse_ptx(*out).functions.at(lowered[k]).params;
    REQUIRE(after.size() == before.size() + 4);
    for (size_t i = 0; i < before.size(); ++i) CHECK(after[i].text == before[i].text);
    CHECK(after[before.size()].size == 8);
    CHECK(after[before.size() + 1].size == 4);
    CHECK(after[before.size() + 2].size == 2);
    CHECK(after[before.size() + 3].size == 1);
    const PtxFunction f = parse_ptx(*out).functions.at(lowered[k]);  // a copy: the parse is a temporary
    CHECK(f.calls.count("orch_guard") == 1);
    const std::vector<std::string> lines = body_lines(*out, lowered[k]);
    const auto exit_line = std::find(lines.begin(), lines.end(), "@!%orch_run exit;");
    REQUIRE(exit_line != lines.end());
    // The trigger after the guard (kPdlTrigger), not after the wait: only blocks that run trigger.
    REQUIRE(exit_line + 1 != lines.end());
    CHECK(*(exit_line + 1) == "griddepcontrol.launch_dependents;");
    CHECK(std::count(lines.begin(), lines.end(), "griddepcontrol.launch_dependents;") == 1);
    CHECK(link_problem(*out) == "");
  }
  // The guard alone, without the wait (a target without PDL).
  PtxEntryPatch guard_only;
  guard_only.guard = "orch_guard";
  guard_only.extra_params = {8, 8, 8, 8};
  std::optional<std::string> out = patch_ptx_entry(*joined, "no_params", guard_only, &error);
  REQUIRE(out.has_value());
  CHECK(out->find("griddepcontrol.wait") == std::string::npos);
  CHECK(out->find("griddepcontrol.launch_dependents") == std::string::npos);
  CHECK(link_problem(*out) == "");
  CHECK(out->find("bar.red.or.pred") != std::string::npos);  // thread 0's decision, told at the barrier
  // Every thread deciding for itself: each leaves on its own, no barrier, and it still links.
  PtxEntryPatch each = guard_only;
  each.guard_per_thread = true;
  each.wait = true;
  CHECK(each.describe() == "wait guard orch_guard(8, 8, 8, 8) per thread launch_dependents");
  CHECK_FALSE(each == guard_only);
  out = patch_ptx_entry(*joined, "no_params", each, &error);
  REQUIRE(out.has_value());
  CHECK(out->find("bar.red") == std::string::npos);
  CHECK(out->find("bar.warp.sync") == std::string::npos);
  const std::vector<std::string> lines = body_lines(*out, "no_params");
  const auto exit_line = std::find(lines.begin(), lines.end(), "@!%orch_go_p exit;");
  REQUIRE(exit_line != lines.end());
  REQUIRE(exit_line + 1 != lines.end());
  CHECK(*(exit_line + 1) == "griddepcontrol.launch_dependents;");
  CHECK(link_problem(*out) == "");
}

TEST_CASE("ptx entry: names already in the module are not reused") {
  // A kernel whose own inline PTX uses the names the patch would pick.
  const char* code = R"(
extern "C" __global__ void k(int* x) {
  int v;
  asm volatile("{ .reg .b32 %orch_go; mov.b32 %orch_go, 7; mov.b32 %0, %orch_go; }" : "=r"(v));
  x[0] = v;
}
)";
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(code, "compute_90", {"k"}, &lowered);
  const std::string guard = nvrtc_ptx(kGuard, "compute_90", {}, nullptr, true);
  std::string error;
  std::optional<std::string> joined = merge_ptx_modules(ptx, guard, &error);
  REQUIRE(joined.has_value());
  PtxEntryPatch patch;
  patch.wait = true;
  patch.guard = "orch_guard";
  patch.extra_params = {8, 4, 4, 4};
  std::optional<std::string> out = patch_ptx_entry(*joined, "k", patch, &error);
  REQUIRE(out.has_value());
  CHECK(out->find("%orch_1_go") != std::string::npos);
  CHECK(link_problem(*out) == "");
}

TEST_CASE("ptx entry: what cannot be patched or joined says why") {
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(kKernels, "compute_90", kEntries, &lowered);
  std::string error;
  PtxEntryPatch wait;
  wait.wait = true;
  CHECK_FALSE(patch_ptx_entry(ptx, "missing", wait, &error).has_value());
  CHECK(error == "the PTX defines no entry missing");
  // A prefix of an entry's name is not that entry.
  CHECK_FALSE(patch_ptx_entry(ptx, "no_param", wait, &error).has_value());
  CHECK(error == "the PTX defines no entry no_param");
  PtxEntryPatch bad;
  bad.extra_params = {8};
  CHECK_FALSE(patch_ptx_entry(ptx, "no_params", bad, &error).has_value());
  CHECK(error == "appended parameters without a guard to pass them to");
  bad.guard = "g";
  bad.extra_params = {3};
  CHECK_FALSE(patch_ptx_entry(ptx, "no_params", bad, &error).has_value());
  CHECK(error == "an appended parameter of 3 bytes (1, 2, 4 or 8 only)");
  // An empty patch changes nothing.
  CHECK(patch_ptx_entry(ptx, "no_params", PtxEntryPatch{}, &error) == ptx);

  // Another target.
  const std::string other = nvrtc_ptx(kGuard, "compute_100", {}, nullptr, true);
  CHECK_FALSE(merge_ptx_modules(ptx, other, &error).has_value());
  CHECK(error == "cannot join PTX for .target sm_100 to PTX for .target sm_90");
}

TEST_CASE("ptx entry: orchc's code that names what the kernel's names is renamed, a helper both have is kept once") {
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(kKernels, "compute_90", kEntries, &lowered);
  // A module defining a function the kernel's module already has (an entry, here), and one that
  // calls it: the whole module is renamed consistently, and the kernel's own stays as it was.
  const std::string clash = nvrtc_ptx(R"(extern "C" __device__ __noinline__ int no_params(int x) { return x + 1; }
extern "C" __device__ unsigned orch_guard(unsigned long long a) { return no_params((int)a) > 2; })",
                                      "compute_90", {}, nullptr, true);
  std::string error;
  std::map<std::string, std::string> renamed;
  std::optional<std::string> joined = merge_ptx_modules(ptx, clash, &error, &renamed);
  REQUIRE_MESSAGE(joined.has_value(), error);
  CHECK(renamed == std::map<std::string, std::string>{{"no_params", "no_params_1"}});
  CHECK(joined->find(".func  (.param .b32 func_retval0) no_params_1(") != std::string::npos);
  // Defined, and called by orch_guard under its new name.
  size_t uses = 0;
  for (size_t at = joined->find("no_params_1"); at != std::string::npos; at = joined->find("no_params_1", at + 1)) ++uses;
  CHECK(uses >= 2);
  CHECK(joined->find(".entry no_params(") != std::string::npos);  // the kernel's entry, untouched
  CHECK(link_problem(*joined) == "");
  // The same module joined again: every definition it has is there already, so nothing repeats.
  std::map<std::string, std::string> again;
  std::optional<std::string> twice = merge_ptx_modules(*joined, clash, &error, &again);
  REQUIRE(twice.has_value());
  CHECK(link_problem(*twice) == "");
  // A second guard with other code under the same name is renamed, and so is nothing else.
  const std::string other = nvrtc_ptx(R"(extern "C" __device__ unsigned orch_guard(unsigned long long a) { return a == 7; })",
                                      "compute_90", {}, nullptr, true);
  std::map<std::string, std::string> second;
  std::optional<std::string> both = merge_ptx_modules(*joined, other, &error, &second);
  REQUIRE(both.has_value());
  CHECK(second == std::map<std::string, std::string>{{"orch_guard", "orch_guard_1"}});
  CHECK(link_problem(*both) == "");
}

TEST_CASE("ptx entry: a copy of an entry under a fresh name is a second kernel of the same module") {
  const char* code = R"(
__device__ int counter;
__constant__ int step = 3;
extern "C" __global__ void bump(int* out, int n) {
  for (int i = 0; i < n; ++i)
    if (threadIdx.x == 0) atomicAdd(&counter, step);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = counter;
}
)";
  std::vector<std::string> lowered;
  const std::string ptx = nvrtc_ptx(code, "compute_90", {"bump"}, &lowered);
  CHECK(fresh_ptx_name(ptx, "bump") == "bump_1");
  CHECK(fresh_ptx_name(ptx, "bump_orch") == "bump_orch");
  std::string error;
  std::optional<std::string> cloned = clone_ptx_entry(ptx, "bump", "bump_orch", &error);
  REQUIRE_MESSAGE(cloned.has_value(), error);
  PtxModule m = parse_ptx(*cloned);
  REQUIRE(m.functions.count("bump"));
  REQUIRE(m.functions.count("bump_orch"));
  CHECK(m.functions.at("bump_orch").params.size() == m.functions.at("bump").params.size());
  CHECK(cloned->find("bump_orch_param_0") != std::string::npos);
  // One definition of each variable, which both kernels use.
  CHECK(std::count(cloned->begin(), cloned->end(), '\n') > std::count(ptx.begin(), ptx.end(), '\n'));
  size_t counters = 0;
  for (size_t at = cloned->find(".global .align 4 .u32 counter"); at != std::string::npos;
       at = cloned->find(".global .align 4 .u32 counter", at + 1))
    ++counters;
  CHECK(counters == 1);
  // The copy patched, the original not: both link as one module.
  PtxEntryPatch wait;
  wait.wait = true;
  std::optional<std::string> patched = patch_ptx_entry(*cloned, "bump_orch", wait, &error);
  REQUIRE(patched.has_value());
  bool declarations_first = false;
  CHECK(first_instruction(*patched, "bump_orch", &declarations_first) == "griddepcontrol.wait;");
  CHECK(first_instruction(*patched, "bump", &declarations_first) != "griddepcontrol.wait;");
  CHECK(link_problem(*patched) == "");
  CHECK_FALSE(clone_ptx_entry(ptx, "missing", "x", &error).has_value());
  CHECK(error == "the PTX defines no entry missing");
}

TEST_CASE("ptx entry: the kernel compiler patches, joins the guard, links, and keys the cache by the patch") {
  KernelSource s;
  s.name = "scale";
  s.code = kKernels;
  s.file_name = "k.cu";
  s.entries = {{s.name, "scale<float>", {}, {}}};
  CompileOptions options;
  options.archs = {"sm_90"};
  options.use_cache = false;
  DiagnosticEngine diags;
  auto plain = compile_kernels({s}, options, diags);
  REQUIRE(plain[0].has_value());
  CHECK(plain[0]->ptx.find("griddepcontrol.wait") == std::string::npos);

  s.entries[0].patch.wait = true;
  auto waiting = compile_kernels({s}, options, diags);
  REQUIRE(waiting[0].has_value());
  CHECK(!diags.has_errors());
  REQUIRE(waiting[0]->cubins.size() == 1);
  CHECK(waiting[0]->cubins[0].arch == "sm_90");
  CHECK(waiting[0]->lowered_name == plain[0]->lowered_name);
  bool declarations_first = false;
  CHECK(first_instruction(waiting[0]->ptx, waiting[0]->lowered_name, &declarations_first) == "griddepcontrol.wait;");

  s.entries[0].patch.guard = "orch_guard";
  s.entries[0].patch.extra_params = {8, 4, 2, 1};
  s.entries[0].guard_code = kGuard;
  auto guarded = compile_kernels({s}, options, diags);
  REQUIRE(guarded[0].has_value());
  CHECK(parse_ptx(guarded[0]->ptx).functions.at(guarded[0]->lowered_name).params.size() == 7);
  CHECK(link_problem(guarded[0]->ptx) == "");  // the stored PTX is one self-contained module

  // A device-runtime kernel: the patched PTX links with cudadevrt.
  KernelSource dr;
  dr.name = "setter";
  dr.code = R"(extern "C" __global__ void setter(const int* c, cudaGraphConditionalHandle h) {
  if (threadIdx.x == 0) cudaGraphSetConditional(h, *c > 0);
})";
  dr.file_name = "setter.cu";
  dr.uses_device_runtime = true;
  dr.entries = {{dr.name, "", {}, {}}};
  dr.entries[0].patch.wait = true;
  auto linked = compile_kernels({dr}, options, diags);
  INFO(format_diagnostics(diags.sorted(), SourceManager(), DiagnosticFormat::Text));
  REQUIRE(linked[0].has_value());
  CHECK(linked[0]->device_runtime);
  CHECK(linked[0]->ptx.find("griddepcontrol.wait") != std::string::npos);
}

}  // namespace orch::lowering
