// The passes that make graphs faster than a person builds them (issue 11): which edges become
// programmatic and why not, the kernels that wait at entry, the verifier's refusals, and what the
// artifact and the ejected CUDA say. No GPU: kernels compile with NVRTC where a test needs the
// artifact.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/pipeline_generated.h"
#include "compiler/check.h"
#include "lowering/emit_cuda.h"
#include "lowering/lower.h"
#include "lowering/passes.h"

namespace orch {
namespace {

struct Lowered {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult checked;
  lir::Program program;
};

std::unique_ptr<Lowered> lower_text(const std::string& text, const LowerOptions& options = {}) {
  auto l = std::make_unique<Lowered>();
  l->checked = check_text("t.orch", text, l->sources, {}, l->diags);
  REQUIRE_MESSAGE(!l->diags.has_errors(), format_diagnostics(l->diags.sorted(), l->sources, DiagnosticFormat::Text));
  l->program = lower_to_lir(*l->checked.program, options);
  return l;
}

// "%1 %2:programmatic" for a body: each node's dependencies, one node per line.
std::string edges(const lir::Body& b) {
  std::string out;
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    out += std::to_string(i) + " " + lir::kind_name(b.nodes[i].op) + ":";
    for (const lir::Dep& d : b.nodes[i].deps)
      out += " " + std::to_string(d.from) + (d.kind == lir::DepKind::Programmatic ? "p" : "");
    out += "\n";
  }
  return out;
}

const lir::Body& main_body(const lir::Program& p) { return p.graphs[p.main_graph].body; }

const lir::Kernel& kernel_named(const lir::Program& p, const std::string& name) {
  for (const lir::Kernel& k : p.kernels)
    if (k.name == name) return k;
  FAIL("no kernel " << name);
  return p.kernels.front();
}

std::string verify(const lir::Program& p) {
  SourceManager sources;
  DiagnosticEngine diags;
  lowering::verify_ordering(p, diags);
  std::string out;
  for (const Diagnostic& d : diags.all()) out += d.code + ": " + d.message + "\n";
  return out;
}

// A chain of user kernels, a scalar update, a fill a memset does and a copy.
const char* const kChain = R"(pipeline chain
target sm_90
param n: u32 = 1024
buffer a: u32[n]
buffer a2: u32[n]
buffer c: i32
kernel tick(c: inout i32) source """
extern "C" __global__ void tick(int* c) { if (threadIdx.x == 0) c[0] += 1; }
"""
graph main {
  fill a = 7
  tick<<<1, 32>>>(c)
  tick<<<1, 32>>>(c)
  c += 2
  tick<<<1, 32>>>(c)
  copy a -> a2
}
)";

}  // namespace

TEST_CASE("programmatic edges: kernel -> kernel edges only, and only into kernels that wait") {
  auto l = lower_text(kChain);
  const lir::Program& p = l->program;
  CHECK(p.pdl);
  // memset, tick, tick, update, tick, memcpy: the three kernel -> kernel edges are programmatic,
  // the memset -> memcpy edge stays full.
  CHECK(edges(main_body(p)) == "0 memset:\n1 kernel:\n2 kernel: 1p\n3 kernel: 2p\n4 kernel: 3p\n5 memcpy: 0\n");
  // Every generated kernel waits; a user kernel waits because programmatic edges enter it.
  CHECK(kernel_named(p, "tick").waits_at_entry);
  CHECK(kernel_named(p, "orch_update_0").waits_at_entry);
  CHECK(kernel_named(p, "orch_update_0").source.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");") !=
        std::string::npos);
  CHECK(verify(p) == "");
}

TEST_CASE("programmatic edges: a user kernel no programmatic edge enters is left as it is") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer a: u32[64]
buffer c: i32
kernel first(a: out u32[]) source """extern "C" __global__ void first(unsigned* a) {}"""
graph main {
  first<<<1, 64>>>(a)
  c += 1
}
)");
  const lir::Program& p = l->program;
  CHECK(edges(main_body(p)) == "0 kernel:\n1 kernel:\n");  // independent: no edge at all
  CHECK_FALSE(kernel_named(p, "first").waits_at_entry);
  CHECK(kernel_named(p, "orch_update_0").waits_at_entry);
}

TEST_CASE("programmatic edges: off with --no-pdl, on targets without PDL, and for archs below sm_90") {
  LowerOptions no_pdl;
  no_pdl.pdl = false;
  auto off = lower_text(kChain, no_pdl);
  CHECK_FALSE(off->program.pdl);
  CHECK(edges(main_body(off->program)) == "0 memset:\n1 kernel:\n2 kernel: 1\n3 kernel: 2\n4 kernel: 3\n5 memcpy: 0\n");
  for (const lir::Kernel& k : off->program.kernels) {
    CHECK_FALSE(k.waits_at_entry);
    CHECK(k.source.find("griddepcontrol") == std::string::npos);
  }

  std::string sm80 = kChain;
  sm80.replace(sm80.find("target sm_90"), 12, "target sm_80");
  auto a100 = lower_text(sm80);
  CHECK_FALSE(a100->program.pdl);
  CHECK(edges(main_body(a100->program)) == edges(main_body(off->program)));

  // Every target must have it: sm_90 and sm_80 together get none.
  std::string both = kChain;
  both.replace(both.find("target sm_90"), 12, "target sm_90\ntarget sm_80");
  CHECK_FALSE(lower_text(both)->program.pdl);

  // An arch list with an older arch (orchc --arch sm_80,sm_90) gets none either.
  LowerOptions archs;
  archs.compile.archs = {"sm_80", "sm_90"};
  CHECK_FALSE(lower_text(kChain, archs)->program.pdl);
  archs.compile.archs = {"sm_90", "sm_100"};
  CHECK(lower_text(kChain, archs)->program.pdl);
}

TEST_CASE("programmatic edges: none into user kernels where they cannot be patched (--emit=cuda)") {
  LowerOptions eject;
  eject.patch_user_kernels = false;
  auto l = lower_text(kChain, eject);
  // tick -> update stays programmatic (orchc's kernel waits in its source); update -> tick and
  // tick -> tick are full.
  CHECK(edges(main_body(l->program)) == "0 memset:\n1 kernel:\n2 kernel: 1\n3 kernel: 2p\n4 kernel: 3\n5 memcpy: 0\n");
  CHECK_FALSE(kernel_named(l->program, "tick").waits_at_entry);
  // The ejected file builds that edge with CUDA's edge data.
  const std::string cu = emit_cuda(l->program, l->sources);
  CHECK(cu.find("edges[0].from_port = cudaGraphKernelNodePortProgrammatic;") != std::string::npos);
  CHECK(cu.find("edges[0].type = cudaGraphDependencyTypeProgrammatic;") != std::string::npos);
  CHECK(cu.find("cudaGraphAddNode(&node[3], graph, deps, edges, 1, &node_params)") != std::string::npos);
  CHECK(cu.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");") != std::string::npos);
}

TEST_CASE("programmatic edges: full into and out of conditionals, bodies, device graphs and launchers") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer x: f32[256]
buffer y: f32[256]
buffer flag: u32
kernel k(x: inout f32[]) source """extern "C" __global__ void k(float* x) {}"""
kernel spawn(x: inout f32[]) source """
__global__ void child(float* x) {}
extern "C" __global__ void spawn(float* x) { child<<<1, 1>>>(x); }
"""
graph side device {
  k<<<1, 256>>>(y)
  k<<<1, 256>>>(y)
}
graph main {
  k<<<1, 256>>>(x)
  k<<<1, 256>>>(x)
  if flag != 0 {
    k<<<1, 256>>>(x)
    k<<<1, 256>>>(x)
  }
  k<<<1, 256>>>(x)
  launch side tail
  k<<<1, 256>>>(x)
  spawn<<<1, 1>>>(x)
  k<<<1, 256>>>(x)
}
)");
  const lir::Program& p = l->program;
  std::string all;
  for (const lir::Graph& g : p.graphs) {
    all += "graph " + g.name + "\n" + edges(g.body);
    for (const lir::Node& n : g.body.nodes)
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) all += "body\n" + edges(c->bodies[0]);
  }
  INFO(lir::print(p, l->sources));
  // Nothing but kernel -> kernel edges between kernels that launch nothing: k -> condition
  // kernel (programmatic), condition kernel -> if (full), the body's k -> k (full: inside a body),
  // if -> k (full), k -> launcher and launcher -> k (full), k -> spawn, spawn -> k (full: spawn
  // launches a kernel), the device graph's k -> k (full).
  for (const lir::Graph& g : p.graphs) {
    for (const lir::Node& n : g.body.nodes) {
      for (const lir::Dep& d : n.deps) {
        const lir::Node& from = g.body.nodes[d.from];
        const auto* fk = std::get_if<lir::KernelNode>(&from.op);
        const auto* tk = std::get_if<lir::KernelNode>(&n.op);
        bool plain = fk && tk && !g.device;
        for (const lir::KernelNode* k : {fk, tk})
          if (k) {
            const lir::Kernel& kernel = p.kernels[k->kernel];
            plain = plain && !kernel.may_launch_kernels && kernel.name.rfind("orch_launch", 0) != 0;
          }
        CAPTURE(n.what);
        CAPTURE(from.what);
        CHECK((d.kind == lir::DepKind::Programmatic) == plain);
      }
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (const lir::Node& inner : c->bodies[0].nodes)
          for (const lir::Dep& d : inner.deps) CHECK(d.kind == lir::DepKind::Full);
    }
  }
  size_t programmatic = 0;
  for (const lir::Graph& g : p.graphs)
    for (const lir::Node& n : g.body.nodes)
      for (const lir::Dep& d : n.deps) programmatic += d.kind == lir::DepKind::Programmatic;
  CHECK(programmatic >= 1);
  CHECK(verify(p) == "");

  // With the switches on (once the GPU says CUDA takes them), the body's and the device graph's
  // kernel -> kernel edges become programmatic too.
  lowering::PassOptions o;
  o.pdl = true;
  o.pdl_in_bodies = true;
  o.pdl_in_device_graphs = true;
  lir::Program q = p;
  lowering::programmatic_edges(q, o, false);
  size_t in_bodies = 0, in_device = 0;
  for (const lir::Graph& g : q.graphs)
    for (const lir::Node& n : g.body.nodes) {
      for (const lir::Dep& d : n.deps) in_device += g.device && d.kind == lir::DepKind::Programmatic;
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (const lir::Node& inner : c->bodies[0].nodes)
          for (const lir::Dep& d : inner.deps) in_bodies += d.kind == lir::DepKind::Programmatic;
    }
  CHECK(in_bodies == 1);
  CHECK(in_device == 1);
  CHECK(verify(q) == "");
  // ...and the verifier refuses them while the switches are off.
  q.pdl_in_bodies = q.pdl_in_device_graphs = false;
  CHECK(verify(q) ==
        "E0899: internal compiler error: in graph `side`, a programmatic edge in a graph launched from the device\n"
        "E0899: internal compiler error: in graph `main.0`, a programmatic edge inside a conditional body\n");
}

TEST_CASE("programmatic edges: the verifier refuses one into a kernel that does not wait, or from a copy") {
  auto l = lower_text(kChain);
  lir::Program p = l->program;
  REQUIRE(verify(p) == "");
  for (lir::Kernel& k : p.kernels)
    if (k.name == "tick") k.waits_at_entry = false;
  CHECK(verify(p) ==
        "E0899: internal compiler error: in graph `main`, a programmatic edge enters kernel `tick`, which does not "
        "wait at entry: it could touch memory before the kernel it depends on has finished\n"
        "E0899: internal compiler error: in graph `main`, a programmatic edge enters kernel `tick`, which does not "
        "wait at entry: it could touch memory before the kernel it depends on has finished\n");
  p = l->program;
  lir::Body& b = p.graphs[p.main_graph].body;
  b.nodes[5].deps[0].kind = lir::DepKind::Programmatic;  // memset -> memcpy
  CHECK(verify(p) == "E0899: internal compiler error: in graph `main`, a programmatic edge from a memset node\n");
  p = l->program;
  p.pdl = false;  // targets without PDL
  CHECK(verify(p).find("programmatic edges are off for this program") != std::string::npos);
  // A programmatic edge does not make up for a missing one: the ordering check still holds.
  p = l->program;
  p.graphs[p.main_graph].body.nodes[3].deps.clear();
  CHECK(verify(p).find("nothing orders this node after the node it conflicts with on `c`") != std::string::npos);
}

TEST_CASE("programmatic edges: the artifact holds them, the kernels wait, and the user kernel's PTX waits first") {
  auto l = std::make_unique<Lowered>();
  l->checked = check_text("t.orch", kChain, l->sources, {}, l->diags);
  REQUIRE(!l->diags.has_errors());
  LowerOptions options;
  options.compile.use_cache = false;
  std::optional<std::string> bytes = lower_to_artifact(*l->checked.program, l->sources, options, l->diags, &l->program);
  INFO(format_diagnostics(l->diags.sorted(), l->sources, DiagnosticFormat::Text));
  REQUIRE(bytes.has_value());
  std::vector<uint64_t> aligned((bytes->size() + 7) / 8);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(aligned.data()), bytes->size());
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  const fb::Pipeline& f = *opened.pipeline;
  const fb::Graph& g = *f.graphs()->Get(static_cast<flatbuffers::uoffset_t>(f.main_graph()));
  std::string kinds;
  for (const fb::Node* n : *g.nodes()) {
    kinds += n->dep_kinds() ? "[" : "-";
    if (n->dep_kinds())
      for (fb::EdgeKind k : *n->dep_kinds()) kinds += k == fb::EdgeKind::Programmatic ? "p" : "f";
    kinds += n->dep_kinds() ? "]" : "";
  }
  CHECK(kinds == "--[p][p][p]-");  // absent where every edge is full
  for (const fb::Kernel* k : *f.kernels()) CHECK(k->waits_at_entry());
  const fb::Kernel* tick = f.kernels()->Get(0);
  REQUIRE(tick->name()->str() == "tick");
  const std::string ptx(reinterpret_cast<const char*>(tick->ptx()->data()), tick->ptx()->size());
  const size_t body = ptx.find('{', ptx.find(".entry tick("));
  const size_t wait = ptx.find("griddepcontrol.wait;", body);
  REQUIRE(wait != std::string::npos);
  // Nothing but declarations and comments between the body's brace and the wait.
  std::string between = ptx.substr(body + 1, wait - body - 1);
  for (size_t line = 0; line < between.size();) {
    size_t end = between.find('\n', line);
    if (end == std::string::npos) end = between.size();
    std::string t = between.substr(line, end - line);
    t.erase(0, t.find_first_not_of(" \t"));
    CHECK((t.empty() || t.rfind("//", 0) == 0 || t.rfind(".reg", 0) == 0));
    line = end + 1;
  }
}

}  // namespace orch
