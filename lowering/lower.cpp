// The lowering pipeline in one straight line: to_mir of the checker's program, the IR-to-IR
// passes on it, build_lir, then passes on the lowered program, the kernel compiles and
// serialize. ORCH_PRINT_PASSES=1 prints the program after each pass (the IR as `--emit=yaml`
// shows it, with what the passes added, then the lowered program as `--emit=ir` does) and how
// long each pass took, on stderr.
#include "lowering/lower.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>

#include "lowering/passes.h"

namespace orch {

namespace {

class PassRunner {
 public:
  explicit PassRunner(bool print) : print_(print) {}

  template <class F>
  auto run(const char* name, F&& pass) {
    auto t0 = std::chrono::steady_clock::now();
    auto finish = [&] {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!print_) return;
      std::fprintf(stderr, "=== after %s (%.2f ms)\n", name, ms);
      if (show_) std::fputs(show_().c_str(), stderr);
    };
    if constexpr (std::is_void_v<decltype(pass())>) {
      pass();
      finish();
    } else {
      auto result = pass();
      finish();
      return result;
    }
  }
  // What to print after each pass from now on; empty: the timing only.
  void show(std::function<std::string()> f) { show_ = std::move(f); }
  // A pass's own account of its decisions (what it did not do, and why), printed with it.
  void note(const std::vector<std::string>& lines) {
    if (!print_) return;
    for (const std::string& l : lines) std::fprintf(stderr, "  note: %s\n", l.c_str());
  }

 private:
  bool print_;
  std::function<std::string()> show_;
};

bool print_requested(bool option) {
  const char* env = std::getenv("ORCH_PRINT_PASSES");
  return option || (env && *env && std::string(env) != "0");
}

// The arch number of "sm_90" / "sm_90a" / "compute_90", or 0.
uint32_t arch_number(const std::string& arch) {
  size_t i = arch.find('_');
  if (i == std::string::npos) return 0;
  uint32_t n = 0;
  for (size_t j = i + 1; j < arch.size() && std::isdigit(static_cast<unsigned char>(arch[j])) && n < 100000; ++j)
    n = n * 10 + static_cast<uint32_t>(arch[j] - '0');
  return n;
}

// Whether any region holds a `while` (only those can be unrolled, and lowered again).
bool has_while(const ir::Region& r) {
  for (const ir::Node& n : r.nodes) {
    if (n.is<ir::WhileNode>()) return true;
    for (const ir::Region& b : ir::bodies(n))
      if (has_while(b)) return true;
  }
  return false;
}

bool has_while(const ir::Program& p) {
  for (const ir::Graph& g : p.graphs)
    if (has_while(g.body)) return true;
  return false;
}

lowering::PassOptions pass_options(const ir::Program& p, const LowerOptions& o) {
  lowering::PassOptions x;
  const std::vector<std::string>& archs = o.compile.archs.empty() ? p.targets : o.compile.archs;
  bool archs_have_pdl = !archs.empty();
  for (const std::string& a : archs) archs_have_pdl &= arch_number(a) >= 90;
  x.pdl = o.pdl && p.targets_have_pdl && archs_have_pdl;
  x.patch_user_kernels = o.patch_user_kernels;
  x.unroll = o.unroll;
  x.line_up_collectives = o.line_up_collectives;
  x.prioritize_collectives = o.prioritize_collectives;
  x.memory_plan = o.memory_plan;
  x.residency = lowering::residency_of(p.profile);
  x.profile.profile = o.profile;
  return x;
}

// The IR-to-IR passes; what they compute beyond mir::Program goes to `out`.
void run_ir_passes(PassRunner& r, mir::Program& p, const lowering::PassOptions& o, lowering::IrLowering& out) {
  out.user_kernels = p.kernels.size();
  r.run("drop_helper_graphs", [&] { lowering::drop_helper_graphs(p); });
  r.run("split_segments", [&] { lowering::split_segments(p); });
  r.run("lower_conditions", [&] { lowering::lower_conditions(p); });
  r.note(r.run("unroll_loops", [&] { return lowering::unroll_loops(p, o); }));
  r.run("fuse_generated_kernels", [&] { lowering::fuse_generated_kernels(p); });
  r.run("generate_kernels", [&] { lowering::generate_kernels(p, o, out); });
  r.run("generate_nvshmem_kernels", [&] { lowering::generate_nvshmem_kernels(p, o, out); });
  r.run("rebuild_edges", [&] { lowering::rebuild_edges(p); });
}

// The ir passes, then the lowered program `l` (which the printer keeps showing after this
// returns); `sources` for printing.
void run_graph_passes(PassRunner& r, mir::Program p, lir::Program& l, const SourceManager& sources,
                      const lowering::PassOptions& o) {
  r.show([&p, &sources] { return mir::print(p, sources); });
  lowering::IrLowering ir_lowering;
  run_ir_passes(r, p, o, ir_lowering);
  r.show([&l, &sources] { return lir::print(l, sources); });
  r.run("build_lir", [&] { l = lowering::build_lir(p, ir_lowering); });
  r.note(r.run("assign_guards", [&] { return lowering::assign_guards(l); }));
  r.note(r.run("order_device_graphs", [&] { return lowering::order_device_graphs(l); }));
  r.run("hash_collectives", [&] { lowering::hash_collectives(l); });
  r.note(r.run("line_up_collectives", [&] { return lowering::line_up_collectives(l, o); }));
  r.note(r.run("collectives_in_order", [&] { return lowering::collectives_in_order(l); }));
  r.note(r.run("prioritize_collectives", [&] { return lowering::prioritize_collectives(l, o); }));
  r.note(r.run("one_loop_at_a_time", [&] { return lowering::one_loop_at_a_time(l); }));
  r.note(r.run("programmatic_edges", [&] { return lowering::programmatic_edges(l, o, false); }));
  r.note(r.run("plan_memory", [&] { return lowering::plan_memory(l, o.memory_plan); }));
}

}  // namespace

LowerOptions plain_lowering() {
  LowerOptions o;
  o.pdl = false;
  o.unroll = 1;
  o.line_up_collectives = false;
  o.prioritize_collectives = false;
  return o;
}

LowerOptions for_emit_cuda(LowerOptions options) {
  options.patch_user_kernels = false;
  return options;
}

mir::Program lower_graphs(const ir::Program& program, const LowerOptions& options) {
  PassRunner r(false);
  lowering::IrLowering unused;
  mir::Program p = mir::to_mir(program);
  run_ir_passes(r, p, pass_options(program, options), unused);
  return p;
}

lir::Program lower_to_lir(const ir::Program& program, const LowerOptions& options) {
  SourceManager unused;
  PassRunner r(false);
  lir::Program l;
  run_graph_passes(r, mir::to_mir(program), l, unused, pass_options(program, options));
  return l;
}

std::optional<std::string> lower_to_artifact(const ir::Program& p, SourceManager& sources,
                                             const LowerOptions& options, DiagnosticEngine& diags,
                                             lir::Program* lowered) {
  PassRunner r(print_requested(options.print_passes));
  lir::Program own;
  lir::Program& l = lowered ? *lowered : own;
  lowering::PassOptions o = pass_options(p, options);
  // The compiler's unrolling is decided before the kernels compile, by threads and shared
  // memory; registers can show a body's launch to run in several waves after all. Then the
  // program is lowered once more from the checker's IR without those loops.
  for (bool again = o.unroll == 0 && has_while(p);;) {
    run_graph_passes(r, mir::to_mir(p), l, sources, o);
    if (!r.run("verify_ordering", [&] { return lowering::verify_ordering(l, diags); })) return std::nullopt;
    if (!r.run("verify_memory_plan", [&] { return lowering::verify_memory_plan(l, diags); })) return std::nullopt;
    r.show(nullptr);  // CUBINs make the program unreadable; the timing is what matters
    if (!r.run("compile_all_kernels",
               [&] { return lowering::compile_all_kernels(l, options.compile, sources, diags); }))
      return std::nullopt;
    r.show([&] { return lir::print(l, sources); });  // code sizes and symbols, not the bytes
    const lowering::CompiledLimits limits = lowering::compiled_limits_of(p.profile);
    if (!r.run("check_compiled_kernels", [&] { return lowering::check_compiled_kernels(l, limits, diags); }))
      return std::nullopt;
    if (!again) break;
    again = false;
    std::vector<std::pair<SourceRange, std::string>> roll =
        r.run("unrolled_past_wave_budget", [&] { return lowering::unrolled_past_wave_budget(l, o); });
    if (roll.empty()) break;
    o.keep_rolled = std::move(roll);
    l = lir::Program{};
  }
  // Again with what the PTX showed: a kernel whose launches from the device only its PTX reveals
  // loses its programmatic edges (the pass only takes edges away now), and the verifier checks
  // the final edges.
  r.note(r.run("programmatic_edges (compiled)", [&] { return lowering::programmatic_edges(l, o, true); }));
  if (!r.run("verify_ordering (compiled)", [&] { return lowering::verify_ordering(l, diags); })) return std::nullopt;
  // The plan was made on the edges before compiling; the compiled pass only changes edge kinds,
  // which order memory alike, and the verifier checks the plan on the final edges.
  if (!r.run("verify_memory_plan (compiled)", [&] { return lowering::verify_memory_plan(l, diags); }))
    return std::nullopt;
  r.show(nullptr);
  return r.run("serialize", [&] { return lowering::serialize(l, sources); });
}

}  // namespace orch
