// The lowering pipeline in one straight line. ORCH_PRINT_PASSES=1 prints the IR (as
// `--emit=yaml` shows it) after each pass and how long each pass took, on stderr.
#include "lowering/lower.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "compiler/emit.h"
#include "lowering/passes.h"

namespace orch {

namespace {

class PassRunner {
 public:
  PassRunner(ir::Program& p, const SourceManager& sources, bool print)
      : p_(p), sources_(sources), print_(print) {}

  template <class F>
  auto run(const char* name, F&& pass) {
    auto t0 = std::chrono::steady_clock::now();
    auto finish = [&] {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!print_) return;
      std::fprintf(stderr, "=== after %s (%.2f ms)\n", name, ms);
      if (print_ir_) std::fputs(emit_yaml(p_, sources_).c_str(), stderr);
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
  void set_print_ir(bool v) { print_ir_ = v; }

 private:
  ir::Program& p_;
  const SourceManager& sources_;
  bool print_;
  bool print_ir_ = true;
};

bool print_requested(bool option) {
  const char* env = std::getenv("ORCH_PRINT_PASSES");
  return option || (env && *env && std::string(env) != "0");
}

void run_graph_passes(PassRunner& r, ir::Program& p) {
  r.run("drop_helper_graphs", [&] { lowering::drop_helper_graphs(p); });
  r.run("split_segments", [&] { lowering::split_segments(p); });
  r.run("lower_conditions", [&] { lowering::lower_conditions(p); });
  r.run("fuse_generated_kernels", [&] { lowering::fuse_generated_kernels(p); });
  r.run("plan_fills", [&] { lowering::plan_fills(p); });
  r.run("generate_kernels", [&] { lowering::generate_kernels(p); });
  r.run("rebuild_edges", [&] { lowering::rebuild_edges(p); });
  r.run("hash_collectives", [&] { lowering::hash_collectives(p); });
}

}  // namespace

void lower_graphs(ir::Program& program) {
  SourceManager unused;
  PassRunner r(program, unused, false);
  run_graph_passes(r, program);
}

std::optional<std::string> lower_to_artifact(ir::Program& p, SourceManager& sources,
                                             const LowerOptions& options,
                                             DiagnosticEngine& diags) {
  PassRunner r(p, sources, print_requested(options.print_passes));
  run_graph_passes(r, p);
  if (!r.run("verify_ordering", [&] { return lowering::verify_ordering(p, diags); })) return std::nullopt;
  r.set_print_ir(false);  // CUBINs make the IR dump unreadable; the timing is what matters
  if (!r.run("compile_all_kernels",
             [&] { return lowering::compile_all_kernels(p, options.compile, sources, diags); }))
    return std::nullopt;
  if (!r.run("check_compiled_kernels", [&] { return lowering::check_compiled_kernels(p, diags); }))
    return std::nullopt;
  return r.run("serialize", [&] { return lowering::serialize(p, sources); });
}

}  // namespace orch
