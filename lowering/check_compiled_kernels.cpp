// Rules that need each kernel's compiled PTX (so `orchc --check` cannot apply them): the
// declaration's parameters against the compiled entry's (E0120), and kernels that launch
// kernels (E0506, E0507) or graphs (E0508) from the device where the source text did not show
// it to the checker.
#include "lowering/inspect_ptx.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

// "a 4-byte", "an 8-byte", "an 18-byte"
std::string sized(uint32_t size) {
  const std::string n = std::to_string(size);
  const bool an =
      n[0] == '8' || n == "11" || n == "18" || (n.size() % 3 == 2 && n.rfind("18", 0) == 0);
  return (an ? "an " : "a ") + n + "-byte ";
}

// What a declared parameter is passed as: its size and whether it is floating point, an
// integer, or a pointer or handle (8 bytes, .u64/.b64 in PTX).
struct Declared {
  uint32_t size;
  char kind;  // 'f' floating point, 'i' integer, 'p' pointer or handle
  std::string text;
};

Declared declared(const lir::KernelParam& p) {
  switch (p.kind) {
    case lir::KernelParamKind::Value: {
      const uint32_t size = ir::size_of(p.elem);
      const bool f = ir::is_float(p.elem);
      return {size, f ? 'f' : 'i',
              std::string(ir::to_string(p.elem)) + ", " + sized(size) +
                  (f ? "floating-point value" : "integer")};
    }
    case lir::KernelParamKind::Scalar:
    case lir::KernelParamKind::Array:
      return {8, 'p', "a buffer, passed as an 8-byte pointer"};
    case lir::KernelParamKind::Cond:
      return {8, 'p', "a `cond`, passed as an 8-byte cudaGraphConditionalHandle"};
    case lir::KernelParamKind::Graph:
      return {8, 'p', "a `graph`, passed as an 8-byte cudaGraphExec_t"};
    case lir::KernelParamKind::GraphFamily:
      return {8, 'p', "a graph family, passed as an 8-byte pointer"};
    case lir::KernelParamKind::Status:  // generated kernels only, which are not checked here
      return {8, 'p', "the device status record, passed as an 8-byte pointer"};
  }
  return {0, 'i', "?"};
}

std::string describe(const PtxParam& q) {
  switch (q.kind) {
    case 'f':
      return sized(q.size) + "floating-point value";
    case 'u':
    case 's':
      return sized(q.size) + (q.size == 8 ? "integer or pointer" : "integer");
    default:
      return sized(q.size) + (q.text.find('[') != std::string::npos ? "struct or array" : "value");
  }
}

// A pointer declared where the source takes an 8-byte integer, or the reverse, is the same in
// PTX (.u64): that mismatch cannot be seen here (docs/diagnostics.md, E0120).
bool matches(const Declared& d, const PtxParam& q) {
  if (d.size != q.size) return false;
  if (d.kind == 'f') return q.kind == 'f' || q.kind == 'b';
  return q.kind != 'f';
}

class Checker {
 public:
  Checker(lir::Program& p, DiagnosticEngine& diags) : p_(p), diags_(diags) {}

  bool run() {
    for (lir::Kernel& k : p_.kernels) {
      // Not generated kernels: orchc wrote their parameters from the declaration it checks
      // against, and they launch graphs only through their `graph` parameters and never kernels.
      if (k.generated || k.lowered_name.empty()) continue;
      // A guarded variant is its user kernel's code and the guard's parameters: the user kernel
      // itself is checked (once), and the variant's launches are its kernel's.
      if (k.guard_of >= 0) {
        k.launches_kernels = p_.kernels[k.guard_of].launches_kernels;
        continue;
      }
      // A user kernel's code is its own, or the module of its translation unit's kernels.
      const std::string& ptx = k.module >= 0 ? p_.modules[static_cast<size_t>(k.module)].ptx : k.ptx;
      if (ptx.empty()) continue;
      if (!parsed_.count(&ptx)) parsed_.emplace(&ptx, parse_ptx(ptx));
      const PtxModule& m = parsed_.at(&ptx);
      auto it = m.functions.find(k.lowered_name);
      if (it == m.functions.end() || !it->second.entry) continue;
      k.launches_kernels = ptx_reaches(m, k.lowered_name, ptx_kernel_launch_calls());
      if (k.launches_kernels) k.uses_device_runtime = true;  // it was linked with cudadevrt
      check_params(k, it->second);
      bool has_graph_params = false;
      for (const lir::KernelParam& q : k.params)
        has_graph_params |=
            q.kind == lir::KernelParamKind::Graph || q.kind == lir::KernelParamKind::GraphFamily;
      if (!has_graph_params && ptx_reaches(m, k.lowered_name, ptx_graph_launch_calls())) {
        Diagnostic& d = diags_.error(
            "E0508", k.loc,
            "kernel `" + k.name +
                "` launches graphs from the device (its compiled code calls "
                "cudaGraphLaunch), but declares no `graph` parameter with a launch budget, so the "
                "launches it makes are not counted or ordered");
        note_source(d, k);
        ok_ = false;
      }
    }
    for (size_t g = 0; g < p_.graphs.size(); ++g) {
      const lir::Graph& graph = p_.graphs[g];
      walk(graph, graph.body, nullptr);
      if (!graph.device) beside_conditionals(graph);
    }
    return ok_;
  }

 private:
  void note_source(Diagnostic& d, const lir::Kernel& k) {
    if (k.signature_in_source.valid())
      diags_.add_note(d, k.signature_in_source, "`" + k.name + "` is defined here");
  }

  void check_params(const lir::Kernel& k, const PtxFunction& entry) {
    if (entry.params.size() != k.params.size()) {
      Diagnostic& d =
          diags_.error("E0120", k.loc,
                       "kernel `" + k.name + "` declares " + std::to_string(k.params.size()) +
                           " parameter" + (k.params.size() == 1 ? "" : "s") +
                           ", but its compiled code takes " + std::to_string(entry.params.size()));
      note_source(d, k);
      ok_ = false;
      return;
    }
    for (size_t i = 0; i < k.params.size(); ++i) {
      const lir::KernelParam& q = k.params[i];
      const Declared d = declared(q);
      const PtxParam& c = entry.params[i];
      if (matches(d, c)) continue;
      Diagnostic& diag =
          diags_.error("E0120", q.loc,
                       "parameter `" + q.name + "` of kernel `" + k.name + "` is declared " +
                           d.text + ", but the compiled kernel takes " + describe(c) +
                           " there (parameter " + std::to_string(i + 1) + ": " + c.text + ")");
      note_source(diag, k);
      ok_ = false;
    }
  }

  // CUDA dynamic parallelism in a device graph (doc comment of cudaGraphInstantiate) or a
  // conditional body (Programming Guide, "Conditional Node Body Graph Requirements"). The
  // checker already refused the launches it saw in the kernel's own body; these are the ones
  // only the PTX shows (in helper functions, headers, macros).
  void walk(const lir::Graph& g, const lir::Body& r, const lir::Node* conditional) {
    for (const lir::Node& n : r.nodes) {
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (const lir::Body& body : c->bodies) walk(g, body, &n);
      const auto* kn = std::get_if<lir::KernelNode>(&n.op);
      if (!kn || kn->kernel < 0) continue;
      const lir::Kernel& k = p_.kernels[kn->kernel];
      if (!k.launches_kernels || k.launch_in_source.valid()) continue;
      const std::string what = "kernel `" + k.name +
                               "` launches kernels from the device (CUDA dynamic parallelism: its "
                               "compiled code calls cudaLaunchDevice), which ";
      if (g.device) {
        Diagnostic& d =
            diags_.error("E0506", n.loc, what + "a graph launched from the device cannot hold");
        note_source(d, k);
        diags_.add_note(d, g.loc, "`" + g.name + "` is a device graph");
        ok_ = false;
      } else if (conditional) {
        Diagnostic& d = diags_.error("E0507", n.loc, what + "a conditional body cannot hold");
        note_source(d, k);
        diags_.add_note(d, conditional->loc, "the conditional is here");
        ok_ = false;
      }
    }
  }

  // split_segments keeps kernels whose source mentions a device-side launch apart from
  // conditional nodes; one whose launch only the PTX shows (made in an included file) may have
  // stayed beside one, which pipeline.bin's loader refuses: say so here instead.
  void beside_conditionals(const lir::Graph& g) {
    const lir::Node* conditional = nullptr;
    for (const lir::Node& n : g.body.nodes)
      if (std::holds_alternative<lir::ConditionalNode>(n.op) && !conditional) conditional = &n;
    if (!conditional) return;
    for (const lir::Node& n : g.body.nodes) {
      const auto* kn = std::get_if<lir::KernelNode>(&n.op);
      if (!kn || kn->kernel < 0) continue;
      const lir::Kernel& k = p_.kernels[kn->kernel];
      if (!k.launches_kernels || k.may_launch_kernels) continue;
      Diagnostic& d = diags_.error(
          "E0507", n.loc,
          "kernel `" + k.name +
              "` launches kernels from the device (CUDA dynamic parallelism: "
              "its compiled code calls cudaLaunchDevice) but its source does not show it, so it "
              "could "
              "not be given an executable graph apart from the conditional nodes beside it; write "
              "the launch in the kernel's own source");
      note_source(d, k);
      diags_.add_note(d, conditional->loc, "a conditional node in the same graph");
      ok_ = false;
    }
  }

  lir::Program& p_;
  DiagnosticEngine& diags_;
  bool ok_ = true;
  std::map<const std::string*, PtxModule> parsed_;  // each module's PTX parsed once
};

}  // namespace

bool check_compiled_kernels(lir::Program& program, DiagnosticEngine& diags) {
  Checker c(program, diags);
  bool ok = c.run();
  return ok && !diags.has_errors();
}

}  // namespace orch::lowering
