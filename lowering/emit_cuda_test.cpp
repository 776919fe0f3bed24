// `orchc --emit=cuda`: every example ejects to one .cu file that nvcc compiles (this
// machine has the toolkit, no GPU needed: `nvcc -c` only), with the lines that make it the same
// graph (conditional nodes, device-launch instantiation, family tables, checked calls that name
// the .orch statement). ORCH_NVCC overrides the compiler; without one the compile case is skipped,
// visibly (lowering/test_main.cpp).
#include "lowering/emit_cuda.h"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "compiler/check.h"
#include "lowering/lower.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

std::string eject_examples_dir() {
  return ORCH_EXAMPLES_DIR;
}

std::string nvcc_path() {
  if (const char* env = std::getenv("ORCH_NVCC"); env && *env) return env;
  return "/usr/local/cuda/bin/nvcc";
}

class EjectTempDir {
 public:
  EjectTempDir() {
    std::string pattern = (fs::temp_directory_path() / "orch_eject_XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~EjectTempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Checks, lowers and ejects a file or a text; REQUIREs a clean check.
std::string eject_file(const std::string& path) {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_file(path, sources, {}, diags);
  REQUIRE_MESSAGE(!diags.has_errors(),
                  format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
  return emit_cuda(lower_to_lir(*r.program, for_emit_cuda()), sources);
}

std::string eject_text(const std::string& text) {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  REQUIRE_MESSAGE(!diags.has_errors(),
                  format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
  return emit_cuda(lower_to_lir(*r.program, for_emit_cuda()), sources);
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t i = haystack.find(needle); i != std::string::npos; i = haystack.find(needle, i + 1))
    ++n;
  return n;
}

bool has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// `needle` with `orch_x#` standing for any of ORCH_EVAL's numbered values (orch_x0, orch_x1,
// ...), whose numbers depend on how many checks and values come first.
bool has_eval(const std::string& haystack, const std::string& needle) {
  const size_t hole = needle.find("orch_x#");
  if (hole == std::string::npos) return has(haystack, needle);
  const std::string before = needle.substr(0, hole), after = needle.substr(hole + 7);
  for (size_t at = haystack.find(before); at != std::string::npos; at = haystack.find(before, at + 1)) {
    size_t i = at + before.size();
    if (haystack.compare(i, 6, "orch_x") != 0) continue;
    i += 6;
    const size_t digits = i;
    while (i < haystack.size() && std::isdigit(static_cast<unsigned char>(haystack[i]))) ++i;
    if (i > digits && haystack.compare(i, after.size(), after) == 0) return true;
  }
  return false;
}

// The examples --emit=cuda ejects: not those that use NVSHMEM (symmetric buffers), which orchc
// refuses to eject (tools/orchc/main.cpp).
std::vector<std::string> spec_examples() {
  std::vector<std::string> out;
  // A line `buffer ... symmetric ...` declares one.
  auto symmetric = [](const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("buffer ", 0) == 0 && line.find(" symmetric") != std::string::npos) return true;
    return false;
  };
  for (const auto& e : fs::directory_iterator(eject_examples_dir())) {
    if (e.path().extension() != ".orch") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    if (!symmetric(text)) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Compiled {
  int status = -1;
  std::string log;
};

// nvcc -arch=sm_90 -rdc=true -c, the file's own command minus the link.
Compiled compile(const std::string& cu, const std::string& dir) {
  std::string stem = fs::path(cu).stem().string();
  std::string log = dir + "/" + stem + ".log";
  std::string cmd = "'" + nvcc_path() + "' -arch=sm_90 -rdc=true -c '" + cu + "' -o '" + dir + "/" +
                    stem + ".o' > '" + log + "' 2>&1";
  Compiled c;
  c.status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  c.log = text.str();
  return c;
}

TEST_CASE("eject: every example becomes one .cu file with the parts it needs") {
  std::vector<std::string> examples = spec_examples();
  REQUIRE(examples.size() >= 7);
  for (const std::string& path : examples) {
    std::string name = fs::path(path).stem().string();
    INFO(name);
    std::string cu = eject_file(path);
    // The parts every file has.
    CHECK(has(cu, "//   nvcc -arch=sm_90 -rdc=true " + name + ".cu -lcudadevrt"));
    CHECK(has(cu, "struct "));
    CHECK(has(cu, "Params {"));
    CHECK(has(cu, "Buffers {"));
    CHECK(has(cu, "cudaError_t build_" + name + "("));
    CHECK(has(cu, "cudaError_t launch_" + name + "("));
    CHECK(has(cu, "#ifndef ORCH_EJECT_NO_MAIN"));
    CHECK(has(cu, "int main(int argc, char** argv) {"));
    // The harness: inputs from files, N launches, every buffer written back.
    CHECK(has(cu, "cudaError_t buffer_counts_" + name + "("));
    CHECK(has(cu, "static bool orch_set_param("));
    CHECK(has(cu, "for (unsigned long long i = 0; err == cudaSuccess && i < launches; ++i) err = launch_" +
                      name + "(g, stream);"));
    CHECK(has(cu, "#define ORCH_CHECK(call, where)"));
    CHECK(!has(cu, "@@orch-unused@@"));
  }
}

// Needs nvcc: where there is none, main() (lowering/test_main.cpp) excludes this case and says
// so (SKIPPED), and run alone it exits 77, which ctest reports as skipped.
TEST_CASE("eject: every ejected example nvcc compiles") {
  std::vector<std::string> examples = spec_examples();
  REQUIRE(examples.size() >= 7);
  REQUIRE_MESSAGE(access(nvcc_path().c_str(), X_OK) == 0, "no nvcc at " << nvcc_path() << " (set ORCH_NVCC)");
  EjectTempDir dir;
  std::vector<std::string> files;
  for (const std::string& path : examples) {
    std::string out = dir.path() + "/" + fs::path(path).stem().string() + ".cu";
    std::ofstream(out, std::ios::binary) << eject_file(path);
    files.push_back(out);
  }
  // nvcc takes seconds a file: a few at a time, results checked here on the test's thread.
  unsigned workers = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<Compiled> results(files.size());
  for (size_t first = 0; first < files.size(); first += workers) {
    std::vector<std::future<Compiled>> running;
    for (size_t i = first; i < std::min(files.size(), first + workers); ++i)
      running.push_back(std::async(std::launch::async, compile, files[i], dir.path()));
    for (size_t i = 0; i < running.size(); ++i) results[first + i] = running[i].get();
  }
  for (size_t i = 0; i < files.size(); ++i) {
    INFO(files[i] << "\n" << results[i].log);
    CHECK(results[i].status == 0);
  }
}

TEST_CASE("eject: jacobi's while loop is a conditional node with its handle and body") {
  std::string cu = eject_file(eject_examples_dir() + "/jacobi.orch");
  CHECK(has(cu, "struct JacobiParams {"));
  CHECK(has(cu, "unsigned n = 1048576u;  // param n: u32 = 1 << 20"));
  CHECK(has(cu, "float tol = 1e-06f;"));
  CHECK(has(cu, "float* u_host = nullptr;"));
  CHECK(has(cu, "cudaHostAlloc(host, bytes, cudaHostAllocMapped)"));
  CHECK(has(cu, "cudaHostGetDevicePointer(device, *host, 0)"));
  // Host expressions are expr/'s printed code: a value, or the error printed and returned.
  CHECK(has(cu, "ORCH_EVAL(orch_x0, orch_u64, \"" + eject_examples_dir() +
                    "/jacobi.orch:9:1: buffer u\", orch_convert<orch_u64, orch_u32>(orch_ok<orch_u32>(p.n)));"));
  CHECK(has(cu, "count[0] = static_cast<size_t>(orch_x0.v);"));
  CHECK(has(cu, "orch_alloc_device((void**)&b->u, count[0], sizeof(float)"));
  CHECK(has(cu, "cudaGraphConditionalHandleCreate(&handle[0], graph, 0, 0)"));
  CHECK(has(cu, "cond.type = cudaGraphNodeTypeConditional;"));
  CHECK(has(cu, "cond.conditional.type = cudaGraphCondTypeWhile;"));
  CHECK(has(cu, "cudaGraph_t body1 = cond.conditional.phGraph_out[0];"));
  CHECK(has(cu, "ORCH_CHECK(cudaGraphAddNode(&node[5], graph, deps, nullptr, 3, &cond)"));
  // The body: the sweeps and the condition evaluated again at its end.
  CHECK(has(cu, "cudaGraphAddKernelNode(&node1[1], body1, deps, 1, &kernel)"));
  CHECK(has(cu, "kernel.func = (void*)&::orch_condition_1;"));
  CHECK(has(cu, "cudaGraphSetConditional(h0,"));
  // Copies and fills as explicit nodes, every call checked with the statement's position.
  CHECK(has_eval(cu,
            "cudaGraphAddMemcpyNode1D(&node[0], graph, nullptr, 0, b.u, b.u_host, "
            "static_cast<size_t>(orch_x#.v) * sizeof(float), cudaMemcpyDefault), "
            "\"" +
                eject_examples_dir() + "/jacobi.orch:21:3: copy u_host -> u\");"));
  CHECK(has(cu, "cudaGraphAddMemsetNode(&node[2], graph, nullptr, 0, &fill)"));
  CHECK(has(
      cu,
      "// " + eject_examples_dir() +
          "/jacobi.orch:27:5  sweep<<<ceil_div(n, 256), 256>>>(n, u, rhs, v, residual)"));
  CHECK(has(cu, "\", orch_ceil_div<orch_u32>(orch_ok<orch_u32>(p.n), orch_ok<orch_u32>(256u)));"));
  CHECK(has_eval(cu, "kernel.gridDim = dim3(orch_x#.v, 1, 1);"));
  // jacobi.cu once; expr/'s preamble (host and generated kernels share it) once.
  CHECK(count(cu, "extern \"C\" __global__ void sweep(") == 1);
  CHECK(count(cu, "#define ORCH_EXPR_OPS_H") == 1);
  CHECK(count(cu, "ORCH_HD orch_v<K> orch_ceil_div(") == 1);
  CHECK(has(cu, "cudaGraphInstantiateWithFlags(&out->main_exec, graph, 0)"));
  CHECK(has(cu, "cudaGraphUpload(out->main_exec, 0)"));
  // Bind checks are repeated with the params the application sets.
  CHECK(has(cu, "error[E0203]"));
}

TEST_CASE("eject: moe's device graphs are instantiated for device launch, one per family member") {
  std::string cu = eject_file(eject_examples_dir() + "/moe.orch");
  CHECK(has(cu, "cudaGraph_t experts[8] = {};"));
  CHECK(has(cu, "cudaGraphExec_t* experts_table = nullptr;"));
  CHECK(has(cu,
            "cudaGraphInstantiateWithFlags(&out->experts_exec[member], graph, "
            "cudaGraphInstantiateFlagDeviceLaunch)"));
  CHECK(has(cu,
            "cudaGraphInstantiateWithFlags(&out->finish_exec, graph, "
            "cudaGraphInstantiateFlagDeviceLaunch)"));
  CHECK(has(cu,
            "for (int member = 0; member < 8; ++member) ORCH_TRY(orch_build_experts(p, b, out, "
            "member));"));
  CHECK(has(cu, "orch_ok<orch_u32>(static_cast<unsigned>(member)));"));
  CHECK(has_eval(cu, "unsigned arg0 = orch_x#.v;  // e = e"));
  CHECK(has(cu,
            "cudaMemcpy(out->experts_table, out->experts_exec, sizeof(out->experts_exec), "
            "cudaMemcpyHostToDevice)"));
  CHECK(has(cu, "cudaGraphUpload(out->experts_exec[member], 0)"));
  CHECK(has(cu, "cudaGraphUpload(out->finish_exec, 0)"));
  // route gets the table and finish's exec; the device graphs are built before main.
  CHECK(has(cu, "(void*)&out->experts_table, &arg6}"));
  CHECK(has(cu, "cudaGraphExec_t arg6 = out->finish_exec;"));
  CHECK(cu.find("orch_build_finish(p, b, out)") < cu.find("ORCH_TRY(orch_build_main(p, b, out))"));
  // moe.cu holds all three kernels: it is in the file once.
  CHECK(count(cu, "// ---- " + eject_examples_dir() +
                      "/moe.cu (kernels route, expert_ffn, combine)") == 1);
  CHECK(count(cu, "extern \"C\" __global__ void route(") == 1);
  CHECK(count(cu, "extern \"C\" __global__ void combine(") == 1);
}

TEST_CASE("eject: a self tail launch is set on the executable graph after instantiation") {
  std::string cu = eject_file(eject_examples_dir() + "/scheduler.orch");
  CHECK(has(cu,
            "cudaGraphExec_t arg6 = nullptr;  // self = self: set by orch_patch_rounds() after "
            "instantiation"));
  CHECK(has(cu, "out->rounds_patch[0][0] = node[0];"));
  CHECK(has(
      cu, "cudaGraphExecKernelNodeSetParams(out->rounds_exec, out->rounds_patch[0][0], &kernel)"));
  // Patched before the upload.
  CHECK(cu.find("ORCH_TRY(orch_patch_rounds(p, b, out));") <
        cu.find("ORCH_CHECK(cudaGraphUpload(out->rounds_exec, 0)"));
}

TEST_CASE("eject: switch bodies, `while kernel` defaults, collectives") {
  std::string branch = eject_file(eject_examples_dir() + "/branch.orch");
  CHECK(has(branch, "cond.conditional.type = cudaGraphCondTypeSwitch;"));
  CHECK(has(branch, "cond.conditional.size = 3;"));
  CHECK(has(branch, "// default (body 2): any other value"));
  CHECK(has(branch, "cond.conditional.type = cudaGraphCondTypeIf;"));
  CHECK(has(branch, "// else: run when it is zero"));

  std::string countdown = eject_file(eject_examples_dir() + "/countdown.orch");
  CHECK(has(countdown,
            "cudaGraphConditionalHandleCreate(&handle[0], graph, 1, cudaGraphCondAssignDefault)"));
  CHECK(has(countdown, "void* args[] = {(void*)&b.counter, (void*)&b.trace, &handle[0]};"));

  std::string dp = eject_file(eject_examples_dir() + "/dp_step.orch");
  CHECK(has(dp, "#include <nccl.h>"));
  CHECK(has(dp, "-lcudadevrt -lnccl"));
  CHECK(has(dp, "ncclComm_t world = nullptr;"));
  CHECK(has_eval(dp,
            "ncclAllReduce(b.g, b.g, static_cast<size_t>(orch_x#.v), ncclFloat32, ncclSum, "
            "p.world, capture)"));
  // Captured straight into the segment's graph, in one session, after the node's dependencies.
  CHECK(has(dp, "cudaStreamBeginCaptureToGraph(capture, graph, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal)"));
  CHECK(has(dp, "cudaStreamUpdateCaptureDependencies(capture, const_cast<cudaGraphNode_t*>(deps), nullptr, 1, "
                "cudaStreamSetCaptureDependencies)"));
  CHECK(has(dp, "if (nlast == 1) node[1] = last[0];"));
  CHECK_FALSE(has(dp, "cudaGraphAddChildGraphNode"));
  // 1.0 / world_size computes in f64 (a float literal meeting an integer), then converts to f32.
  CHECK(has(dp, "orch_convert<orch_f32, orch_f64>(orch_div<orch_f64>(orch_ok<orch_f64>(0x1p+0), "
                "orch_promote<orch_f64, orch_u32>(orch_ok<orch_u32>(static_cast<unsigned>(p.world_size))))));"));
  CHECK(has_eval(dp, "float arg2 = orch_x#.v;  // scale = 1.0 / world_size"));
  CHECK(has(dp, "ncclCommInitAll(&p.world, 1, &device)"));
}

// Two allreduces the DAG leaves unordered (a large kernel beside them, as in a data-parallel
// step): the ejected graph keeps them in node order (collectives_in_order), runs NCCL's kernels
// at the greatest priority and is instantiated with node priorities, as the runtime does; nvcc
// compiles it.
TEST_CASE("eject: collectives in node order, NCCL's kernels at high priority where kernels run beside them") {
  const std::string text =
      "pipeline two_ar\ntarget sm_90\nparam n: u32 = 256\ncomm world\nbuffer big: f32[1 << 24]\n"
      "buffer g0: f32[n]\nbuffer g1: f32[n]\n"
      "kernel scale(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float* x) "
      "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\"\"\"\n"
      "graph main {\n  scale<<<ceil_div(n, 256), 256>>>(n, g0)\n  scale<<<ceil_div(n, 256), 256>>>(n, g1)\n"
      "  allreduce sum g0 on world\n  allreduce sum g1 on world\n  scale<<<65536, 256>>>(1 << 24, big)\n}\n";
  const std::string cu = eject_text(text);
  // Node 3 (the second allreduce) waits for its kernel (1) and the first allreduce (2).
  CHECK(has(cu, "const cudaGraphNode_t deps[] = {node[1], node[2]};"));
  CHECK(count(cu, "cudaGraphKernelNodeSetAttribute(made, cudaLaunchAttributePriority, &priority)") == 2);
  CHECK(has(cu, "cudaGraphInstantiateWithFlags(&out->main_exec, graph, cudaGraphInstantiateFlagUseNodePriority)"));
  REQUIRE_MESSAGE(access(nvcc_path().c_str(), X_OK) == 0, "no nvcc at " << nvcc_path() << " (set ORCH_NVCC)");
  EjectTempDir dir;
  const std::string out = dir.path() + "/two_ar.cu";
  std::ofstream(out, std::ios::binary) << cu;
  const Compiled c = compile(out, dir.path());
  INFO(c.log);
  CHECK(c.status == 0);
  // dp_step's one allreduce has nothing beside it: no priorities.
  const std::string dp = eject_file(eject_examples_dir() + "/dp_step.orch");
  CHECK_FALSE(has(dp, "cudaLaunchAttributePriority"));
  CHECK(has(dp, "cudaGraphInstantiateWithFlags(&out->main_exec, graph, 0)"));
}

TEST_CASE("eject: names that C++ or the kernel sources' macros would break are renamed") {
  std::string cu = eject_text(R"(pipeline my_pipe
param new: u32 = 64
param BLOCK: u32 = 128
param seed: u64
buffer class: f32[new]
kernel k(n: u32, x: inout f32[]) source """
#define BLOCK 128
extern "C" __global__ void k(unsigned n, float* x) {
  unsigned i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) x[i] += 1;
}
"""
graph main { k<<<ceil_div(new, BLOCK), BLOCK>>>(new, class) }
)");
  CHECK(has(cu, "struct MyPipeParams {"));
  CHECK(has(cu, "unsigned new_ = 64u;"));
  CHECK(has(cu, "unsigned BLOCK_ = 128u;"));
  CHECK(has(cu, "unsigned long long seed = {};"));
  CHECK(has(cu, "// p.seed has no default in the .orch file: set it here or with --param."));
  CHECK(has(cu, "float* class_ = nullptr;"));
  CHECK(has(cu, "(void*)&b.class_"));
  CHECK(has(cu,
            "cudaError_t build_my_pipe(const MyPipeParams& p, const MyPipeBuffers& b, "
            "MyPipeGraphs* out)"));
}

}  // namespace
}  // namespace orch
