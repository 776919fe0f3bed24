// The passes that make graphs faster than a person builds them (issue 11): which edges become
// programmatic and why not, the kernels that wait at entry, the verifier's refusals, and what the
// artifact and the ejected CUDA say. No GPU: kernels compile with NVRTC where a test needs the
// artifact.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>
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

// `text` compiled to an artifact (the kernel cache off) and opened as the runtime opens it; the
// lowered program it was written from in ->program.
struct CompiledArtifact : Lowered {
  std::vector<uint64_t> aligned;
  const fb::Pipeline* pipeline = nullptr;
};

std::unique_ptr<CompiledArtifact> compile_artifact(const std::string& text) {
  auto l = std::make_unique<CompiledArtifact>();
  l->checked = check_text("t.orch", text, l->sources, {}, l->diags);
  REQUIRE(!l->diags.has_errors());
  LowerOptions options;
  options.compile.use_cache = false;
  std::optional<std::string> bytes = lower_to_artifact(*l->checked.program, l->sources, options, l->diags, &l->program);
  INFO(format_diagnostics(l->diags.sorted(), l->sources, DiagnosticFormat::Text));
  REQUIRE(bytes.has_value());
  l->aligned.resize((bytes->size() + 7) / 8);
  std::memcpy(l->aligned.data(), bytes->data(), bytes->size());
  auto opened = artifact::open_pipeline(reinterpret_cast<const uint8_t*>(l->aligned.data()), bytes->size());
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  l->pipeline = opened.pipeline;
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

// How many of main's top-level edges are programmatic.
size_t programmatic(const lir::Program& p) {
  size_t n = 0;
  for (const lir::Node& node : main_body(p).nodes)
    for (const lir::Dep& d : node.deps) n += d.kind == lir::DepKind::Programmatic;
  return n;
}

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

namespace {

// Whether the lines strictly between the lines holding `from` and `to` in `code` are only
// preprocessor lines and the status site's constant: nothing that runs or touches memory.
bool only_inert_between(const std::string& code, size_t from, size_t to) {
  size_t line = code.find('\n', from);
  const size_t last = code.rfind('\n', to);
  while (line != std::string::npos && line < last) {
    const size_t next = code.find('\n', line + 1);
    std::string t = code.substr(line + 1, next - line - 1);
    t.erase(0, t.find_first_not_of(" \t"));
    if (!t.empty() && t[0] != '#' && t.rfind("const unsigned orch_site = ", 0) != 0) return false;
    line = next;
  }
  return true;
}

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
  // The wait, then the trigger that lets the next kernel launch (kPdlTrigger), before anything else.
  const std::string& update = kernel_named(p, "orch_update_0").source;
  const size_t wait = update.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
  const size_t trigger = update.find("asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");");
  REQUIRE(wait != std::string::npos);
  REQUIRE(trigger != std::string::npos);
  CHECK(wait < trigger);
  CHECK(only_inert_between(update, wait, trigger));
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
  // Kernel -> kernel edges between kernels that launch nothing are programmatic, and nothing else
  // is: k -> condition kernel, the body's k -> k, the device graph's k -> k (the GPU said CUDA
  // takes the last two: pdl_gpu_test.cpp); condition kernel -> if, if -> k, k -> launcher and
  // launcher -> k, k -> spawn and spawn -> k (spawn launches a kernel) stay full.
  // `off`: with the switches for bodies and device graphs off, those edges are full too.
  auto check_edges = [&](const lir::Program& q, bool off) {
    size_t in_bodies = 0, in_device = 0, programmatic = 0;
    for (const lir::Graph& g : q.graphs) {
      for (const lir::Node& n : g.body.nodes) {
        for (const lir::Dep& d : n.deps) {
          const lir::Node& from = g.body.nodes[d.from];
          const auto* fk = std::get_if<lir::KernelNode>(&from.op);
          const auto* tk = std::get_if<lir::KernelNode>(&n.op);
          bool plain = fk && tk && !(off && g.device);
          for (const lir::KernelNode* k : {fk, tk})
            if (k) {
              const lir::Kernel& kernel = q.kernels[k->kernel];
              plain = plain && !kernel.may_launch_kernels && kernel.name.rfind("orch_launch", 0) != 0;
            }
          CAPTURE(n.what);
          CAPTURE(from.what);
          CHECK((d.kind == lir::DepKind::Programmatic) == plain);
          programmatic += d.kind == lir::DepKind::Programmatic;
          in_device += g.device && d.kind == lir::DepKind::Programmatic;
        }
        if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
          for (const lir::Node& inner : c->bodies[0].nodes)
            for (const lir::Dep& d : inner.deps) in_bodies += d.kind == lir::DepKind::Programmatic;
      }
    }
    CHECK(programmatic >= 1);
    CHECK(in_bodies == (off ? 0u : 1u));
    CHECK(in_device == (off ? 0u : 1u));
    CHECK(verify(q) == "");
  };
  check_edges(p, false);
  // The verifier refuses them where the switches are off...
  lir::Program q = p;
  q.pdl_in_bodies = q.pdl_in_device_graphs = false;
  CHECK(verify(q) ==
        "E0899: internal compiler error: in graph `side`, a programmatic edge in a graph launched from the device\n"
        "E0899: internal compiler error: in graph `main.0`, a programmatic edge inside a conditional body\n");
  // ...and the pass makes none there with them off.
  lowering::PassOptions o;
  o.pdl = true;
  o.pdl_in_bodies = false;
  o.pdl_in_device_graphs = false;
  o.residency = lowering::residency_of(l->checked.program->profile);
  q = p;
  lowering::programmatic_edges(q, o, false);
  check_edges(q, true);
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
  auto l = compile_artifact(kChain);
  const fb::Pipeline& f = *l->pipeline;
  const fb::Graph& g = *f.graphs()->Get(static_cast<flatbuffers::uoffset_t>(f.main_graph()));
  // Per node: "-" without dependencies, else the kind of each ("p" programmatic, "f" full).
  std::string kinds;
  REQUIRE(g.dep_kinds());
  for (uint32_t i = 0; i < g.nodes()->size(); ++i) {
    const uint32_t first = orch::artifact::deps_begin(g, i), end = g.nodes()->Get(i)->deps_end();
    if (first == end) kinds += "-";
    else kinds += "[";
    for (uint32_t j = first; j < end; ++j) kinds += g.dep_kinds()->Get(j) == fb::EdgeKind::Programmatic ? "p" : "f";
    if (first != end) kinds += "]";
  }
  CHECK(kinds == "--[p][p][p][f]");
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
  // The trigger is the next instruction.
  const std::string wait_then_trigger = "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n";
  CHECK(ptx.compare(wait, wait_then_trigger.size(), wait_then_trigger) == 0);
}

}  // namespace orch

namespace orch {
namespace {

// The loop of the benchmark: `while c > 0 { step }`, step a user kernel that decrements c.
const char* const kCountdown = R"(pipeline countdown
target sm_90
param n: i32 = 1000
buffer c: i32
kernel step(c: inout i32) source """
extern "C" __global__ void step(int* c) { if (threadIdx.x == 0) --(*c); }
"""
graph main {
  fill c = n
  while c > 0 {
    step<<<1, 32>>>(c)
  }
}
)";

const lir::ConditionalNode& first_loop(const lir::Program& p) {
  for (const lir::Node& n : main_body(p).nodes)
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) return *c;
  FAIL("no conditional node");
  return std::get<lir::ConditionalNode>(main_body(p).nodes.front().op);
}

// Each node of a body as "kernel-name[copy/role]" (or its kind), in order.
std::string copies(const lir::Program& p, const lir::Body& b) {
  std::string out;
  for (const lir::Node& n : b.nodes) {
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    std::string name = k ? p.kernels[k->kernel].name : lir::kind_name(n.op);
    if (name.rfind("orch_", 0) == 0) name = name.substr(5, name.find('_', 5) - 5);  // orch_update_3 -> update
    out += (out.empty() ? "" : " ") + name;
    if (n.guard) out += "[" + std::to_string(n.guard->copy) + "/" + ir::to_string(n.guard->role) + "]";
  }
  return out;
}

std::vector<std::string> unroll_notes(const std::string& text, const LowerOptions& options = {}) {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  REQUIRE_MESSAGE(!diags.has_errors(), format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
  lowering::PassOptions o;
  o.unroll = options.unroll;
  o.patch_user_kernels = options.patch_user_kernels;
  o.residency = lowering::residency_of(r.program->profile);
  lowering::drop_helper_graphs(*r.program);
  lowering::split_segments(*r.program);
  lowering::lower_conditions(*r.program);
  return lowering::unroll_loops(*r.program, o);
}

}  // namespace

TEST_CASE("unroll: `while c > 0 { step }` runs 16 copies of step per WHILE iteration, each deciding alone") {
  auto l = lower_text(kCountdown);
  const lir::Program& p = l->program;
  const lir::ConditionalNode& loop = first_loop(p);
  std::string expected = "step ";
  for (int k = 2; k <= 16; ++k) expected += "step[" + std::to_string(k) + "/alone] ";
  CHECK(copies(p, loop.bodies[0]) == expected + "condition");
  REQUIRE(p.unrolled_loops.size() == 1);
  CHECK(p.unrolled_loops[0].copies == 16);  // the compiler's choice for a body of one node
  // One guarded variant of step (the copy's slot index is an argument), calling the guard at entry.
  size_t variants = 0;
  for (const lir::Kernel& k : p.kernels)
    if (k.guard_of >= 0) {
      ++variants;
      CHECK(k.name == "step");
      CHECK(k.guard_code.find("extern \"C\" __device__ unsigned orch_guard(") != std::string::npos);
      // The function returns thread 0's decision; the patched entry ORs it over the block.
      CHECK(k.guard_code.find("return orch_go;") != std::string::npos);
      CHECK(k.guard_code.find("__syncthreads_or") == std::string::npos);
      CHECK(k.guard_code.find("atomicCAS(orch_slot") == std::string::npos);  // alone: no atomics
      REQUIRE(k.params.size() == 4);  // c, then the slot index, c again (the condition's), status
      CHECK(k.guard_param_sizes == std::vector<uint32_t>{4, 8, 8});
    }
  CHECK(variants == 1);
  // The slots: one per copy from 2 on; both condition kernels reset them.
  const lir::Buffer& slots = p.buffers[p.unrolled_loops[0].slots];
  CHECK(slots.name == "orch.guard.0");
  CHECK(slots.count->text == "15");
  size_t resets = 0;
  for (const lir::Kernel& k : p.kernels)
    resets += k.source.find("for (unsigned i = 0u; i < 15u; ++i) b1[i] = 0u;") != std::string::npos;
  CHECK(resets == 2);
  CHECK(verify(p) == "");
}

TEST_CASE("unroll: --unroll N sets the copies, 1 turns it off, and long bodies get fewer") {
  LowerOptions three;
  three.unroll = 3;
  CHECK(lower_text(kCountdown, three)->program.unrolled_loops.at(0).copies == 3);
  LowerOptions off;
  off.unroll = 1;
  auto plain = lower_text(kCountdown, off);
  CHECK(plain->program.unrolled_loops.empty());
  CHECK(copies(plain->program, first_loop(plain->program).bodies[0]) == "step condition");
  CHECK(unroll_notes(kCountdown, off) == std::vector<std::string>{"unrolling off (--unroll 1)"});
  CHECK(unroll_notes(kCountdown) ==
        std::vector<std::string>{
            "`while c > 0` at line 10:3: 16 copies of its body per WHILE iteration (the compiler's choice for 1 node)"});
  LowerOptions eight;
  eight.unroll = 8;
  CHECK(unroll_notes(kCountdown, eight) ==
        std::vector<std::string>{"`while c > 0` at line 10:3: 8 copies of its body per WHILE iteration"});

  // 99 statements: 256 / 99 = 2 copies; 139: no room for a second.
  auto body_of = [](int statements) {
    std::string s = "pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n  while c > 0 {\n";
    for (int i = 0; i < statements - 1; ++i) s += "    x += " + std::to_string(i % 2 ? 1 : 2) + "\n    c += 0\n";
    return s + "    c -= 1\n  }\n}\n";
  };
  // (Counted before fusion, which runs after unrolling and joins the adjacent updates of a copy.)
  auto two = lower_text(body_of(50));  // 99 statements
  REQUIRE(two->program.unrolled_loops.size() == 1);
  CHECK(two->program.unrolled_loops[0].copies == 2);
  CHECK(unroll_notes(body_of(70)).at(0) ==
        "`while c > 0` at line 7:3: not unrolled: its 139 nodes leave no room for a second copy under 256 nodes per body");
}

TEST_CASE("unroll: a guarded generated kernel triggers its dependents after its guard, an unguarded one at once") {
  auto l = lower_text("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n"
                      "  while c > 0 {\n    x += 2\n    c -= 1\n  }\n}\n");
  size_t guarded = 0, plain = 0;
  for (const lir::Kernel& k : l->program.kernels) {
    if (!k.generated || !k.waits_at_entry) continue;
    CAPTURE(k.name);
    const size_t wait = k.source.find("griddepcontrol.wait;");
    const size_t trigger = k.source.find("griddepcontrol.launch_dependents;");
    REQUIRE(wait != std::string::npos);
    REQUIRE(trigger != std::string::npos);
    CHECK(k.source.find("griddepcontrol.launch_dependents;", trigger + 1) == std::string::npos);
    if (k.guard) {
      ++guarded;
      // Every way out of the guard (`return;`) comes before the trigger: a block that skips
      // the copy exits, which counts as its trigger.
      const size_t guard_end = k.source.rfind("return;");
      REQUIRE(guard_end != std::string::npos);
      CHECK(wait < guard_end);
      CHECK(guard_end < trigger);
    } else {
      ++plain;
      CHECK(only_inert_between(k.source, wait, trigger));
    }
  }
  CHECK(guarded > 0);
  CHECK(plain > 0);
  CHECK(verify(l->program) == "");
}

TEST_CASE("unroll: the compiler's choice is 16 copies for a body of one node, 8 for longer ones") {
  CHECK(lowering::auto_unroll(1) == 16);
  CHECK(lowering::auto_unroll(2) == 8);
  CHECK(lowering::auto_unroll(3) == 8);
  CHECK(lowering::auto_unroll(40) == 8);
  // A body of two statements: 8 copies, 16 nodes.
  auto two = lower_text("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n"
                        "  while c > 0 {\n    x += 2\n    c -= 1\n  }\n}\n");
  REQUIRE(two->program.unrolled_loops.size() == 1);
  CHECK(two->program.unrolled_loops[0].copies == 8);
}

TEST_CASE("unroll: what is not unrolled says why") {
  auto note = [](const std::string& body, const std::string& extra = "") {
    return unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer h: i32 host\nbuffer g: i32\ncomm world\n"
                        "buffer sx: f32[4]\nbuffer sy: f32[4]\n" + extra +
                        "graph main {\n  fill c = 3\n  while c > 0 {\n" + body + "    c -= 1\n  }\n}\n")
        .at(0);
  };
  const std::string at = "`while c > 0` at line 11:3: not unrolled: ";
  CHECK(note("    if g > 0 { g -= 1 }\n") ==
        "`while c > 0` at line 11:3: not unrolled: its body holds a conditional (each copy would need a conditional "
        "node and handle of its own)");
  CHECK(note("    copy h -> g\n") ==
        at + "its body copies host memory (a guarded copy would be a kernel touching mapped host memory)");
  CHECK(note("    fill h = 1\n") ==
        at + "its body fills host memory (a guarded fill would be a kernel touching mapped host memory)");
  // Collectives, graph launches and kernels that launch kernels cannot be in a loop body at all
  // (E0401, E0604, E0507); unroll_loops refuses them too, should that change.
  const std::string k = "kernel k(g: inout i32) source \"\"\"extern \"C\" __global__ void k(int* g) {}\"\"\"\n";
  LowerOptions eject = for_emit_cuda();
  CHECK(unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer g: i32\n" + k +
                         "graph main {\n  fill c = 3\n  while c > 0 {\n    k<<<1, 1>>>(g)\n    c -= 1\n  }\n}\n",
                     eject)
            .at(0) ==
        "`while c > 0` at line 8:3: not unrolled: user kernel `k` cannot be guarded here (--emit=cuda: nvcc compiles "
        "it from its source)");
  CHECK(unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\n"
                     "kernel dec(c: inout i32, go: cond) source \"\"\"extern \"C\" __global__ void dec(int* c, "
                     "cudaGraphConditionalHandle go) { cudaGraphSetConditional(go, --*c > 0); }\"\"\"\n"
                     "graph main {\n  fill c = 3\n  while kernel {\n    dec<<<1, 1>>>(c, cond)\n  }\n}\n")
            .at(0) ==
        "`while kernel` at line 7:3: not unrolled: its body kernel sets the condition through "
        "cudaGraphSetConditional, whose value no other kernel can read");
  // A loop inside a loop: the inner one is unrolled, the outer holds a conditional.
  const std::vector<std::string> nested =
      unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer d: i32\ngraph main {\n  fill c = 3\n"
                   "  while c > 0 {\n    fill d = 4\n    while d > 0 { d -= 1 }\n    c -= 1\n  }\n}\n");
  CHECK(nested == std::vector<std::string>{
                      "`while d > 0` at line 9:5: 16 copies of its body per WHILE iteration (the compiler's choice "
                      "for 1 node)",
                      "`while c > 0` at line 7:3: not unrolled: its body holds a conditional (each copy would need a "
                      "conditional node and handle of its own)"});
}

TEST_CASE("unroll: roles follow the edges within a copy") {
  auto l = lower_text(R"(pipeline shapes
target sm_90
param n: u32 = 1000
param limit: i32 = 37
buffer a: f32[n]
buffer b: f32[n]
buffer s: f32[16]
buffer c: i32
buffer d: i32
kernel wide(n: u32, a: inout f32[]) source """
extern "C" __global__ void wide(unsigned n, float* a) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = a[i] * 0.5f + 1.0f; }
"""
kernel count(c: inout i32) source """
extern "C" __global__ void count(int* c) { if (threadIdx.x == 0) *c += 1; }
"""
graph main {
  fill c = 0
  fill d = 0
  while c < limit {
    wide<<<ceil_div(n, 256), 256>>>(n, a)
    copy a -> b
    fill s = 2
    d += 3
    count<<<1, 32>>>(c)
  }
}
)");
  const lir::Program& p = l->program;
  const std::string body = copies(p, first_loop(p).bodies[0]);
  // Copy 1 as written (a memset does the fill, a memcpy the copy); in copies 2 on three sources
  // (the wide kernel, the fill, the update of d) write nothing the condition reads, so each of
  // their threads decides; the copy follows the wide kernel, count follows everything (it writes
  // c, which every guard reads).
  CHECK(body.rfind("wide memcpy memset update count wide[2/each] copy[2/follow] fill[2/each] update[2/each] "
                   "count[2/follow] wide[3/each]",
                   0) == 0);
  CHECK(verify(p) == "");
  for (const lir::Kernel& k : p.kernels) {
    if (!k.generated || !k.guard) continue;
    CHECK(k.source.find(lowering::kGuardPlaceholder) == std::string::npos);
    const bool race = k.guard->role == ir::GuardRole::Race;
    CHECK((k.source.find("atomicCAS(orch_slot, 0u, 1u)") != std::string::npos) == race);
  }

  // A source of several blocks that writes what the condition reads races for the slot: its
  // early blocks may write c before its late ones start.
  auto racing = lower_text(R"(pipeline p
target sm_90
param n: u32 = 1000
buffer c: i32
buffer x: f32[n]
kernel bump(n: u32, c: inout i32, x: inout f32[]) source """
extern "C" __global__ void bump(unsigned n, int* c, float* x) { if (blockIdx.x == 0 && threadIdx.x == 0) *c -= 1; }
"""
graph main {
  fill c = 5
  while c > 0 {
    bump<<<ceil_div(n, 256), 256>>>(n, c, x)
  }
}
)");
  const std::string racing_body = copies(racing->program, first_loop(racing->program).bodies[0]);
  INFO(racing_body);
  CHECK(racing_body.rfind("bump bump[2/race] bump[3/race]", 0) == 0);
  CHECK(verify(racing->program) == "");

  // A chain whose source runs one block: it decides and stores, the rest follow.
  auto chain = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer x: f32[4096]
graph main {
  fill c = 5
  while c > 0 {
    c -= 1
    fill x = 1.5
  }
}
)");
  CHECK(copies(chain->program, first_loop(chain->program).bodies[0]) ==
        "update memset update[2/decide] fill[2/follow] update[3/decide] fill[3/follow] update[4/decide] "
        "fill[4/follow] update[5/decide] fill[5/follow] update[6/decide] fill[6/follow] update[7/decide] "
        "fill[7/follow] update[8/decide] fill[8/follow] condition");
  CHECK(verify(chain->program) == "");
}

TEST_CASE("unroll: the guard code of each role") {
  using lowering::guard_statement;
  const std::string t = "T", s = "S", i = "2u";
  // Every thread decides, no barrier; thread 0 of a block reports, block 0 stores.
  const std::string each =
      "{ orch_v<orch_bool> orch_c = T; if (orch_c.e && threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) "
      "orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); const unsigned orch_go = (!orch_c.e && orch_c.v) ? "
      "1u : 0u; if (blockIdx.x == 0u && blockIdx.y == 0u && blockIdx.z == 0u && threadIdx.x == 0u && threadIdx.y == 0u "
      "&& threadIdx.z == 0u) *(volatile unsigned*)(S + 2u) = orch_go ? 2u : 3u; ";
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Each, false) == each + "if (!orch_go) return; }");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Each, true) == each + "return orch_go; }");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Follow, false) ==
        "if (*(volatile const unsigned*)(S + 2u) != 2u) return;");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Alone, true) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; } return orch_go; }");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Follow, true) ==
        "return *(volatile const unsigned*)(S + 2u) == 2u ? 1u : 0u;");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Decide, false) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; *(volatile unsigned*)(S + 2u) = orch_go ? 2u : 3u; } "
        "{ const unsigned orch_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); const unsigned orch_n = blockDim.x * blockDim.y * blockDim.z - (orch_t & ~31u); __syncwarp(orch_n >= 32u ? 0xffffffffu : (1u << orch_n) - 1u); } if (!__syncthreads_or(orch_go)) return; }");
  CHECK(guard_statement(t, s, i, 4, ir::GuardRole::Race, false) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "unsigned* const orch_slot = (S + 2u); unsigned orch_s = *(volatile unsigned*)orch_slot; "
        "if (orch_s == 0u) orch_s = atomicCAS(orch_slot, 0u, 1u); if (orch_s == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_s = (!orch_c.e && orch_c.v) ? 2u : 3u; __threadfence(); atomicExch(orch_slot, orch_s); } else { "
        "while (orch_s == 1u) orch_s = *(volatile unsigned*)orch_slot; __threadfence(); } "
        "orch_go = orch_s == 2u ? 1u : 0u; } { const unsigned orch_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); const unsigned orch_n = blockDim.x * blockDim.y * blockDim.z - (orch_t & ~31u); __syncwarp(orch_n >= 32u ? 0xffffffffu : (1u << orch_n) - 1u); } if (!__syncthreads_or(orch_go)) return; }");
}

TEST_CASE("unroll: fusion keeps copies apart") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer d: i32
graph main {
  fill c = 5
  while c > 0 {
    d += 1
    c -= 1
  }
}
)");
  // Within a copy the two updates are one kernel; never across copies, never with the condition.
  CHECK(copies(l->program, first_loop(l->program).bodies[0]) ==
        "update update[2/alone] update[3/alone] update[4/alone] update[5/alone] update[6/alone] update[7/alone] "
        "update[8/alone] condition");
}

TEST_CASE("unroll: the verifier refuses a broken guard protocol") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer x: f32[4096]
graph main {
  fill c = 5
  while c > 0 {
    c -= 1
    fill x = 1.5
  }
}
)");
  auto body = [](lir::Program& p) -> lir::Body& {
    for (lir::Node& n : p.graphs[p.main_graph].body.nodes)
      if (auto* c = std::get_if<lir::ConditionalNode>(&n.op)) return c->bodies[0];
    FAIL("no loop");
    return p.graphs[p.main_graph].body;
  };
  {
    lir::Program p = l->program;  // a follower with nothing of its copy before it
    lir::Body& b = body(p);
    b.nodes[3].deps.clear();
    CHECK(verify(p).find("follows its copy's decision, but no node of its copy comes before it") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // an unguarded node among the copies
    body(p).nodes[4].guard.reset();
    CHECK(verify(p).find("sits among loop 0's guarded copies without a guard of its own") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // nothing resets the slots
    lir::Body& b = body(p);
    for (lir::BufferAccess& a : b.nodes.back().accesses)
      if (a.buffer == p.unrolled_loops[0].slots) a.write = false;
    CHECK(verify(p).find("nothing resets loop 0's guard slots after its copies") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // a decider that may run several blocks
    lir::Body& b = body(p);
    auto& k = std::get<lir::KernelNode>(b.nodes[2].op);
    k.grid[0] = b.nodes[3].guard ? std::get<lir::KernelNode>(b.nodes[3].op).grid[0] : k.grid[0];
    k.grid[0].code[0].value.bits = 16;
    CHECK(verify(p).find("lets each of its blocks decide for its copy, but may run more than one block and writes "
                         "what the condition reads") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // every thread deciding in a node that writes the condition
    lir::Node& n = body(p).nodes[2];
    n.guard->role = ir::GuardRole::Each;
    p.kernels[std::get<lir::KernelNode>(n.op).kernel].guard->role = ir::GuardRole::Each;
    CHECK(verify(p).find("lets every thread decide for its copy, but writes what the condition reads") !=
          std::string::npos);
  }
}

TEST_CASE("unroll: guarded kernels compile; a user kernel's variant calls its guard at the PTX entry") {
  auto l = compile_artifact(kCountdown);
  const fb::Pipeline& f = *l->pipeline;
  // `step` and its guarded variant: two entries of one module (they share the source's state),
  // the variant a copy of `step` under its own name that calls the guard first.
  const fb::Kernel* plain = nullptr;
  const fb::Kernel* guarded = nullptr;
  for (const fb::Kernel* k : *f.kernels())
    if (k->name()->str() == "step") (k->params()->size() == 4 ? guarded : plain) = k;
  REQUIRE(plain);
  REQUIRE(guarded);
  CHECK(plain->in_module() >= 0);
  CHECK(guarded->in_module() == plain->in_module());
  CHECK(plain->lowered_name()->str() == "step");
  CHECK(guarded->lowered_name()->str() == "step_orch");
  const fb::Module* m = f.modules()->Get(static_cast<uint32_t>(plain->in_module()));
  const std::string ptx(reinterpret_cast<const char*>(m->ptx()->data()), m->ptx()->size());
  CHECK(ptx.find(".visible .func  (.param .b32 func_retval0) orch_guard(") != std::string::npos);
  // The patch's names avoid every token of the module, the guard's included (orch_1_ here).
  CHECK(ptx.find("call.uni (orch_1_ret), orch_guard, (orch_1_arg0, orch_1_arg1, orch_1_arg2);") != std::string::npos);
  CHECK(ptx.find(".entry step(") != std::string::npos);
  CHECK(ptx.find(".entry step_orch(") != std::string::npos);
  REQUIRE(m->images()->size() == 1);
  CHECK(m->images()->Get(0)->arch()->str() == "sm_90");
  bool slots = false;
  for (const fb::Buffer* b : *f.buffers()) slots |= b->name()->str() == "orch.guard.0";
  CHECK(slots);
}

// The rule the speed passes keep (issue 20): a kernel's module identity. Every kernel declared
// from one source file, and every variant orchc makes of one (a wait at entry, an unrolled
// loop's guard), is an entry of that file's one module, with any options: so they share the
// file's __device__, __constant__ and __managed__ objects as nvcc's build would. (The GPU test
// "module state: ..." runs this pipeline against the CPU.)
TEST_CASE("speed passes: kernels of one file and their variants stay in one module, with any options") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("orch-module-identity-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "state.cu") << R"(__device__ unsigned long long total;
extern "C" __global__ void add(unsigned n, const unsigned* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&total, (unsigned long long)x[i]);
}
extern "C" __global__ void take(unsigned long long* out) { if (threadIdx.x == 0) { *out += total; total = 0; } }
)";
  std::ofstream(dir / "p.orch") << R"(pipeline state
target sm_90
param n: u32 = 1000
buffer x: u32[n]
buffer out: u64
buffer c: i32
kernel add(n: u32, x: in u32[]) from "state.cu"
kernel take(out: inout u64) from "state.cu"
kernel other(out: inout u64) source """
extern "C" __global__ void other(unsigned long long* out) { *out += 1; }
"""
graph main {
  add<<<ceil_div(n, 256), 256>>>(n, x)
  take<<<1, 32>>>(out)
  c = 3
  while c > 0 {
    add<<<ceil_div(n, 256), 256>>>(n, x)
    take<<<1, 32>>>(out)
    other<<<1, 1>>>(out)
    c -= 1
  }
}
)";
  struct Config {
    bool pdl;
    uint32_t unroll;
  };
  for (const Config cfg : {Config{true, 0}, Config{false, 1}, Config{true, 1}, Config{false, 4}}) {
    CAPTURE(cfg.pdl);
    CAPTURE(cfg.unroll);
    SourceManager sources;
    DiagnosticEngine diags;
    CheckResult checked = check_file((dir / "p.orch").string(), sources, {}, diags);
    REQUIRE(!diags.has_errors());
    LowerOptions options;
    options.compile.use_cache = false;
    options.pdl = cfg.pdl;
    options.unroll = cfg.unroll;
    lir::Program l;
    std::optional<std::string> bytes = lower_to_artifact(*checked.program, sources, options, diags, &l);
    REQUIRE_MESSAGE(bytes.has_value(), format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
    int state_module = -2;
    size_t from_file = 0, variants = 0;
    std::set<std::string> symbols;
    for (const lir::Kernel& k : l.kernels) {
      if (k.generated) continue;
      CAPTURE(k.name);
      if (k.name == "other") {
        // A source of its own, used once per variant: its own module only if it has variants.
        continue;
      }
      ++from_file;
      variants += k.guard_of >= 0 || k.waits_at_entry;
      if (state_module == -2) state_module = k.module;
      CHECK(k.module >= 0);
      CHECK(k.module == state_module);
      CHECK(k.images.empty());
      symbols.insert(k.lowered_name);
    }
    REQUIRE(state_module >= 0);
    const std::string& ptx = l.modules[static_cast<size_t>(state_module)].ptx;
    // One definition of `total` in the one module, and an entry for every distinct symbol.
    CHECK(ptx.find(".global .align 8 .u64 total") != std::string::npos);
    CHECK(ptx.find(".global .align 8 .u64 total") == ptx.rfind(".global .align 8 .u64 total"));
    for (const std::string& sym : symbols) CHECK(ptx.find(".entry " + sym + "(") != std::string::npos);
    if (cfg.unroll != 1) CHECK(variants > 0);
    CHECK(from_file >= 2);
  }
  fs::remove_all(dir);
}

// Names orchc adds live where users cannot write them, or are renamed when a user did (issue
// 20: a kernel named orch_guard failed with E0902 once its loop was unrolled).
TEST_CASE("speed passes: a user kernel named like orchc's guard function compiles and keeps its name") {
  auto l = compile_artifact(R"(pipeline clash
target sm_90
buffer c: i32
buffer n: u32
kernel orch_guard(c: inout i32, n: inout u32) source """
extern "C" __global__ void orch_guard(int* c, unsigned* n) { if (threadIdx.x == 0) { --(*c); ++(*n); } }
"""
graph main {
  c = 20
  while c > 0 {
    orch_guard<<<1, 32>>>(c, n)
  }
}
)");
  std::set<std::string> symbols;
  for (const fb::Kernel* k : *l->pipeline->kernels())
    if (!k->generated()) symbols.insert(k->lowered_name()->str());
  CHECK(symbols.count("orch_guard"));      // the user's kernel, as it was
  CHECK(symbols.count("orch_guard_orch"));  // its guarded copy
  bool renamed_guard = false;
  for (const fb::Module* m : *l->pipeline->modules()) {
    const std::string ptx(reinterpret_cast<const char*>(m->ptx()->data()), m->ptx()->size());
    renamed_guard |= ptx.find(".func  (.param .b32 func_retval0) orch_guard_1(") != std::string::npos;
  }
  CHECK(renamed_guard);
}

// Launch shapes (issue 19): programmatic edges join launches that fit in one wave, and the
// compiler unrolls a loop only where its launches do; --emit=ir and --print-passes say why.
TEST_CASE("launch shapes: programmatic edges and unrolling only where every launch fits in one wave") {
  auto chain = [](uint64_t n) {
    return "pipeline c\ntarget sm_90\nparam n: u32 = " + std::to_string(n) +
           "\nbuffer x: f32[n]\nbuffer c: i32\nbuffer s: u32\n"
           "kernel axpb(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void axpb(unsigned n, float* x) "
           "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0.5f * x[i] + 1.0f; }\"\"\"\n"
           "kernel big_smem(x: inout f32[]) source \"\"\"extern \"C\" __global__ void big_smem(float* x) {}\"\"\"\n"
           "graph main {\n"
           "  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "  c = 10\n"
           "  while c > 0 {\n"
           "    axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "    c -= 1\n"
           "  }\n"
           "}\n";
  };
  // 1056 blocks of 256 threads fit at once on an sm_90 (132 SMs x 8): one wave.
  auto small = lower_text(chain(1056 * 256));
  CHECK(programmatic(small->program) == 1);
  CHECK(small->program.unrolled_loops.size() == 1);
  // One block more is a second wave: full edges, no unrolling, and the reasons.
  auto big = lower_text(chain(1056 * 256 + 1));
  CHECK(programmatic(big->program) == 0);
  CHECK(big->program.unrolled_loops.empty());
  const std::string ir = lir::print(big->program, big->sources);
  CHECK(ir.find("# full edge from kernels: this launch has 1057 blocks of 256 threads, more than the 1056 such "
                "blocks an sm_90 holds at once (132 SMs x 8) (programmatic edges join one-wave launches only)") !=
        std::string::npos);
  const std::vector<std::string> notes = unroll_notes(chain(1056 * 256 + 1));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "`while c > 0` at line 13:3: not unrolled: a launch of its body has 1057 blocks of 256 threads, "
                    "more than the 1056 such blocks an sm_90 holds at once (132 SMs x 8), so its run time, not the "
                    "loop's turn-around, dominates (--unroll N unrolls it anyway)");
  // --unroll N is the user's word.
  LowerOptions four;
  four.unroll = 4;
  CHECK(lower_text(chain(1 << 24), four)->program.unrolled_loops.size() == 1);
}

TEST_CASE("launch shapes: residency by threads, blocks and shared memory; unknown sizes are not one wave") {
  auto l = lower_text(R"(pipeline s
target sm_90
param n: u32 = 100
param m: u32
buffer x: f32[n]
kernel k(x: inout f32[]) source """extern "C" __global__ void k(float* x) {}"""
graph main {
  k<<<2000, 1024>>>(x)
  k<<<1, 1>>>(x)
  k<<<300, 33, 100000>>>(x)
  k<<<m, 32>>>(x)
  k<<<dim3(10, 10, 3), dim3(16, 16)>>>(x)
}
)");
  const lowering::Residency r = lowering::residency_of(l->checked.program->profile);
  CHECK(r.sms == 132);
  std::vector<lowering::LaunchShape> shapes;
  for (const lir::Node& n : main_body(l->program).nodes)
    if (const auto* k = std::get_if<lir::KernelNode>(&n.op)) shapes.push_back(lowering::launch_shape(l->program, *k, r));
  REQUIRE(shapes.size() == 5);
  // 1024 threads: 2 per SM (2048 threads), 264 at once.
  CHECK(shapes[0].resident == 264);
  CHECK_FALSE(shapes[0].one_wave());
  // One thread: 32 blocks per SM at most.
  CHECK(shapes[1].resident == 32 * 132);
  CHECK(shapes[1].one_wave());
  // 33 threads take two warps; 100000 bytes of shared memory leave room for 2 per SM.
  CHECK(shapes[2].resident == 2 * 132);
  CHECK_FALSE(shapes[2].one_wave());
  // A grid from a param without a default is not known before the launch.
  CHECK_FALSE(shapes[3].blocks.has_value());
  CHECK_FALSE(shapes[3].one_wave());
  CHECK(shapes[3].describe(r) == "a grid known only when it runs, of blocks of 32 threads (at most 4224 such blocks "
                                 "an sm_90 holds at once (132 SMs x 32))");
  CHECK(*shapes[4].blocks == 300);
  CHECK(*shapes[4].threads == 256);
  CHECK(shapes[4].one_wave());
}

// Once compiled, a kernel's registers can leave room for fewer blocks than its threads do: the
// programmatic edges into and out of its launches go, and a loop the compiler unrolled is
// lowered again without unrolling (lower.cpp), each saying why.
TEST_CASE("launch shapes: the compiled kernel's registers count; a loop unrolled past one wave is lowered again") {
  auto text = [](const std::string& kernel) {
    return "pipeline r\ntarget sm_90\nparam n: u32 = 512\nbuffer x: f64[n * 128]\nbuffer c: i32\n"
           "kernel heavy(n: u32, x: inout f64[]) source \"\"\"\n"
           "extern \"C\" __global__ void heavy(unsigned n, double* x) {\n"
           "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i >= n) return;\n"
           "  double a[128];\n"
           "#pragma unroll\n"
           "  for (int j = 0; j < 128; ++j) a[j] = x[j * n + i];\n"
           "  double s = 0;\n"
           "#pragma unroll\n"
           "  for (int k = 0; k < 128; ++k)\n"
           "#pragma unroll\n"
           "    for (int j = 0; j < 128; ++j) s += a[j] * a[(j * 7 + k) % 128];\n"
           "  x[i] = s;\n"
           "}\n"
           "\"\"\"\n"
           "kernel light(n: u32, x: inout f64[]) source \"\"\"\n"
           "extern \"C\" __global__ void light(unsigned n, double* x) {\n"
           "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] = 0.5 * x[i] + 1.0;\n"
           "}\n"
           "\"\"\"\n"
           "graph main {\n"
           "  " + kernel + "<<<500, 256>>>(n, x)\n"
           "  " + kernel + "<<<500, 256>>>(n, x)\n"
           "  c = 10\n"
           "  while c > 0 {\n"
           "    " + kernel + "<<<500, 256>>>(n, x)\n"
           "    c -= 1\n"
           "  }\n"
           "}\n";
  };
  // 500 blocks of 256 threads: one wave by threads (1056 at once on an sm_90), so before the
  // kernels compile both are taken to fit.
  const lowering::Residency r = lowering::residency_of(lower_text(text("light"))->checked.program->profile);
  auto light = compile_artifact(text("light"));
  CHECK(programmatic(light->program) == 1);
  CHECK(light->program.unrolled_loops.size() == 1);

  auto heavy = compile_artifact(text("heavy"));
  const lir::Kernel* k = nullptr;
  for (const lir::Kernel& kernel : heavy->program.kernels)
    if (kernel.name == "heavy" && kernel.guard_of < 0) k = &kernel;
  REQUIRE(k);
  const uint32_t registers = k->demand.registers;
  INFO(registers);
  REQUIRE(registers > 128);  // 128 doubles live at once
  // Blocks per SM by registers, as cuda_occupancy.h counts them: 8 warps a block, each warp
  // registers * 32 in units of 256, each of 4 partitions holding 16384 registers' worth of warps.
  const uint32_t per_warp = (registers * 32 + 255) / 256 * 256;
  const uint64_t per_sm = (16384 / per_warp) * 4 / 8;
  REQUIRE(per_sm * 132 < 500);
  CHECK(programmatic(heavy->program) == 0);
  CHECK(heavy->program.unrolled_loops.empty());
  for (const lir::Node& n : main_body(heavy->program).nodes) {
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) {
      REQUIRE(c->bodies.size() == 1);
      for (const lir::Node& m : c->bodies[0].nodes) CHECK_FALSE(m.guard.has_value());
    }
  }
  const std::string ir = lir::print(heavy->program, heavy->sources);
  INFO(ir);
  CHECK(ir.find("this launch has 500 blocks of 256 threads, more than the " + std::to_string(per_sm * 132) +
                " such blocks an sm_90 holds at once (132 SMs x " + std::to_string(per_sm) + ": its " +
                std::to_string(registers) + " registers per thread)") != std::string::npos);
  // The launch shape before compiling knows nothing of registers.
  const lir::KernelNode& first = std::get<lir::KernelNode>(main_body(heavy->program).nodes[1].op);
  lir::Program uncompiled = heavy->program;
  for (lir::Kernel& kernel : uncompiled.kernels) kernel.demand = {};
  CHECK(lowering::launch_shape(uncompiled, first, r).one_wave());
  CHECK_FALSE(lowering::launch_shape(heavy->program, first, r).one_wave());
  CHECK(std::string(lowering::launch_shape(heavy->program, first, r).limit) == "registers");
}

// In a graph where every kernel free of the collective before it fits in one wave, each waits for
// that collective; where one is larger, all stay free (it fills the SMs the chain's short kernels
// need); --no-line-up leaves them all free.
TEST_CASE("line up: one-wave kernels after the collective before them, unless a larger one runs beside them") {
  auto text = [](bool large) {
    std::string t = "pipeline cb\ntarget sm_90\nparam n: u32 = 256\nparam s: f32 = 0.5\ncomm world\n"
                    "buffer big: f32[1 << 24]\nbuffer g0: f32[n]\nbuffer g1: f32[n]\nbuffer g2: f32[n]\n"
                    "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void "
                    "scale(unsigned n, float s, float* x) {}\"\"\"\n"
                    "graph main {\n";
    for (int k = 0; k < 3; ++k)
      t += "  scale<<<ceil_div(n, 256), 256>>>(n, s, g" + std::to_string(k) + ")\n  allreduce sum g" +
           std::to_string(k) + " on world\n";
    t += large ? "  scale<<<65536, 256>>>(1 << 24, s, big)\n" : "  scale<<<1056, 256>>>(1056 * 256, s, big)\n";
    return t + "  scale<<<1, 32>>>(1, s, g0)\n}\n";
  };
  auto lined = lower_text(text(false));
  CHECK(edges(main_body(lined->program)) ==
        "0 kernel:\n1 collective: 0\n2 kernel: 1\n3 collective: 2\n4 kernel: 3\n5 collective: 4\n6 kernel: 5\n"
        "7 kernel: 1 5\n");
  CHECK(main_body(lined->program).nodes[2].order_note ==
        "after the collective at line 13:3: this launch has 1 block of 256 threads, within the 1056 such blocks an "
        "sm_90 holds at once (132 SMs x 8), too short to gain from running beside it");
  const std::string free_edges =
      "0 kernel:\n1 collective: 0\n2 kernel:\n3 collective: 2\n4 kernel:\n5 collective: 4\n6 kernel:\n"
      "7 kernel: 1\n";
  auto large = lower_text(text(true));
  CHECK(edges(main_body(large->program)) == free_edges);
  CHECK(main_body(large->program).nodes[2].order_note.empty());
  LowerOptions off;
  off.line_up_collectives = false;
  CHECK(edges(main_body(lower_text(text(false), off)->program)) == free_edges);
}

// A collective gets high priority (NCCL's kernels first on the SMs) where a kernel may run beside
// it, and not where every kernel is ordered before or after it (lined up, above);
// --no-collective-priority leaves every collective at the stream's priority. The artifact
// carries the flag on the collective's op.
TEST_CASE("collective priority: high where a kernel may run beside the collective, in the IR and the artifact") {
  auto text = [](bool large) {
    std::string t = "pipeline cb\ntarget sm_90\nparam n: u32 = 256\nparam s: f32 = 0.5\ncomm world\n"
                    "buffer big: f32[1 << 24]\nbuffer g0: f32[n]\nbuffer g1: f32[n]\n"
                    "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void "
                    "scale(unsigned n, float s, float* x) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; "
                    "if (i < n) x[i] *= s; }\"\"\"\n"
                    "graph main {\n";
    for (int k = 0; k < 2; ++k)
      t += "  scale<<<ceil_div(n, 256), 256>>>(n, s, g" + std::to_string(k) + ")\n  allreduce sum g" +
           std::to_string(k) + " on world\n";
    t += large ? "  scale<<<65536, 256>>>(1 << 24, s, big)\n" : "";
    return t + "}\n";
  };
  auto priorities = [](const lir::Program& p) {
    std::string out;
    for (const lir::Node& n : main_body(p).nodes)
      if (const auto* c = std::get_if<lir::CollectiveNode>(&n.op)) out += c->high_priority ? "high " : "stream ";
    return out;
  };
  // The large kernel is free of both collectives; kernel 2 (g1) of the first.
  auto large = lower_text(text(true));
  CHECK(priorities(large->program) == "high high ");
  CHECK(lir::print(large->program, large->sources).find(", high priority") != std::string::npos);
  // Small kernels only: lined up after the collective before them, nothing runs beside one.
  auto small = lower_text(text(false));
  CHECK(priorities(small->program) == "stream stream ");
  CHECK(lir::print(small->program, small->sources).find("high priority") == std::string::npos);
  // Without line-up the small kernel 2 is free of the first allreduce, so that one is high.
  LowerOptions free_kernels;
  free_kernels.line_up_collectives = false;
  CHECK(priorities(lower_text(text(false), free_kernels)->program) == "high stream ");
  LowerOptions off;
  off.prioritize_collectives = false;
  CHECK(priorities(lower_text(text(true), off)->program) == "stream stream ");
  CHECK(priorities(lower_text(text(true), plain_lowering())->program) == "stream stream ");

  auto compiled = compile_artifact(text(true));
  const fb::Pipeline& pipe = *compiled->pipeline;
  int high = 0, other = 0;
  for (const fb::Op* op : *pipe.ops()) {
    if (op->kind() == fb::NodeKind::Collective) high += op->high_priority() ? 1 : 0;
    else other += op->high_priority() ? 1 : 0;
  }
  CHECK(high == 2);
  CHECK(other == 0);
}

// The exact forms the GPU alone used to pin (issue 20, item 8): a grid that is one block only at
// the params' defaults races like any multi-block kernel (a set_param can grow it); each guarded
// copy passes its own slot index; the guard function takes an f32 or f64 param as its bits.
TEST_CASE("unroll: roles by the grid as written, each copy's slot index, params reach the guard as bits") {
  auto l = lower_text(R"(pipeline g
target sm_90
param n: u32 = 256
param limit: f32 = 2.5
param scale: f64 = 0.5
buffer x: f32[n]
buffer c: f32
buffer d: f64
kernel grow(n: u32, c: inout f32) source """
extern "C" __global__ void grow(unsigned n, float* c) { if (blockIdx.x == 0 && threadIdx.x == 0) *c += 0.5f; }
"""
graph main {
  c = 0.0
  d = 0.0
  while c < limit && d < scale {
    grow<<<ceil_div(n, 256), 256>>>(n, c)
  }
}
)");
  const lir::Program& p = l->program;
  const lir::ConditionalNode& loop = first_loop(p);
  // ceil_div(n, 256) is one block at n's default, but not as written: the copies race.
  std::string expected = "grow ";
  for (int k = 2; k <= 16; ++k) expected += "grow[" + std::to_string(k) + "/race] ";
  CHECK(copies(p, loop.bodies[0]) == expected + "condition");
  // Copy k passes slot k - 2 as the guard's first argument (after grow's own two).
  for (const lir::Node& n : loop.bodies[0].nodes) {
    if (!n.guard) continue;
    const auto& k = std::get<lir::KernelNode>(n.op);
    REQUIRE(k.args.size() > 2);
    CHECK(k.args[2].value.text == std::to_string(n.guard->copy - 2));
  }
  bool checked = false;
  for (const lir::Kernel& k : p.kernels) {
    if (k.guard_of < 0) continue;
    checked = true;
    // The guard takes every argument as 64 bits and the floats back as their bits.
    CHECK(k.guard_code.find("__uint_as_float((unsigned)orch_a") != std::string::npos);
    CHECK(k.guard_code.find("__longlong_as_double((long long)orch_a") != std::string::npos);
    CHECK(k.guard_code.find("atomicCAS(orch_slot, 0u, 1u)") != std::string::npos);
  }
  CHECK(checked);
}

// Loops the DAG leaves free of each other (lowering/one_loop_at_a_time.cpp: two WHILE nodes
// running at once fault the GPU on driver 580).
const char* const kFreeLoops = R"(pipeline loops
target sm_90
buffer a: i32
buffer b: i32
buffer c: i32
buffer x: i32
buffer y: i32
buffer z: i32
graph main {
  a = 3
  b = 4
  c = 1
  while a > 0 {
    x += 1
    a -= 1
  }
  while b > 0 {
    y += 1
    b -= 1
  }
  if c > 0 {
    while c > 0 {
      z += 1
      c -= 1
    }
  }
}
)";

TEST_CASE("loops: no two while loops of a body run at once, with or without the speed passes") {
  for (const LowerOptions& options : {LowerOptions{}, plain_lowering()}) {
    auto l = lower_text(kFreeLoops, options);
    const lir::Body& b = l->program.graphs[l->program.main_graph].body;
    std::vector<uint32_t> loops;  // the nodes that hold a while loop, in program order
    for (uint32_t i = 0; i < b.nodes.size(); ++i)
      if (lir::holds_while(b.nodes[i])) loops.push_back(i);
    REQUIRE(loops.size() == 3);  // two whiles and the if around the third
    CHECK(std::get<lir::ConditionalNode>(b.nodes[loops[2]].op).type == lir::ConditionalType::If);
    for (size_t k = 1; k < loops.size(); ++k) {
      CAPTURE(k);
      CHECK(lir::reaches(b, loops[k - 1], loops[k]));
      CHECK(b.nodes[loops[k]].order_note.find("two while loops running at once fault the GPU") != std::string::npos);
    }
    CHECK(verify(l->program) == "");
    // Without the edge the pass added, the verifier refuses the program.
    lir::Program p = l->program;
    std::vector<lir::Dep>& deps = p.graphs[p.main_graph].body.nodes[loops[1]].deps;
    deps.erase(std::remove_if(deps.begin(), deps.end(), [&](const lir::Dep& d) { return d.from == loops[0]; }),
               deps.end());
    CHECK(verify(p) ==
          "E0899: internal compiler error: in graph `main`, this while loop may run at the same time as an earlier one\n");
  }
}

}  // namespace orch
