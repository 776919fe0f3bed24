// What the lowering pass tests (speed_test.cpp, unroll_test.cpp, order_device_graphs_test.cpp) share: lowering a
// pipeline text with options, compiling it to an artifact, and reading the lowered program back.
#pragma once

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

inline std::unique_ptr<Lowered> lower_text(const std::string& text, const LowerOptions& options = {}) {
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

inline std::unique_ptr<CompiledArtifact> compile_artifact(const std::string& text) {
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
inline std::string edges(const lir::Body& b) {
  std::string out;
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    out += std::to_string(i) + " " + lir::kind_name(b.nodes[i].op) + ":";
    for (const lir::Dep& d : b.nodes[i].deps)
      out += " " + std::to_string(d.from) + (d.kind == lir::DepKind::Programmatic ? "p" : "");
    out += "\n";
  }
  return out;
}

inline const lir::Body& main_body(const lir::Program& p) { return p.graphs[p.main_graph].body; }

// How many of main's top-level edges are programmatic.
inline size_t programmatic(const lir::Program& p) {
  size_t n = 0;
  for (const lir::Node& node : main_body(p).nodes)
    for (const lir::Dep& d : node.deps) n += d.kind == lir::DepKind::Programmatic;
  return n;
}

inline const lir::Kernel& kernel_named(const lir::Program& p, const std::string& name) {
  for (const lir::Kernel& k : p.kernels)
    if (k.name == name) return k;
  FAIL("no kernel " << name);
  return p.kernels.front();
}

inline std::string verify(const lir::Program& p) {
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


// Whether the lines strictly between the lines holding `from` and `to` in `code` are only
// preprocessor lines and the status site's constant: nothing that runs or touches memory.
inline bool only_inert_between(const std::string& code, size_t from, size_t to) {
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

inline const lir::ConditionalNode& first_loop(const lir::Program& p) {
  for (const lir::Node& n : main_body(p).nodes)
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) return *c;
  FAIL("no conditional node");
  return std::get<lir::ConditionalNode>(main_body(p).nodes.front().op);
}

// Each node of a body as "kernel-name[copy/role]" (or its kind), in order.
inline std::string copies(const lir::Program& p, const lir::Body& b) {
  std::string out;
  for (const lir::Node& n : b.nodes) {
    const auto* k = std::get_if<lir::KernelNode>(&n.op);
    std::string name = k ? p.kernels[k->kernel].name : lir::kind_name(n.op);
    if (name.rfind("orch_", 0) == 0) name = name.substr(5, name.find('_', 5) - 5);  // orch_update_3 -> update
    out += (out.empty() ? "" : " ") + name;
    if (n.guard) out += "[" + std::to_string(n.guard->copy) + "/" + mir::to_string(n.guard->role) + "]";
  }
  return out;
}

inline std::vector<std::string> unroll_notes(const std::string& text, const LowerOptions& options = {}) {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult r = check_text("t.orch", text, sources, {}, diags);
  REQUIRE_MESSAGE(!diags.has_errors(), format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
  lowering::PassOptions o;
  o.unroll = options.unroll;
  o.patch_user_kernels = options.patch_user_kernels;
  o.residency = lowering::residency_of(r.program->profile);
  mir::Program p = mir::to_mir(*r.program);
  lowering::drop_helper_graphs(p);
  lowering::split_segments(p);
  lowering::lower_conditions(p);
  return lowering::unroll_loops(p, o);
}


}  // namespace
}  // namespace orch
