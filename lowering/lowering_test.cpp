// The lowering passes on real pipelines: what each pass makes of conditionals, fills, scalar
// updates and device launches; the ordering verifier; and whole compiles to pipeline.bin.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>

#include "artifact/artifact.h"
#include "compiler/check.h"
#include "compiler/dag.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

std::string examples_dir() {
  return ORCH_EXAMPLES_DIR;
}

struct Checked {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult result;
  ir::Program& program() { return *result.program; }
};

std::unique_ptr<Checked> check(const std::string& text, const std::string& path = "t.orch") {
  auto c = std::make_unique<Checked>();
  c->result = check_text(path, text, c->sources, {}, c->diags);
  REQUIRE_MESSAGE(!c->diags.has_errors(),
                  format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text));
  return c;
}

std::unique_ptr<Checked> check_spec(const std::string& name) {
  auto c = std::make_unique<Checked>();
  c->result = check_file(examples_dir() + "/" + name, c->sources, {}, c->diags);
  REQUIRE_MESSAGE(!c->diags.has_errors(),
                  format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text));
  return c;
}

const ir::Kernel& kernel_of(const ir::Program& p, const ir::Node& n) {
  REQUIRE(n.kind() == ir::NodeKind::Kernel);
  return p.kernels[n.as<ir::KernelNode>().kernel];
}

// The memset node a lowered node is.
const lir::MemsetNode& memset_of(const lir::Node& n) {
  const auto* m = std::get_if<lir::MemsetNode>(&n.op);
  REQUIRE_MESSAGE(m, n.what);
  return *m;
}

// Drops every dependency of a body (not of the bodies inside it).
void clear_deps(lir::Body& b) {
  for (lir::Node& n : b.nodes) n.deps.clear();
}

TEST_CASE("jacobi: a while loop gets a handle, a condition kernel before it and one fused with "
          "the update at the end of its body") {
  auto c = check_spec("jacobi.orch");
  ir::Program& p = c->program();
  lower_graphs(p, plain_lowering());  // without unrolling (unroll_test.cpp unrolls it)
  REQUIRE(p.handles.size() == 1);
  CHECK(p.handles[0].default_value == 0);
  CHECK_FALSE(p.handles[0].set_default);
  const ir::Region& main = p.graphs[p.main_graph].body;
  // copy, copy, fill, fill, condition, while, copy
  REQUIRE(main.nodes.size() == 7);
  const ir::Kernel& before = kernel_of(p, main.nodes[4]);
  CHECK(before.generated);
  CHECK(before.source.find("cudaGraphSetConditional(h0, ") != std::string::npos);
  const ir::Node& loop = main.nodes[5];
  CHECK(loop.kind() == ir::NodeKind::While);
  CHECK(ir::conditional(loop)->handle == 0);
  CHECK(is_ordered(main, 4, 5));
  // The body: fill, sweep, sweep, and one kernel that does `iters += 2` and re-evaluates.
  const ir::Region& body = ir::bodies(loop)[0];
  REQUIRE(body.nodes.size() == 4);
  const ir::Kernel& last = kernel_of(p, body.nodes[3]);
  // expr/'s checked arithmetic: on an error the scalar keeps its value and the hook hears of it.
  CHECK(last.source.find("{ orch_v<orch_u32> r = orch_add<orch_u32>(orch_ok<orch_u32>(*b6), orch_ok<orch_u32>(2u)); "
                         "if (r.e) orch_expr_error(r.e); else *b6 = orch_to_storage<orch_u32>(r.v); }") !=
        std::string::npos);
  CHECK(last.source.find("cudaGraphSetConditional(h0, ") != std::string::npos);
  // Condition and update run after the sweep that last wrote residual.
  CHECK(is_ordered(body, 2, 3));
  // Params in the condition are value arguments the runtime patches, not constants.
  CHECK(before.source.find("float v") != std::string::npos);
}

TEST_CASE("branch: if/else and a sparse switch with default map onto dense bodies") {
  auto c = check(R"(pipeline p
buffer mode: i32
buffer x: f32[64]
graph main {
  switch mode {
    case 7 { fill x = 1 }
    case -2 { fill x = 2 }
    default { fill x = 3 }
  }
  if mode > 0 { fill x = 4 } else { fill x = 5 }
}
)");
  ir::Program& p = c->program();
  const lir::Program l = lower_to_lir(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 4);
  const ir::Node& sw = main.nodes[1];
  REQUIRE(sw.kind() == ir::NodeKind::Switch);
  CHECK(ir::bodies(sw).size() == 3);  // two cases, then the default
  const std::string& code = kernel_of(p, main.nodes[0]).source;
  // Case values in the subject's type; a subject that fails to evaluate runs no body.
  CHECK(code.find("orch_v<orch_i32> c = orch_ok<orch_i32>(*b0); unsigned index = 2u; if (c.e) { "
                  "orch_expr_error(c.e); index = 3u; } else switch (c.v) { case 7: index = 0u; break; "
                  "case (-2): index = 1u; break; default: break; }") != std::string::npos);
  CHECK(ir::bodies(main.nodes[3]).size() == 2);
  // A condition that fails to evaluate is false.
  CHECK(kernel_of(p, main.nodes[2]).source.find("cudaGraphSetConditional(h1, (!c.e && c.v) ? 1u : 0u);") !=
        std::string::npos);
  // Every fill here is a memset of a 4-byte float pattern.
  const auto& lowered_sw = std::get<lir::ConditionalNode>(l.graphs[l.main_graph].body.nodes[1].op);
  CHECK(memset_of(lowered_sw.bodies[0].nodes[0]).value == 0x3f800000u);
  CHECK(memset_of(lowered_sw.bodies[0].nodes[0]).element_size == 4);
}

TEST_CASE("countdown: `while kernel` is a do-while whose kernel gets the loop's handle") {
  auto c = check_spec("countdown.orch");
  ir::Program& p = c->program();
  lower_graphs(p);
  REQUIRE(p.handles.size() == 1);
  CHECK(p.handles[0].default_value == 1);
  CHECK(p.handles[0].set_default);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 2);  // fill, while: no condition kernel needed
  const ir::KernelNode& step = ir::bodies(main.nodes[1])[0].nodes[0].as<ir::KernelNode>();
  REQUIRE(step.args.size() == 3);
  CHECK(step.args[2].kind == ir::ArgKind::CondHandle);
  CHECK(step.args[2].ref == 0);
}

TEST_CASE("a condition kernel is ordered before its conditional node even with no data between") {
  auto c = check(R"(pipeline p
buffer bad: u32
buffer w: f32[64]
kernel k(w: inout f32[]) source """extern "C" __global__ void k(float* w) {}"""
graph main {
  if bad == 0 { k<<<1, 64>>>(w) }
}
)");
  ir::Program& p = c->program();
  lir::Program l = lower_to_lir(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 2);
  CHECK(is_ordered(main, 0, 1));
  DiagnosticEngine diags;
  CHECK(lowering::verify_ordering(l, diags));
  clear_deps(l.graphs[l.main_graph].body);
  DiagnosticEngine bad;
  CHECK_FALSE(lowering::verify_ordering(l, bad));
  REQUIRE(bad.has_errors());
  CHECK(bad.all()[0].message.find("before the kernel that sets its condition") != std::string::npos);
}

TEST_CASE("fills: memset where a 1, 2 or 4 byte pattern does it, a kernel otherwise") {
  auto c = check(R"(pipeline p
param v: u32 = 3
buffer a: f64[8]
buffer b: f64[8]
buffer h: f32[8] host
buffer e: u8[8]
buffer f: f16[8]
buffer g: u32[8]
graph main {
  fill a = 0
  fill b = 1.5
  fill h = 0
  fill e = 255
  fill f = 1
  fill g = v
}
)");
  ir::Program& p = c->program();
  const lir::Program l = lower_to_lir(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  const lir::Body& lowered = l.graphs[l.main_graph].body;
  REQUIRE(main.nodes.size() == 6);
  CHECK(main.nodes[0].kind() == ir::NodeKind::Fill);  // 8 zero bytes: two equal 4-byte halves
  CHECK(memset_of(lowered.nodes[0]).element_size == 4);
  CHECK(kernel_of(p, main.nodes[1]).name.rfind("orch_fill_", 0) == 0);  // 1.5 as f64: halves differ
  CHECK(kernel_of(p, main.nodes[2]).name.rfind("orch_fill_", 0) == 0);  // mapped host memory
  CHECK(memset_of(lowered.nodes[3]).value == 255);
  CHECK(memset_of(lowered.nodes[3]).element_size == 1);
  CHECK(memset_of(lowered.nodes[4]).value == 0x3c00);  // 1.0 in binary16
  CHECK(memset_of(lowered.nodes[4]).element_size == 2);
  CHECK(kernel_of(p, main.nodes[5]).name.rfind("orch_fill_", 0) == 0);  // a param: a kernel
}

TEST_CASE("adjacent scalar updates fuse into one kernel; separated ones do not") {
  auto c = check(R"(pipeline p
buffer a: u32
buffer b: u32
buffer x: f32[16]
kernel k(x: inout f32[]) source """extern "C" __global__ void k(float* x) {}"""
graph main {
  a = 1
  b = a + 1
  k<<<1, 16>>>(x)
  a += b
}
)");
  ir::Program& p = c->program();
  lower_graphs(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 3);
  const std::string& fused = kernel_of(p, main.nodes[0]).source;
  CHECK(fused.find("orch_v<orch_u32> r = orch_ok<orch_u32>(1u);") < fused.find("*b1 = "));
  CHECK(kernel_of(p, main.nodes[2]).generated);
}

TEST_CASE("a host graph with conditionals and device launches is split into segments") {
  auto c = check(R"(pipeline p
buffer flag: u32
buffer x: f32[64]
buffer z: f32[64]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) {}"""
graph child device { work<<<1, 64>>>(x) }
graph main {
  fill flag = 1
  if flag != 0 { work<<<1, 64>>>(x) }
  launch child tail
  work<<<1, 64>>>(z)
}
)");
  ir::Program& p = c->program();
  lower_graphs(p);
  REQUIRE(p.segments.size() == 2);
  CHECK(p.segments[0] == p.main_graph);
  const ir::Graph& first = p.graphs[p.segments[0]];
  const ir::Graph& second = p.graphs[p.segments[1]];
  CHECK(first.name == "main.0");
  CHECK(second.name == "main.1");
  bool first_has_if = false;
  for (const ir::Node& n : first.body.nodes) first_has_if |= n.kind() == ir::NodeKind::If;
  CHECK(first_has_if);
  for (const ir::Node& n : second.body.nodes) CHECK(n.kind() == ir::NodeKind::Kernel);
  // The handle lives on the segment that holds its conditional node.
  REQUIRE(p.handles.size() == 1);
  CHECK(p.handles[0].graph == p.segments[0]);
}

TEST_CASE("moe: a family launcher keeps the launched graphs' accesses for ordering") {
  auto c = check(R"(pipeline p
buffer x: f32[64]
buffer y: f32[64]
kernel work(x: in f32[], y: out f32[]) source """extern "C" __global__ void work(const float* x, float* y) {}"""
graph fam[i: 4] device { work<<<1, 64>>>(x, y) }
graph main {
  fill x = 1
  launch fam[2] tail
}
)");
  ir::Program& p = c->program();
  lower_graphs(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 2);
  const ir::Kernel& launcher = kernel_of(p, main.nodes[1]);
  CHECK(launcher.source.find("cudaGraphLaunch(g0[") != std::string::npos);
  CHECK(launcher.source.find("cudaStreamGraphTailLaunch") != std::string::npos);
  CHECK(is_ordered(main, 0, 1));  // the family reads x, which the fill writes
}

TEST_CASE("a launch is ordered after what the graphs it launches need, through nested launches") {
  // `outer` only launches `inner`, which reads x: the launch of `outer` waits for the fill.
  auto c = check(R"(pipeline p
buffer x: f32[64]
buffer y: f32[64]
kernel work(x: in f32[], y: out f32[]) source """extern "C" __global__ void work(const float* x, float* y) {}"""
graph inner device { work<<<1, 64>>>(x, y) }
graph outer device { launch inner fire_and_forget }
graph main {
  fill x = 1
  launch outer tail
}
)");
  const ir::Region& checked = c->program().graphs[c->program().main_graph].body;
  REQUIRE(checked.nodes.size() == 2);
  CHECK(is_ordered(checked, 0, 1));
  ir::Program& p = c->program();
  lower_graphs(p);
  CHECK(is_ordered(p.graphs[p.main_graph].body, 0, 1));
}

TEST_CASE("the collective hash follows the collective sequence, not the rest") {
  auto hash = [](const std::string& body) {
    auto c = check("pipeline p\nparam n: u32 = 64\ncomm world\nbuffer g: f32[n]\nbuffer h: f32[n]\n"
                   "buffer x: f32[64]\ngraph main {\n" + body + "}\n");
    return lower_to_lir(c->program()).collective_hash;
  };
  uint64_t a = hash("  allreduce sum g on world\n  allreduce max h on world\n");
  CHECK(a != 0);
  CHECK(a == hash("  fill x = 1\n  allreduce sum g on world\n  allreduce max h on world\n"));
  CHECK(a != hash("  allreduce max h on world\n  allreduce sum g on world\n"));
  CHECK(a != hash("  allreduce sum g on world\n"));
  CHECK(hash("  fill x = 1\n") == 0);
}

TEST_CASE("the verifier catches an ordering the lowering lost") {
  auto c = check_spec("jacobi.orch");
  lir::Program l = lower_to_lir(c->program());
  DiagnosticEngine ok;
  CHECK(lowering::verify_ordering(l, ok));
  CHECK_FALSE(ok.has_errors());
  // Drop the dependency that orders the while loop after the copy that fills u.
  lir::Body& main = l.graphs[l.main_graph].body;
  auto& deps = main.nodes[5].deps;
  auto it = std::find_if(deps.begin(), deps.end(), [](const lir::Dep& d) { return d.from == 0; });
  REQUIRE(it != deps.end());
  deps.erase(it);
  DiagnosticEngine bad;
  CHECK_FALSE(lowering::verify_ordering(l, bad));
  REQUIRE(bad.has_errors());
  CHECK(bad.all()[0].code == "E0899");
  CHECK(bad.all()[0].message.find("`u`") != std::string::npos);
}

TEST_CASE("the verifier requires a writer after a reader (write-after-read)") {
  // `copy x -> h` reads x, `fill x = 0` writes it: the fill must wait for the copy.
  auto c = check(R"(pipeline p
buffer x: f32[64]
buffer h: f32[64] host
graph main {
  copy x -> h
  fill x = 0
}
)");
  ir::Program& p = c->program();
  lir::Program l = lower_to_lir(p);
  ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 2);
  REQUIRE(main.edges.size() == 1);
  CHECK(main.edges[0].kind == ir::DepKind::WAR);
  DiagnosticEngine ok;
  CHECK(lowering::verify_ordering(l, ok));
  clear_deps(l.graphs[l.main_graph].body);
  DiagnosticEngine bad;
  CHECK_FALSE(lowering::verify_ordering(l, bad));
  REQUIRE(bad.has_errors());
  CHECK(bad.all()[0].message ==
        "internal compiler error: in graph `main`, nothing orders this node after the node it "
        "conflicts with on `x`");
  // Two readers need no order between them.
  auto readers = check(R"(pipeline p
buffer x: f32[64]
buffer h: f32[64] host
buffer k: f32[64] host
graph main {
  copy x -> h
  copy x -> k
}
)");
  const lir::Program lr = lower_to_lir(readers->program());
  CHECK(readers->program().graphs[readers->program().main_graph].body.edges.empty());
  DiagnosticEngine none;
  CHECK(lowering::verify_ordering(lr, none));
}

TEST_CASE("a `while kernel` inside another loop gets a kernel that sets its handle to 1 first") {
  auto c = check(R"(pipeline p
buffer outer: i32
buffer inner: i32
buffer count: i32
kernel step(inner: inout i32, count: inout i32, c: cond) source """extern "C" __global__ void step(int* inner, int* count, cudaGraphConditionalHandle c) {}"""
graph main {
  fill outer = 3
  while outer > 0 {
    fill inner = 2
    while kernel { step<<<1, 1>>>(inner, count, cond) }
    outer -= 1
  }
  while kernel { step<<<1, 1>>>(inner, count, cond) }
}
)");
  ir::Program& p = c->program();
  const lir::Program l = lower_to_lir(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  // fill, condition, while, while kernel (top level: the handle's default is enough)
  REQUIRE(main.nodes.size() == 4);
  CHECK(main.nodes[3].kind() == ir::NodeKind::While);
  const int top_handle = ir::conditional(main.nodes[3])->handle;
  const ir::Region& body = ir::bodies(main.nodes[2])[0];
  // fill inner, reset, while kernel, update + condition
  REQUIRE(body.nodes.size() == 4);
  const ir::Node& loop = body.nodes[2];
  REQUIRE(loop.kind() == ir::NodeKind::While);
  CHECK_FALSE(loop.as<ir::WhileNode>().cond.has_value());
  const ir::Kernel& reset = kernel_of(p, body.nodes[1]);
  CHECK(reset.generated);
  // Sets the loop's handle from the constant `true` (through expr/'s printer, like any condition).
  CHECK(reset.source.find("cudaGraphSetConditional(h" + std::to_string(ir::conditional(loop)->handle) + ", ") !=
        std::string::npos);
  CHECK(reset.source.find("orch_ok<orch_bool>(true)") != std::string::npos);
  CHECK(is_ordered(body, 1, 2));
  CHECK(p.handles[ir::conditional(loop)->handle].set_default);
  // No reset before the top-level loop: nothing else sets its handle there.
  for (const ir::Node& n : main.nodes)
    for (const ir::KernelArg& a : n.is<ir::KernelNode>() ? n.as<ir::KernelNode>().args : std::vector<ir::KernelArg>{})
      CHECK_FALSE((a.kind == ir::ArgKind::CondHandle && a.ref == top_handle));
  DiagnosticEngine ok;
  CHECK(lowering::verify_ordering(l, ok));
}

TEST_CASE("kernels that set one condition are ordered, and the verifier requires it") {
  auto c = check(R"(pipeline p
buffer a: i32
buffer b: i32
kernel first(a: inout i32, c: cond) source """extern "C" __global__ void first(int* a, cudaGraphConditionalHandle c) {}"""
kernel second(b: inout i32, c: cond) source """extern "C" __global__ void second(int* b, cudaGraphConditionalHandle c) {}"""
graph main {
  while kernel {
    first<<<1, 1>>>(a, cond)
    second<<<1, 1>>>(b, cond)
  }
}
)");
  // Already in the checked DAG: no buffer orders them, the handle does.
  {
    const ir::Region& body = ir::bodies(c->program().graphs[c->program().main_graph].body.nodes[0])[0];
    REQUIRE(body.edges.size() == 1);
    CHECK(body.edges[0].kind == ir::DepKind::Condition);
  }
  ir::Program& p = c->program();
  lir::Program l = lower_to_lir(p);
  ir::Region& body = ir::bodies(p.graphs[p.main_graph].body.nodes[0])[0];
  REQUIRE(body.nodes.size() == 2);
  CHECK(is_ordered(body, 0, 1));
  DiagnosticEngine ok;
  CHECK(lowering::verify_ordering(l, ok));
  clear_deps(std::get<lir::ConditionalNode>(l.graphs[l.main_graph].body.nodes[0].op).bodies[0]);
  DiagnosticEngine bad;
  CHECK_FALSE(lowering::verify_ordering(l, bad));
  REQUIRE(bad.has_errors());
  CHECK(bad.all()[0].message.find("sets the same conditional handle") != std::string::npos);
}

TEST_CASE("launchers report failed launches and out-of-range family indices to the device status") {
  auto c = check(R"(pipeline p
param which: u32 = 1
buffer x: f32[64]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) {}"""
graph one device { work<<<1, 64>>>(x) }
graph fam[i: 4] device { work<<<1, 64>>>(x) }
graph main {
  launch one tail
  launch fam[which] tail
}
)");
  ir::Program& p = c->program();
  lower_graphs(p);
  const ir::Region& main = p.graphs[p.main_graph].body;
  REQUIRE(main.nodes.size() == 2);
  REQUIRE(p.status_sites.size() == 2);
  CHECK(p.status_sites[0].what == "launch one tail");
  CHECK(p.status_sites[1].what == "launch fam[which] tail");
  for (int i = 0; i < 2; ++i) {
    const ir::Kernel& k = kernel_of(p, main.nodes[i]);
    CAPTURE(k.source);
    CHECK(k.source.find("struct OrchDeviceStatus") != std::string::npos);
    CHECK(k.source.find("const unsigned orch_site = " + std::to_string(i) + "u;") !=
          std::string::npos);
    CHECK(k.source.find("if (e != cudaSuccess) orch_report_error(orch_status, 1u, orch_site, "
                        "(unsigned)e);") != std::string::npos);
    bool has_status = false;
    for (size_t a = 0; a < k.params.size(); ++a)
      if (k.params[a].kind == ir::KernelParamKind::Status) {
        has_status = true;
        CHECK(main.nodes[i].as<ir::KernelNode>().args[a].kind == ir::ArgKind::Status);
      }
    CHECK(has_status);
  }
  const std::string& fam = kernel_of(p, main.nodes[1]).source;
  CHECK(fam.find("if (m < 4ull) { const cudaError_t e = cudaGraphLaunch(g0[m], "
                 "cudaStreamGraphTailLaunch);") != std::string::npos);
  CHECK(fam.find("else orch_report_error(orch_status, 2u, orch_site, (unsigned)m);") !=
        std::string::npos);
  // The index comes from a param: recorded for bind time.
  REQUIRE(p.bind_checks.size() == 1);
  CHECK(p.bind_checks[0].code == DiagCode::E0504);
}

TEST_CASE("a graph that is only called keeps no body of its own after lowering") {
  auto c = check(R"(pipeline p
buffer x: f32[64]
kernel again(x: inout f32[], g: graph) launches g tail <= 1 source """extern "C" __global__ void again(float* x, cudaGraphExec_t g) {}"""
graph step { again<<<1, 64>>>(x, self) }
graph rounds device { call step }
graph main { launch rounds tail }
)");
  ir::Program& p = c->program();
  lower_graphs(p);
  int step = -1, rounds = -1;
  for (size_t g = 0; g < p.graphs.size(); ++g) {
    if (p.graphs[g].name == "step") step = static_cast<int>(g);
    if (p.graphs[g].name == "rounds") rounds = static_cast<int>(g);
  }
  REQUIRE(step >= 0);
  REQUIRE(rounds >= 0);
  CHECK(p.graphs[step].body.nodes.empty());
  // Inlined into `rounds`, `self` is `rounds`.
  REQUIRE(p.graphs[rounds].body.nodes.size() == 1);
  const ir::KernelNode& k = p.graphs[rounds].body.nodes[0].as<ir::KernelNode>();
  REQUIRE(k.args.size() == 2);
  CHECK(k.args[1].self);
  CHECK(k.args[1].ref == rounds);
}

TEST_CASE("every example and bundled pipeline compiles to a pipeline.bin that verifies") {
  fs::path cache = fs::temp_directory_path() / ("orch-lowering-test-cache-" + std::to_string(getpid()));
  std::vector<fs::path> files;
  for (const std::string& dir : {examples_dir(), std::string(ORCH_PIPELINES_DIR)})
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".orch") files.push_back(entry.path());
  CHECK(files.size() >= 11);
  for (const fs::path& path : files) {
    SUBCASE(path.filename().string().c_str()) {
      auto c = std::make_unique<Checked>();
      c->result = check_file(path.string(), c->sources, {}, c->diags);
      REQUIRE_MESSAGE(!c->diags.has_errors(),
                      format_diagnostics(c->diags.sorted(), c->sources, DiagnosticFormat::Text));
      LowerOptions options;
      options.compile.cache_dir = cache.string();
      // The NVSHMEM examples link their kernels with the pinned NVSHMEM (scripts/fetch-nvshmem).
      options.compile.nvshmem_home = ORCH_TEST_NVSHMEM_HOME;
      bool symmetric = false;
      for (const ir::Buffer& b : c->program().buffers) symmetric |= b.symmetric;
      if (symmetric && options.compile.nvshmem_home.empty()) {
        MESSAGE(path.filename().string() << " uses NVSHMEM, which this build has not got (scripts/fetch-nvshmem, "
                                            "then configure again): not compiled");
        return;
      }
      DiagnosticEngine diags;
      auto bytes = lower_to_artifact(c->program(), c->sources, options, diags);
      REQUIRE_MESSAGE(bytes, format_diagnostics(diags.sorted(), c->sources, DiagnosticFormat::Text));
      // The envelope's payload starts 8-byte aligned; so must our copy.
      std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
      std::memcpy(aligned.data(), bytes->data(), bytes->size());
      auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()),
                                            bytes->size());
      REQUIRE_MESSAGE(opened.ok(), opened.error);
      std::string summary = artifact::describe_pipeline(*opened.pipeline);
      CHECK(summary.find("sm_90 CUBIN") != std::string::npos);
    }
  }
  fs::remove_all(cache);
}

TEST_CASE("every generated kernel is compiled into one module; a user kernel and its variants share one of their own") {
  // Conditions (if, while, switch), scalar updates, a fill no memset can do (f64) and a device
  // graph launcher: every kind of kernel orchc writes.
  auto c = check(R"orch(pipeline modules
target sm_90
param n: u32 = 1024
buffer x: f32[n]
buffer d: f64[n]
buffer flag: u32
buffer count: i32
kernel work(n: u32, x: inout f32[]) source """extern "C" __global__ void work(unsigned n, float* x) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }"""
graph child device { work<<<ceil_div(n, 256), 256>>>(n, x) }
graph main {
  fill d = 1.5
  count = 3
  while count > 0 {
    work<<<ceil_div(n, 256), 256>>>(n, x)
    count -= 1
  }
  if flag == 0 { work<<<ceil_div(n, 256), 256>>>(n, x) } else { fill d = 2.5 }
  switch flag {
    case 0 { fill d = 3.5 }
    case 7 { work<<<ceil_div(n, 256), 256>>>(n, x) }
  }
  launch child tail
}
)orch");
  ir::Program& p = c->program();
  LowerOptions options;
  options.compile.use_cache = false;
  DiagnosticEngine diags;
  lir::Program l;
  auto bytes = lower_to_artifact(p, c->sources, options, diags, &l);
  REQUIRE_MESSAGE(bytes, format_diagnostics(diags.sorted(), c->sources, DiagnosticFormat::Text));
  // The generated kernels' module, then `work`'s: the kernel and its guarded variant (the loop is
  // unrolled) are two entries of one image, so they share the source's device state.
  REQUIRE(l.modules.size() == 2);
  const lir::Module& m = l.modules[0];
  const lir::Module& user = l.modules[1];
  size_t user_kernels = 0;
  REQUIRE(m.images.size() == 1);
  CHECK(m.images[0].arch == "sm_90");
  CHECK(m.ptx_arch == "compute_90");
  size_t generated = 0;
  std::set<std::string> kinds;
  for (const lir::Kernel& k : l.kernels) {
    CAPTURE(k.name);
    if (!k.generated) {
      ++user_kernels;
      CHECK(k.module == 1);
      CHECK(k.images.empty());
      CHECK(k.ptx.empty());
      CHECK(user.ptx.find(".entry " + k.lowered_name + "(") != std::string::npos);
      continue;
    }
    ++generated;
    kinds.insert(k.name.substr(0, k.name.rfind('_')));
    CHECK(k.module == 0);
    CHECK(k.images.empty());
    CHECK(k.ptx.empty());
    CHECK(k.lowered_name == k.name);
    // Every kernel is an entry of the module's code, under its own name.
    CHECK(m.ptx.find(".entry " + k.name + "(") != std::string::npos);
    CHECK(m.images[0].cubin.find(k.name + std::string(1, '\0')) != std::string::npos);
  }
  CHECK(generated >= 6);
  CHECK(kinds.size() >= 3);  // conditions, updates or fills, launchers
  std::string kind_list;
  for (const std::string& k : kinds) kind_list += " " + k;
  MESSAGE(generated << " generated kernels (" << kind_list << " ): one module, "
                    << m.images[0].cubin.size() << " bytes of CUBIN");
  // The artifact says so, and validates.
  std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes->size());
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  const std::string summary = artifact::describe_pipeline(*opened.pipeline);
  CHECK(user_kernels == 2);
  CHECK(summary.find("modules (2):\n  [0] " + std::to_string(generated) + " kernels\n") != std::string::npos);
  CHECK(summary.find("  [1] 2 kernels\n") != std::string::npos);
}

TEST_CASE("orchc never leaves a partial pipeline.bin or replaces a good one on failure") {
  fs::path dir = fs::temp_directory_path() / ("orch-atomic-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "p.bin";
  std::ofstream(out) << "a good file";
  std::ofstream(dir / "bad.orch") << R"(pipeline bad
buffer x: f32[16]
kernel k(x: inout f32[]) source """
extern "C" __global__ void k(float* x) { this does not compile; }
"""
graph main { k<<<1, 16>>>(x) }
)";
  std::string cmd = std::string(ORCHC_PATH) + " --no-cache " + (dir / "bad.orch").string() +
                    " -o " + out.string() + " > " + (dir / "log").string() + " 2>&1";
  int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 1);
  std::ifstream in(out);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  CHECK(content == "a good file");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++files;
  CHECK(files == 3);  // bad.orch, p.bin, log: no temporary left behind
  std::ifstream log(dir / "log");
  std::string text((std::istreambuf_iterator<char>(log)), {});
  CHECK(text.find("bad.orch:4:") != std::string::npos);  // the NVRTC error, at its .orch line
  CHECK(text.find("error[E0901]") != std::string::npos);
  fs::remove_all(dir);
}

// `orchc --check`, the CI gate, sees what the compiler sees (issue 20): a kernel that does not
// compile and a declaration its compiled code does not match are errors there, not only at -o;
// `--check --no-kernels` is the checker's rules alone; nothing is written either way.
TEST_CASE("orchc --check compiles the kernels; --check --no-kernels does not") {
  fs::path dir = fs::temp_directory_path() / ("orch-check-kernels-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string syntax = R"(pipeline bad
buffer x: f32[256]
kernel k(x: inout f32[]) source """
extern "C" __global__ void k(float* x) { x[threadIdx.x] = this is not cuda; }
"""
graph main { k<<<1, 256>>>(x) }
)";
  const std::string params = R"(pipeline mismatch
buffer x: f32[256]
kernel m(n: u32, x: inout f32[]) source """
extern "C" __global__ void m(float* x) { x[threadIdx.x] = 1.0f; }
"""
graph main { m<<<1, 256>>>(256, x) }
)";
  auto run = [&](const std::string& name, const std::string& text, const std::string& flags, std::string* log) {
    std::ofstream(dir / (name + ".orch")) << text;
    const std::string cmd = std::string(ORCHC_PATH) + " " + flags + " --color=never " + (dir / (name + ".orch")).string() +
                            " > " + (dir / "log").string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(dir / "log");
    log->assign((std::istreambuf_iterator<char>(in)), {});
    return WEXITSTATUS(status);
  };
  std::string log;
  CHECK(run("syntax", syntax, "--check", &log) == 1);
  CHECK(log.find("syntax.orch:4:59: error[E0901]") != std::string::npos);
  CHECK(run("syntax", syntax, "--check --no-kernels", &log) == 0);
  CHECK(log.empty());
  CHECK(run("mismatch", params, "--check", &log) == 1);
  CHECK(log.find("error[E0120]: kernel `m` declares 2 parameters, but its compiled code takes 1") != std::string::npos);
  CHECK(run("mismatch", params, "--check --no-kernels", &log) == 0);
  CHECK(run("mismatch", params, "--no-kernels", &log) == 2);
  CHECK(log == "orchc: --no-kernels goes with --check (a compile always compiles its kernels)\n");
  // Nothing written beside the inputs and the log.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) (void)e, ++files;
  CHECK(files == 3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace orch
