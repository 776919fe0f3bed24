// The lowered program (lowering/lir.h): what build_lir makes of each node kind, its
// dependencies and handles; the printer's text; and the artifact saying the same as the lowered
// program it was written from.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "artifact/artifact.h"
#include "artifact/pipeline_generated.h"
#include "compiler/check.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch {
namespace {

namespace fs = std::filesystem;

struct Lowered {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked;
  lir::Program program;
};

std::unique_ptr<Lowered> lower_text(const std::string& text) {
  auto l = std::make_unique<Lowered>();
  l->checked = check_text("t.orch", text, l->sources, {}, l->diags);
  REQUIRE_MESSAGE(!l->diags.has_errors(),
                  format_diagnostics(l->diags.sorted(), l->sources, DiagnosticFormat::Text));
  // The structure build_lir makes, without the speed passes (speed_test.cpp has those).
  l->program = lower_to_lir(*l->checked.program, plain_lowering());
  return l;
}

template <class T>
const T& as(const lir::Node& n) {
  const T* x = std::get_if<T>(&n.op);
  REQUIRE_MESSAGE(x, n.what, " is a ", lir::kind_name(n.op));
  return *x;
}

std::vector<uint32_t> deps(const lir::Node& n) {
  std::vector<uint32_t> out;
  for (const lir::Dep& d : n.deps) {
    CHECK(d.kind == lir::DepKind::Full);
    out.push_back(d.from);
  }
  return out;
}

// Every kind of node, kernel argument and handle there is.
const char* const kEveryKind = R"orch(pipeline every
target sm_90
param n: u32 = 256
param which: u32 = 1
comm world
buffer x: f32[n]
buffer y: f32[n]
buffer d: f64[n]
buffer z: f32[n]
buffer h: f32[n] host
buffer flag: i32
kernel work(n: u32, x: inout f32[]) source """extern "C" __global__ void work(unsigned n, float* x) {}"""
kernel spin(x: inout f32[], c: cond) source """extern "C" __global__ void spin(float* x, cudaGraphConditionalHandle c) {}"""
graph child device { work<<<ceil_div(n, 128), 128>>>(n, x) }
graph fam[i: 2] device { work<<<i + 1, 128>>>(n, z) }
graph main {
  copy h -> x
  fill y = 0
  fill d = 1.5
  work<<<ceil_div(n, 128), 128>>>(n, x)
  if flag != 0 { fill y = 1 } else { work<<<1, 128>>>(n, x) }
  while flag > 0 { flag -= 1 }
  while kernel { spin<<<1, 32>>>(x, cond) }
  switch flag {
    case 3 { fill y = 2 }
    case -1 { work<<<1, 128>>>(n, x) }
    default { fill y = 4 }
  }
  allreduce sum y on world
  launch child tail
  launch fam[which] fire_and_forget
}
)orch";

TEST_CASE("build_lir: each lowered node is its node kind, with its dependencies and handles") {
  auto l = lower_text(kEveryKind);
  const lir::Program& p = l->program;
  // Main is split: conditionals apart from the collective and the device launches.
  REQUIRE(p.segments.size() == 2);
  CHECK(p.segments[0] == p.main_graph);
  const lir::Body& first = p.graphs[p.segments[0]].body;
  const lir::Body& second = p.graphs[p.segments[1]].body;

  // copy h -> x, fill y = 0 (memset), fill d = 1.5 (a kernel: f64 halves differ), work.
  REQUIRE(first.nodes.size() >= 4);
  const auto& copy = as<lir::MemcpyNode>(first.nodes[0]);
  CHECK(p.buffers[copy.src].name == "h");
  CHECK(p.buffers[copy.dst].name == "x");
  CHECK(first.nodes[0].what == "copy h -> x");
  CHECK(deps(first.nodes[0]).empty());
  const auto& zero = as<lir::MemsetNode>(first.nodes[1]);
  CHECK(p.buffers[zero.dst].name == "y");
  CHECK(zero.value == 0);
  CHECK(zero.element_size == 4);
  const auto& fill = as<lir::KernelNode>(first.nodes[2]);
  CHECK(p.kernels[fill.kernel].generated);
  CHECK(p.kernels[fill.kernel].name.rfind("orch_fill_", 0) == 0);
  const auto& work = as<lir::KernelNode>(first.nodes[3]);
  CHECK(p.kernels[work.kernel].name == "work");
  CHECK(work.grid[0].text == "ceil_div(n, 128)");
  CHECK(work.block[0].text == "128");
  CHECK(work.grid[1].text == "1");
  CHECK(work.shared_bytes.text == "0");
  REQUIRE(work.args.size() == 2);
  CHECK(work.args[0].kind == lir::ArgKind::Value);
  CHECK(work.args[0].value.text == "n");
  REQUIRE(work.args[0].value.leaf());
  CHECK(work.args[0].value.leaf()->kind == expr::InstrKind::Param);
  CHECK(work.args[1].kind == lir::ArgKind::Buffer);
  CHECK(p.buffers[work.args[1].ref].name == "x");
  CHECK(deps(first.nodes[3]) == std::vector<uint32_t>{0});  // after the copy into x

  // Every conditional of the first segment, each after the kernel that sets its handle.
  std::vector<const lir::ConditionalNode*> conditionals;
  for (size_t i = 0; i < first.nodes.size(); ++i) {
    const auto* c = std::get_if<lir::ConditionalNode>(&first.nodes[i].op);
    if (!c) continue;
    conditionals.push_back(c);
    REQUIRE(c->handle >= 0);
    REQUIRE(static_cast<size_t>(c->handle) < p.handles.size());
    CHECK(p.handles[c->handle].graph == p.segments[0]);
    if (c->set_by_kernel) continue;  // `while kernel`: its body's kernel sets it
    bool ordered = false;
    for (uint32_t d : deps(first.nodes[i])) {
      const auto* k = std::get_if<lir::KernelNode>(&first.nodes[d].op);
      if (!k) continue;
      for (const lir::KernelArg& a : k->args)
        ordered |= a.kind == lir::ArgKind::CondHandle && a.ref == c->handle;
    }
    CHECK_MESSAGE(ordered, first.nodes[i].what);
  }
  REQUIRE(conditionals.size() == 4);
  CHECK(conditionals[0]->type == lir::ConditionalType::If);
  CHECK(conditionals[0]->bodies.size() == 2);
  CHECK(conditionals[1]->type == lir::ConditionalType::While);
  CHECK_FALSE(conditionals[1]->set_by_kernel);
  CHECK(conditionals[2]->type == lir::ConditionalType::While);
  CHECK(conditionals[2]->set_by_kernel);
  CHECK(p.handles[conditionals[2]->handle].set_default);
  CHECK(p.handles[conditionals[2]->handle].default_value == 1);
  // The `while kernel` body's kernel takes the loop's handle.
  const auto& spin = as<lir::KernelNode>(conditionals[2]->bodies[0].nodes[0]);
  CHECK(spin.args[1].kind == lir::ArgKind::CondHandle);
  CHECK(spin.args[1].ref == conditionals[2]->handle);
  const lir::ConditionalNode& sw = *conditionals[3];
  CHECK(sw.type == lir::ConditionalType::Switch);
  REQUIRE(sw.cases.size() == 2);
  CHECK(sw.cases[0].to_string() == "3");
  CHECK(sw.cases[1].to_string() == "-1");
  CHECK(sw.has_default);
  CHECK(sw.bodies.size() == 3);
  // The while loop's body ends by evaluating its condition again (fused with the update).
  const lir::Body& loop = conditionals[1]->bodies[0];
  REQUIRE(loop.nodes.size() == 1);
  const auto& again = as<lir::KernelNode>(loop.nodes[0]);
  bool sets = false;
  for (const lir::KernelArg& a : again.args) sets |= a.kind == lir::ArgKind::CondHandle && a.ref == conditionals[1]->handle;
  CHECK(sets);

  // The second segment: the allreduce, then the launchers (generated kernels).
  REQUIRE(second.nodes.size() == 3);
  const auto& reduce = as<lir::CollectiveNode>(second.nodes[0]);
  CHECK(reduce.kind == lir::CollectiveKind::AllReduce);
  CHECK(reduce.op == lir::ReduceOp::Sum);
  CHECK(p.buffers[reduce.src].name == "y");
  CHECK(reduce.src == reduce.dst);
  CHECK(p.comms[reduce.comm].name == "world");
  CHECK_FALSE(reduce.root.has_value());
  CHECK(second.nodes[0].what == "allreduce sum y on world");
  const auto& tail = as<lir::KernelNode>(second.nodes[1]);
  CHECK(p.kernels[tail.kernel].generated);
  bool exec = false, status = false;
  for (const lir::KernelArg& a : tail.args) {
    exec |= a.kind == lir::ArgKind::GraphExec && p.graphs[a.ref].name == "child" && !a.self;
    status |= a.kind == lir::ArgKind::Status;
  }
  CHECK(exec);
  CHECK(status);
  const auto& family = as<lir::KernelNode>(second.nodes[2]);
  bool table = false;
  for (const lir::KernelArg& a : family.args)
    table |= a.kind == lir::ArgKind::GraphTable && p.graphs[a.ref].name == "fam";
  CHECK(table);
  CHECK(p.status_sites.size() >= 2);

  // The family graph keeps its size and index name; the helper-free program keeps every graph.
  bool found = false;
  for (const lir::Graph& g : p.graphs)
    if (g.name == "fam") {
      found = true;
      CHECK(g.device);
      CHECK(g.family_size == 2);
      CHECK(g.family_index == "i");
      CHECK(as<lir::KernelNode>(g.body.nodes[0]).grid[0].text == "i + 1");
    }
  CHECK(found);
  CHECK(p.collective_hash != 0);
  DiagnosticEngine verify;
  CHECK(lowering::verify_ordering(p, verify));
}

TEST_CASE("build_lir: dependencies are the IR's edges, per target node, in edge order") {
  auto l = lower_text(kEveryKind);
  const mir::Program ir = lower_graphs(*l->checked.program, plain_lowering());
  const lir::Program& p = l->program;
  REQUIRE(ir.graphs.size() == p.graphs.size());
  size_t edges = 0;
  std::function<void(const mir::Region&, const lir::Body&)> same = [&](const mir::Region& r, const lir::Body& b) {
    REQUIRE(r.nodes.size() == b.nodes.size());
    std::vector<std::vector<uint32_t>> want(r.nodes.size());
    for (const mir::Edge& e : r.edges) want[e.to].push_back(static_cast<uint32_t>(e.from));
    edges += r.edges.size();
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      // A pass that adds order (one_loop_at_a_time, line_up_collectives) appends its edge and
      // says why.
      std::vector<uint32_t> got = deps(b.nodes[i]);
      if (!b.nodes[i].order_note.empty() && got.size() > want[i].size()) got.resize(want[i].size());
      CHECK(got == want[i]);
      if (const auto* c = std::get_if<lir::ConditionalNode>(&b.nodes[i].op)) {
        REQUIRE(c->bodies.size() == mir::bodies(r.nodes[i]).size());
        for (size_t k = 0; k < c->bodies.size(); ++k) same(mir::bodies(r.nodes[i])[k], c->bodies[k]);
      } else {
        CHECK(mir::bodies(r.nodes[i]).empty());
      }
    }
  };
  for (size_t g = 0; g < ir.graphs.size(); ++g) same(ir.graphs[g].body, p.graphs[g].body);
  CHECK(edges > 5);
}

TEST_CASE("build_lir: params, buffers, bind checks and kernels carry what the back ends print") {
  auto l = lower_text(R"orch(pipeline decls
param n: u32 = 1 << 10
param s: f32
buffer x: f32[n * 2]
buffer one: u64
kernel k(n: u32, s: f32, x: inout f32[]) source """extern "C" __global__ void k(unsigned n, float s, float* x) {}"""
graph main { k<<<ceil_div(n, 256), 256>>>(n, s * 2.0, x) }
)orch");
  const lir::Program& p = l->program;
  REQUIRE(p.params.size() == 2);
  CHECK(p.params[0].default_text == "1 << 10");
  REQUIRE(p.params[0].default_value);
  CHECK(p.params[0].default_value->to_string() == "1024");
  CHECK(p.params[1].default_text.empty());
  CHECK_FALSE(p.params[1].default_value);
  REQUIRE(p.buffers[0].count);
  CHECK(p.buffers[0].count->text == "n * 2");
  CHECK(p.buffers[0].count->type() == expr::ScalarType::U32);
  CHECK(p.buffers[1].is_scalar());
  CHECK_FALSE(p.bind_checks.empty());
  for (const lir::BindCheck& c : p.bind_checks) {
    CHECK_FALSE(c.code.empty());
    CHECK_FALSE(c.condition.code.empty());
    CHECK(c.condition.type() == expr::ScalarType::Bool);
  }
  REQUIRE(p.kernels.size() == 1);
  CHECK(p.kernels[0].name == "k");
  CHECK(p.kernels[0].inline_source);
  CHECK(p.kernels[0].params.size() == 3);
  CHECK(p.kernels[0].lowered_name.empty());  // not compiled yet
  const auto& k = as<lir::KernelNode>(p.graphs[p.main_graph].body.nodes[0]);
  CHECK(k.args[1].value.text == "s * 2.0");
  CHECK(k.args[1].value.type() == expr::ScalarType::F32);
}

TEST_CASE("lir printer: one line per node and a comment line, declarations first") {
  auto l = lower_text(R"orch(pipeline tiny
param n: u32 = 64
buffer x: f32[n]
buffer h: f32[n] host
buffer flag: u32
kernel k(n: u32, x: inout f32[]) source """extern "C" __global__ void k(unsigned n, float* x) {}"""
graph main {
  copy h -> x
  if flag != 0 { k<<<1, n>>>(n, x) }
  fill x = 0
}
)orch");
  const std::string want = R"(pipeline tiny  targets sm_90
param n: u32 = 64  [64]
buffer x: f32[n]
buffer h: f32[n] host
buffer flag: u32
kernel 0 k(n: u32, x: inout f32[])  inline source
kernel 1 orch_condition_0(h0: cond, b2: in u32, orch_status: status)  generated, device runtime
handle 0: graph main, default 0
bind check E0201 n * 1 * 1 <= 1024  at t.orch:9:25: block of `k` has too many threads; sm_90 allows at most 1024 per block
bind check E0202 n <= 1024  at t.orch:9:25: block of `k` has too many threads in x; sm_90 allows at most 1024
bind check E0205 n >= 1  at t.orch:9:25: block of `k` is empty in x (no threads)
status site 0: an expression evaluated by orch_condition_0  at t.orch:9:3
segments main
graph 0 main  at t.orch:7:1
  %0 = memcpy h -> x
      # copy h -> x  at t.orch:8:3; reads h; writes x
  %1 = kernel orch_condition_0<<<(1, 1, 1), (1, 1, 1), 0>>>(handle 0, flag, status)
      # orch_condition_0<<<1, 1>>>  at t.orch:9:3; reads flag
  %2 = if handle 0  after %0, %1
      # if flag != 0  at t.orch:9:3; reads flag, x; writes x
    body 0 (then):
      %0 = kernel k<<<(1, 1, 1), (n, 1, 1), 0>>>(n, x)
          # k<<<1, n>>>  at t.orch:9:18; reads x; writes x
  %3 = memset x = 0x00000000 x4 bytes  after %2
      # fill x = 0.0  at t.orch:10:3; writes x
)";
  CHECK(lir::print(l->program, l->sources) == want);
}

// The artifact written from a lowered program holds the same nodes, kinds and dependencies.
void same_graph(const lir::Program& p, const fb::Pipeline& fp, const lir::Body& b, const fb::Graph& g) {
  REQUIRE(g.nodes());
  REQUIRE(g.nodes()->size() == b.nodes.size());
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    const lir::Node& n = b.nodes[i];
    const uint32_t at = static_cast<uint32_t>(i);
    const fb::Op& f = *orch::artifact::node_ref(fp, g, at).op;
    CAPTURE(n.what);
    CHECK(f.what()->str() == n.what);
    std::vector<uint32_t> fdeps(g.deps()->begin() + orch::artifact::deps_begin(g, at),
                                g.deps()->begin() + g.nodes()->Get(at)->deps_end());
    CHECK(fdeps == deps(n));
    std::visit(lir::overloaded{
                   [&](const lir::KernelNode& k) {
                     const fb::KernelOp* o = f.body_as_KernelOp();
                     REQUIRE(o);
                     CHECK(o->kernel() == k.kernel);
                     CHECK(o->args()->size() == k.args.size());
                   },
                   [&](const lir::MemcpyNode& m) {
                     const fb::MemcpyOp* o = f.body_as_MemcpyOp();
                     REQUIRE(o);
                     CHECK(o->src() == m.src);
                     CHECK(o->dst() == m.dst);
                   },
                   [&](const lir::MemsetNode& m) {
                     const fb::MemsetOp* o = f.body_as_MemsetOp();
                     REQUIRE(o);
                     CHECK(o->dst() == m.dst);
                     CHECK(o->value() == m.value);
                     CHECK(o->element_size() == m.element_size);
                   },
                   [&](const lir::EmptyNode&) { CHECK(f.body_as_EmptyOp()); },
                   [&](const lir::ConditionalNode& c) {
                     const fb::ConditionalOp* o = f.body_as_ConditionalOp();
                     REQUIRE(o);
                     CHECK(o->handle() == c.handle);
                     REQUIRE(o->bodies()->size() == c.bodies.size());
                     for (size_t k = 0; k < c.bodies.size(); ++k)
                       same_graph(p, fp, c.bodies[k], *o->bodies()->Get(static_cast<flatbuffers::uoffset_t>(k)));
                   },
                   [&](const lir::CollectiveNode& c) {
                     const fb::CollectiveOp* o = f.body_as_CollectiveOp();
                     REQUIRE(o);
                     CHECK(o->src() == c.src);
                     CHECK(o->comm() == c.comm);
                   },
               },
               n.op);
  }
}

TEST_CASE("serialize writes the lowered program: the same graphs, nodes and handles") {
  auto l = lower_text(kEveryKind);
  lir::Program& p = l->program;
  for (lir::Kernel& k : p.kernels) {
    k.lowered_name = k.name;
    k.images = {{"sm_90", "stand-in"}};
  }
  const std::string bytes = lowering::serialize(p, l->sources);
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size());
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  const fb::Pipeline& f = *opened.pipeline;
  REQUIRE(f.graphs()->size() == p.graphs.size());
  for (size_t g = 0; g < p.graphs.size(); ++g)
    same_graph(p, f, p.graphs[g].body, *f.graphs()->Get(static_cast<flatbuffers::uoffset_t>(g)));
  REQUIRE(f.handles()->size() == p.handles.size());
  for (size_t h = 0; h < p.handles.size(); ++h) {
    CHECK(f.handles()->Get(static_cast<flatbuffers::uoffset_t>(h))->graph() == p.handles[h].graph);
    CHECK(f.handles()->Get(static_cast<flatbuffers::uoffset_t>(h))->set_default() == p.handles[h].set_default);
  }
  CHECK(f.collective_hash() == p.collective_hash);
  CHECK(f.bind_checks()->size() == p.bind_checks.size());
  CHECK(f.status_sites()->size() == p.status_sites.size());
  std::vector<int> segments(f.segments()->begin(), f.segments()->end());
  CHECK(segments == p.segments);
}

}  // namespace
}  // namespace orch
