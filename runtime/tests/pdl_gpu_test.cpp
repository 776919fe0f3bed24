// Programmatic (PDL) edges, the runtime's half: these tests compile a pipeline with orchc's own
// speed passes off (--no-pdl --unroll 1) and edit its artifact (through the FlatBuffers object
// API) to mark kernel -> kernel edges programmatic and the kernels as waiting at entry, then run
// it; they also ask CUDA where it takes such edges (conditional bodies, device graphs), which
// orchc's PassOptions::pdl_in_bodies and pdl_in_device_graphs wait for. speed_gpu_test.cpp runs
// the edges orchc makes itself. The kernels execute
// griddepcontrol.wait before touching memory and griddepcontrol.launch_dependents right after,
// so each one's successor is launched as early as CUDA allows: a missing wait would read what
// its predecessor has not written yet. Results are compared exactly with a CPU reference.
//
// Suite "gpu" for what runs on the GPU; the validator's refusal needs no GPU and runs anywhere.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/runtime.h"
#include "runtime/tests/test_util.h"

namespace {

namespace fb = orch::fb;

#define PDL_CUDA_REQUIRE(x)                                              \
  do {                                                                   \
    cudaError_t e_ = (x);                                                \
    INFO(#x, ": ", cudaGetErrorName(e_), " ", cudaGetErrorString(e_));   \
    REQUIRE(e_ == cudaSuccess);                                          \
  } while (0)

// Every block waits for its predecessors, then lets its successors launch, then works:
// dst[i] = src[(i * 7919 + salt) % n] * 2654435761 + salt * 40503 + i (u32, wrapping).
constexpr const char* kMix = R"(kernel mix(n: u32, salt: u32, src: in u32[], dst: out u32[]) source """
extern "C" __global__ void mix(unsigned n, unsigned salt, const unsigned* src, unsigned* dst) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned j = (unsigned)(((unsigned long long)i * 7919ull + salt) % n);
    dst[i] = src[j] * 2654435761u + salt * 40503u + i;
  }
}
"""
)";

void mix_cpu(uint32_t n, uint32_t salt, const std::vector<uint32_t>& src, std::vector<uint32_t>& dst) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = static_cast<uint32_t>((uint64_t{i} * 7919u + salt) % n);
    dst[i] = src[j] * 2654435761u + salt * 40503u + i;
  }
}

// `kernels` mix launches alternating a -> b, b -> a (salts 1, 2, ...), as orch statements.
std::string mix_chain(int kernels, const char* indent = "  ") {
  std::string out;
  for (int k = 0; k < kernels; ++k)
    out += std::string(indent) + "mix<<<ceil_div(n, 256), 256>>>(n, " + std::to_string(k + 1) + ", " +
           (k % 2 ? "b, a" : "a, b") + ")\n";
  return out;
}

// The CPU reference of one run of mix_chain(kernels) over a (and b).
void mix_chain_cpu(uint32_t n, int kernels, std::vector<uint32_t>& a, std::vector<uint32_t>& b) {
  for (int k = 0; k < kernels; ++k) {
    if (k % 2 == 0) mix_cpu(n, k + 1, a, b);
    else mix_cpu(n, k + 1, b, a);
  }
}

std::vector<uint32_t> random_u32(size_t n) {
  static std::mt19937 g(std::random_device{}());
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = g();
  return v;
}

// Marks every edge into a node running kernel `name` from another kernel node programmatic,
// in every graph and body; marks the kernel as waiting at entry unless `waits` is false.
// Returns the number of edges marked.
int make_programmatic(fb::PipelineT& t, const std::string& name, bool waits = true) {
  int kernel = -1;
  for (size_t k = 0; k < t.kernels.size(); ++k)
    if (t.kernels[k]->name == name) kernel = static_cast<int>(k);
  REQUIRE(kernel >= 0);
  t.kernels[kernel]->waits_at_entry = waits;
  int marked = 0;
  std::function<void(fb::GraphT&)> walk = [&](fb::GraphT& g) {
    if (g.dep_kinds.empty()) g.dep_kinds.assign(g.deps.size(), fb::EdgeKind::Full);
    for (uint32_t i = 0; i < g.nodes.size(); ++i) {
      fb::OpT& op = *t.ops[g.nodes[i].op()];
      if (fb::ConditionalOpT* c = op.body.AsConditionalOp())
        for (auto& body : c->bodies) walk(*body);
      const fb::KernelOpT* n = op.body.AsKernelOp();
      if (!n || n->kernel != kernel) continue;
      for (uint32_t j = i == 0 ? 0 : g.nodes[i - 1].deps_end(); j < g.nodes[i].deps_end(); ++j) {
        const fb::KernelOpT* from = t.ops[g.nodes[g.deps[j]].op()]->body.AsKernelOp();
        bool launcher = !from || t.kernels[from->kernel]->launches_kernels;
        if (from)
          for (const auto& a : from->args)
            launcher |= a->kind == fb::ArgKind::GraphExec || a->kind == fb::ArgKind::GraphTable;
        if (launcher) continue;
        g.dep_kinds[j] = fb::EdgeKind::Programmatic;
        ++marked;
      }
    }
  };
  for (auto& g : t.graphs) walk(*g);
  return marked;
}

// Compiles `source` with orchc, applies `edit` to the artifact and packs it again.
std::string compile_edited(const std::string& name, const std::string& source,
                           const std::function<void(fb::PipelineT&)>& edit) {
  std::string log;
  const std::string path = orch::test::compile_source(name, source, &log, "--no-pdl --unroll 1");
  INFO(log);
  REQUIRE(!path.empty());
  orch::artifact::FileBytes file;
  std::string why;
  REQUIRE_MESSAGE(orch::artifact::read_file(path, orch::artifact::kMaxFileSize, &file, &why), why);
  auto opened = orch::artifact::open_pipeline(file.data(), file.size);
  INFO(opened.error);
  REQUIRE(opened.ok());
  std::unique_ptr<fb::PipelineT> tree(opened.pipeline->UnPack());
  edit(*tree);
  const std::string payload = orch::artifact::pack_payload(*tree);
  return orch::artifact::wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
}

std::string chain_source(int kernels) {
  return std::string("pipeline pdl_chain\ntarget sm_90\nparam n: u32 = 2053\nbuffer a: u32[n]\nbuffer b: u32[n]\n") +
         kMix + "graph main {\n" + mix_chain(kernels) + "}\n";
}

struct PdlStream {
  cudaStream_t s = nullptr;
  PdlStream() { PDL_CUDA_REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~PdlStream() {
    if (s) cudaStreamDestroy(s);
  }
};

std::vector<uint32_t> read_u32(const orch::Executable& x, const char* name, size_t n) {
  std::vector<uint32_t> out(n);
  PDL_CUDA_REQUIRE(cudaMemcpy(out.data(), x.buffer(name), n * 4, cudaMemcpyDeviceToHost));
  return out;
}

void write_u32(orch::Executable& x, const char* name, const std::vector<uint32_t>& v) {
  PDL_CUDA_REQUIRE(cudaMemcpy(x.buffer(name), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  PDL_CUDA_REQUIRE(cudaDeviceSynchronize());
}

// Launches `x` `launches` times and compares a and b with the CPU reference advanced as far:
// one launch runs `repeats` times the chain of `kernels` mixes on n elements.
void run_and_check(orch::Executable& x, cudaStream_t s, uint32_t n, int kernels, int launches,
                   std::vector<uint32_t>& a, std::vector<uint32_t>& b, int repeats = 1) {
  for (int l = 0; l < launches; ++l) {
    orch::Status st = x.launch(s);
    INFO(st.error().to_string());
    REQUIRE(st.ok());
    for (int r = 0; r < repeats; ++r) mix_chain_cpu(n, kernels, a, b);
  }
  PDL_CUDA_REQUIRE(cudaStreamSynchronize(s));
  const std::vector<uint32_t> got_a = read_u32(x, "a", a.size()), got_b = read_u32(x, "b", b.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if ((got_a[i] != a[i] || got_b[i] != b[i]) && bad++ == 0) first = i;
  INFO(bad, " of ", a.size(), " elements differ after ", launches, " launches; first at ", first, ": a ", got_a[first],
       " (want ", a[first], "), b ", got_b[first], " (want ", b[first], ")");
  CHECK(bad == 0);
}

// The mix kernel's CUBIN from orchc, loaded as a library, for graphs built here with CUDA's own
// calls. `kernel` stays null (with a MESSAGE) where the artifact has no CUBIN for this GPU.
struct MixLibrary {
  cudaLibrary_t lib = nullptr;
  cudaKernel_t kernel = nullptr;
  MixLibrary() {
    std::string log;
    const std::string path = orch::test::compile_source("pdl_raw", chain_source(2), &log, "--no-pdl --unroll 1");
    INFO(log);
    REQUIRE(!path.empty());
    orch::artifact::FileBytes file;
    std::string why;
    REQUIRE_MESSAGE(orch::artifact::read_file(path, orch::artifact::kMaxFileSize, &file, &why), why);
    auto opened = orch::artifact::open_pipeline(file.data(), file.size);
    REQUIRE(opened.ok());
    int major = 0, minor = 0, device = 0;
    PDL_CUDA_REQUIRE(cudaGetDevice(&device));
    PDL_CUDA_REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    PDL_CUDA_REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    const std::string arch = "sm_" + std::to_string(major * 10 + minor);
    const fb::Kernel* k = opened.pipeline->kernels()->Get(0);
    REQUIRE(k->name()->str() == "mix");
    for (const fb::KernelImage* img : *k->images())
      if (img->arch()->str() == arch) {
        PDL_CUDA_REQUIRE(cudaLibraryLoadData(&lib, img->cubin()->data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        PDL_CUDA_REQUIRE(cudaLibraryGetKernel(&kernel, lib, "mix"));
      }
    if (!kernel) MESSAGE("no ", arch, " CUBIN for the mix kernel: the CUDA-level probe is skipped");
  }
  ~MixLibrary() {
    if (lib) cudaLibraryUnload(lib);
  }
};

// Adds mix(n, salt, src, dst) after `after` (none if null), over a programmatic edge if asked.
cudaError_t add_mix(cudaGraphNode_t* node, cudaGraph_t g, cudaGraphNode_t after, bool programmatic,
                    cudaKernel_t kernel, unsigned n, unsigned salt, const unsigned* src, unsigned* dst) {
  void* args[] = {&n, &salt, &src, &dst};
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeKernel;
  p.kernel.func = reinterpret_cast<void*>(kernel);
  p.kernel.gridDim = dim3((n + 255) / 256);
  p.kernel.blockDim = dim3(256);
  p.kernel.kernelParams = args;
  cudaGraphEdgeData edge = {};
  if (programmatic) {
    edge.from_port = cudaGraphKernelNodePortProgrammatic;
    edge.type = cudaGraphDependencyTypeProgrammatic;
  }
  return cudaGraphAddNode(node, g, after ? &after : nullptr, after ? &edge : nullptr, after ? 1 : 0, &p);
}

}  // namespace

TEST_CASE("programmatic edges: the validator refuses one into a kernel that does not wait at entry") {
  // Needs no GPU: the file is refused before anything is loaded.
  const std::string file = compile_edited("pdl_no_wait", chain_source(4), [](fb::PipelineT& t) {
    CHECK(make_programmatic(t, "mix", /*waits=*/false) == 3);
  });
  auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().code() == orch::ErrorCode::InvalidArtifact);
  CHECK(p.error().message() ==
        "graph 'main' node 1: programmatic dependency on node 0: kernel 'mix' does not wait at entry "
        "(waits_at_entry), so it could read what node 0 writes before it is written");
}

TEST_SUITE("gpu") {

TEST_CASE("programmatic edges: a chain of 32 kernels that wait at entry is exact over 4,000 launches") {
  static constexpr int kKernels = 32;
  const std::string file = compile_edited("pdl_chain", chain_source(kKernels), [](fb::PipelineT& t) {
    REQUIRE(t.graphs[t.main_graph]->nodes.size() == kKernels);
    CHECK(make_programmatic(t, "mix") == kKernels - 1);
  });
  auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
  ORCH_REQUIRE_OK(p);
  PdlStream s;
  auto xr = (*p)->instantiate(orch::Bindings(), s.s);
  ORCH_REQUIRE_OK(xr);
  orch::Executable& x = **xr;

  uint32_t n = 2053;
  std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
  write_u32(x, "a", a);
  write_u32(x, "b", b);
  run_and_check(x, s.s, n, kKernels, 4000, a, b);

  SUBCASE("set_param patches the nodes with programmatic edges in place") {
    // n changes every grid and the `n` argument: every node is patched.
    ORCH_REQUIRE_OK(x.set_param("n", 1000u));
    const auto st = x.stats();
    MESSAGE("set_param n on a chain with programmatic edges: ", st.nodes_patched_in_place, " patched in place, ",
            st.patches_refused, " refused, ", st.graph_updates, " whole-graph updates");
    CHECK(st.nodes_patched_in_place + st.patches_refused == kKernels);
    run_and_check(x, s.s, 1000, kKernels, 1000, a, b);  // elements past 1000 stay as they were
  }
  SUBCASE("rebind patches them too") {
    void* mine = nullptr;
    PDL_CUDA_REQUIRE(cudaMalloc(&mine, n * 4));
    PDL_CUDA_REQUIRE(cudaMemcpy(mine, b.data(), n * 4, cudaMemcpyHostToDevice));
    ORCH_REQUIRE_OK(x.rebind("b", mine, n * 4));
    CHECK(x.stats().nodes_patched_in_place + x.stats().patches_refused == kKernels);
    run_and_check(x, s.s, n, kKernels, 1000, a, b);
    PDL_CUDA_REQUIRE(cudaStreamSynchronize(s.s));
    xr->reset();  // before `mine` goes
    cudaFree(mine);
  }
}

TEST_CASE("programmatic edges: the same chain without them gives the same results") {
  // The reference for the case above on the same kernels (which wait and trigger either way).
  static constexpr int kKernels = 32;
  const std::string file = compile_edited("pdl_chain_full", chain_source(kKernels), [](fb::PipelineT& t) {
    make_programmatic(t, "mix");
    t.graphs[t.main_graph]->dep_kinds.clear();  // every edge full again
  });
  auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
  ORCH_REQUIRE_OK(p);
  PdlStream s;
  auto xr = (*p)->instantiate(orch::Bindings(), s.s);
  ORCH_REQUIRE_OK(xr);
  const uint32_t n = 2053;
  std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
  write_u32(**xr, "a", a);
  write_u32(**xr, "b", b);
  run_and_check(**xr, s.s, n, kKernels, 500, a, b);
}

// What CUDA does with programmatic edges inside a WHILE body and in a graph launched from the
// device was not documented where we looked (the CUDA 13.0 headers, the programming guide's
// conditional-node and device-launch requirements name neither): these two find out. Either
// the runtime builds and runs the graph with exact results, or CUDA refuses it and instantiate
// says so in one clean error; the MESSAGE says which, for docs/format.md.
TEST_CASE("programmatic edges: inside a WHILE body (exact results, or CUDA's refusal reported cleanly)") {
  static constexpr int kKernels = 4;
  const std::string source =
      std::string("pipeline pdl_while\ntarget sm_90\nparam n: u32 = 2053\nparam iters: i32 = 37\nbuffer a: u32[n]\n"
                  "buffer b: u32[n]\nbuffer c: i32\n") +
      kMix + "graph main {\n  c = iters\n  while c > 0 {\n" + mix_chain(kKernels, "    ") + "    c -= 1\n  }\n}\n";
  int marked = 0;
  const std::string file = compile_edited("pdl_while", source, [&](fb::PipelineT& t) { marked = make_programmatic(t, "mix"); });
  CHECK(marked == kKernels - 1);
  auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
  ORCH_REQUIRE_OK(p);
  PdlStream s;
  auto xr = (*p)->instantiate(orch::Bindings(), s.s);
  if (!xr.ok()) {
    MESSAGE("CUDA refuses programmatic edges inside a WHILE body: ", xr.error().to_string());
    CHECK(xr.error().code() == orch::ErrorCode::Cuda);
    CHECK(xr.error().message().find("graph 'main'") != std::string::npos);
    return;
  }
  MESSAGE("CUDA accepts programmatic edges inside a WHILE body");
  const uint32_t n = 2053;
  std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
  write_u32(**xr, "a", a);
  write_u32(**xr, "b", b);
  run_and_check(**xr, s.s, n, kKernels, 100, a, b, /*repeats=*/37);
  CHECK(read_u32(**xr, "c", 1)[0] == 0u);
  // A new param value for the body's kernels: patched in place, or through cudaGraphExecUpdate.
  ORCH_REQUIRE_OK((*xr)->set_param("n", 999u));
  const auto st = (*xr)->stats();
  MESSAGE("set_param n in the WHILE body: ", st.nodes_patched_in_place, " patched in place, ", st.patches_refused,
          " refused, ", st.graph_updates, " whole-graph updates");
  run_and_check(**xr, s.s, 999, kKernels, 50, a, b, /*repeats=*/37);
}

TEST_CASE("programmatic edges: in a graph launched from the device (exact, or CUDA's refusal reported cleanly)") {
  static constexpr int kKernels = 8;
  const std::string source =
      std::string("pipeline pdl_device\ntarget sm_90\nparam n: u32 = 2053\nbuffer a: u32[n]\nbuffer b: u32[n]\n") +
      kMix + "graph chain device {\n" + mix_chain(kKernels) + "}\ngraph main {\n  launch chain tail\n}\n";
  int marked = 0;
  const std::string file = compile_edited("pdl_device", source, [&](fb::PipelineT& t) { marked = make_programmatic(t, "mix"); });
  CHECK(marked == kKernels - 1);
  auto p = orch::Pipeline::load_from_memory(file.data(), file.size());
  ORCH_REQUIRE_OK(p);
  PdlStream s;
  auto xr = (*p)->instantiate(orch::Bindings(), s.s);
  if (!xr.ok()) {
    MESSAGE("CUDA refuses programmatic edges in a device-launched graph: ", xr.error().to_string());
    CHECK(xr.error().code() == orch::ErrorCode::Cuda);
    CHECK(xr.error().message().find("graph 'chain'") != std::string::npos);
    return;
  }
  MESSAGE("CUDA accepts programmatic edges in a device-launched graph");
  const uint32_t n = 2053;
  std::vector<uint32_t> a = random_u32(n), b = random_u32(n);
  write_u32(**xr, "a", a);
  write_u32(**xr, "b", b);
  run_and_check(**xr, s.s, n, kKernels, 500, a, b);
  ORCH_CHECK_OK((*xr)->device_status());
}

TEST_CASE("programmatic edges at the CUDA level: cudaGraphExecUpdate, IF and WHILE bodies, device launch") {
  // What the runtime relies on, asked of CUDA directly with graphs built here: a whole-graph
  // update keeps programmatic edges working; and whether CUDA takes them inside a conditional
  // body and in a graph instantiated for device launch (the MESSAGEs say, for docs/format.md).
  MixLibrary mix;
  if (!mix.kernel) return;
  const unsigned n = 2053;
  void *pa = nullptr, *pb = nullptr;
  PDL_CUDA_REQUIRE(cudaMalloc(&pa, n * 4));
  PDL_CUDA_REQUIRE(cudaMalloc(&pb, n * 4));
  unsigned* const a = static_cast<unsigned*>(pa);
  unsigned* const b = static_cast<unsigned*>(pb);
  std::vector<uint32_t> ha = random_u32(n), hb = random_u32(n);
  auto upload = [&] {
    PDL_CUDA_REQUIRE(cudaMemcpy(a, ha.data(), n * 4, cudaMemcpyHostToDevice));
    PDL_CUDA_REQUIRE(cudaMemcpy(b, hb.data(), n * 4, cudaMemcpyHostToDevice));
  };
  // Runs `exec` once and compares with mixes of `salts` (a -> b, b -> a, ...) on the CPU.
  auto check = [&](cudaGraphExec_t exec, const std::vector<unsigned>& salts, const std::string& what) {
    PdlStream s;
    upload();
    PDL_CUDA_REQUIRE(cudaGraphLaunch(exec, s.s));
    PDL_CUDA_REQUIRE(cudaStreamSynchronize(s.s));
    for (size_t k = 0; k < salts.size(); ++k) {
      if (k % 2 == 0) mix_cpu(n, salts[k], ha, hb);
      else mix_cpu(n, salts[k], hb, ha);
    }
    std::vector<uint32_t> ga(n), gb(n);
    PDL_CUDA_REQUIRE(cudaMemcpy(ga.data(), a, n * 4, cudaMemcpyDeviceToHost));
    PDL_CUDA_REQUIRE(cudaMemcpy(gb.data(), b, n * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (unsigned i = 0; i < n; ++i) bad += (ga[i] != ha[i]) + (gb[i] != hb[i]);
    INFO(what, ": ", bad, " of ", 2 * n, " elements differ");
    CHECK(bad == 0);
  };

  // A chain of four with programmatic edges; then one node's salt changes in the template and
  // cudaGraphExecUpdate brings the executable graph along.
  cudaGraph_t g = nullptr;
  PDL_CUDA_REQUIRE(cudaGraphCreate(&g, 0));
  cudaGraphNode_t nodes[4] = {};
  for (int k = 0; k < 4; ++k)
    PDL_CUDA_REQUIRE(add_mix(&nodes[k], g, k ? nodes[k - 1] : nullptr, true, mix.kernel, n, k + 1, k % 2 ? b : a,
                             k % 2 ? a : b));
  cudaGraphExec_t exec = nullptr;
  PDL_CUDA_REQUIRE(cudaGraphInstantiate(&exec, g, 0));
  check(exec, {1, 2, 3, 4}, "chain with programmatic edges");
  {
    unsigned salt = 10, nn = n;
    const unsigned* src = a;
    unsigned* dst = b;
    void* args[] = {&nn, &salt, &src, &dst};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(mix.kernel);
    p.gridDim = dim3((n + 255) / 256);
    p.blockDim = dim3(256);
    p.kernelParams = args;
    PDL_CUDA_REQUIRE(cudaGraphKernelNodeSetParams(nodes[2], &p));
    cudaGraphExecUpdateResultInfo info = {};
    PDL_CUDA_REQUIRE(cudaGraphExecUpdate(exec, g, &info));
    check(exec, {1, 2, 10, 4}, "after cudaGraphExecUpdate");
  }

  // The same chain instantiated for device launch (launched here from the host).
  {
    cudaGraphExec_t device_exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&device_exec, g, cudaGraphInstantiateFlagDeviceLaunch);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      MESSAGE("CUDA refuses programmatic edges in a graph instantiated for device launch: ", cudaGetErrorName(e));
    } else {
      MESSAGE("CUDA accepts programmatic edges in a graph instantiated for device launch");
      PdlStream s;
      PDL_CUDA_REQUIRE(cudaGraphUpload(device_exec, s.s));
      PDL_CUDA_REQUIRE(cudaStreamSynchronize(s.s));
      check(device_exec, {1, 2, 10, 4}, "instantiated for device launch");
      PDL_CUDA_REQUIRE(cudaGraphExecDestroy(device_exec));
    }
  }
  PDL_CUDA_REQUIRE(cudaGraphExecDestroy(exec));
  PDL_CUDA_REQUIRE(cudaGraphDestroy(g));

  // Two programmatic-edged kernels in the body of an IF node (taken at every launch) and of a
  // WHILE node (never entered: its handle starts at 0; instantiation is the question).
  for (const cudaGraphConditionalNodeType type : {cudaGraphCondTypeIf, cudaGraphCondTypeWhile}) {
    const std::string name = type == cudaGraphCondTypeIf ? "an IF" : "a WHILE";
    CAPTURE(name);
    cudaGraph_t cg = nullptr;
    PDL_CUDA_REQUIRE(cudaGraphCreate(&cg, 0));
    cudaGraphConditionalHandle h;
    PDL_CUDA_REQUIRE(cudaGraphConditionalHandleCreate(&h, cg, type == cudaGraphCondTypeIf ? 1 : 0,
                                                      cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {};
    cp.type = cudaGraphNodeTypeConditional;
    cp.conditional.handle = h;
    cp.conditional.type = type;
    cp.conditional.size = 1;
    cudaGraphNode_t cond = nullptr;
    PDL_CUDA_REQUIRE(cudaGraphAddNode(&cond, cg, nullptr, nullptr, 0, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    cudaGraphNode_t first = nullptr, second = nullptr;
    PDL_CUDA_REQUIRE(add_mix(&first, body, nullptr, false, mix.kernel, n, 5, a, b));
    cudaError_t e = add_mix(&second, body, first, true, mix.kernel, n, 6, b, a);
    cudaGraphExec_t ce = nullptr;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&ce, cg, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      MESSAGE("CUDA refuses programmatic edges inside the body of ", name, " node: ", cudaGetErrorName(e));
    } else {
      MESSAGE("CUDA accepts programmatic edges inside the body of ", name, " node");
      if (type == cudaGraphCondTypeIf) check(ce, {5, 6}, "IF body");
      PDL_CUDA_REQUIRE(cudaGraphExecDestroy(ce));
    }
    PDL_CUDA_REQUIRE(cudaGraphDestroy(cg));
  }
  PDL_CUDA_REQUIRE(cudaFree(a));
  PDL_CUDA_REQUIRE(cudaFree(b));
}

}  // TEST_SUITE("gpu")
