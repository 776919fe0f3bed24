// Rules that need each kernel's compiled code (`orchc --check` compiles the kernels for them;
// `--check --no-kernels` skips them): the declaration's parameters against the compiled entry's
// (E0120), kernels that launch kernels (E0506, E0507) or graphs (E0508) from the device where the
// source text did not show it to the checker, and every launch against what its kernel's CUBINs
// ask of a block (E0204, E0206-E0208), the limits the driver enforces only when the graph is
// instantiated or launched.
#include <algorithm>

#include "lowering/cubin_resources.h"
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
      const uint32_t size = mir::size_of(p.elem);
      const bool f = mir::is_float(p.elem);
      return {size, f ? 'f' : 'i',
              std::string(mir::to_string(p.elem)) + ", " + sized(size) +
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

// Postfix code for the bind checks made here: leaves and operators typed by expr's rules.
class Code {
 public:
  Code& append(const lir::Expr& e) {
    code_.insert(code_.end(), e.code.begin(), e.code.end());
    return *this;
  }
  Code& constant(expr::ScalarType t, uint64_t v) {
    expr::Instr in;
    in.kind = expr::InstrKind::Const;
    in.type = t;
    in.value = expr::Value::of_uint(t, v);
    code_.push_back(in);
    return *this;
  }
  // `op` on the two values on top: their types are those of the code that pushed them.
  Code& binary(expr::Op op, expr::ScalarType a, expr::ScalarType b) {
    expr::Instr in;
    in.kind = expr::InstrKind::Operator;
    in.op = op;
    in.type = expr::result_type(op, a, b).value_or(expr::ScalarType::Bool);
    code_.push_back(in);
    return *this;
  }
  std::vector<expr::Instr> take() { return std::move(code_); }

 private:
  std::vector<expr::Instr> code_;
};

bool depends_on_host_values(const lir::Expr& e) {
  for (const expr::Instr& in : e.code)
    if (in.kind == expr::InstrKind::Param || in.kind == expr::InstrKind::Rank ||
        in.kind == expr::InstrKind::WorldSize)
      return true;
  return false;
}

// What the compiled images of one kernel ask of a block, the most restrictive of its archs.
struct Demand {
  bool known = false;
  std::string arch;               // of the image that sets max_threads
  uint32_t max_threads = UINT32_MAX;
  uint32_t registers = 0;         // of that image
  uint32_t most_registers = 0;    // of any image
  uint32_t launch_bounds = 0;     // __launch_bounds__ threads, 0: none
  uint64_t static_shared = 0;
  uint32_t cluster[3] = {0, 0, 0};
};

class Checker {
 public:
  Checker(lir::Program& p, const CompiledLimits& limits, DiagnosticEngine& diags)
      : p_(p), limits_(limits), diags_(diags) {}

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
            DiagCode::E0508, k.loc,
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
    for (const lir::Graph& graph : p_.graphs) check_launches(graph, graph.body);
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
          diags_.error(DiagCode::E0120, k.loc,
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
          diags_.error(DiagCode::E0120, q.loc,
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
            diags_.error(DiagCode::E0506, n.loc, what + "a graph launched from the device cannot hold");
        note_source(d, k);
        diags_.add_note(d, g.loc, "`" + g.name + "` is a device graph");
        ok_ = false;
      } else if (conditional) {
        Diagnostic& d = diags_.error(DiagCode::E0507, n.loc, what + "a conditional body cannot hold");
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
          DiagCode::E0507, n.loc,
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

  // ---- launches against the compiled kernels' demands (E0204, E0206-E0208) ----------------

  const Demand& demand_of(int kernel) {
    auto found = demands_.find(kernel);
    if (found != demands_.end()) return found->second;
    Demand& d = demands_[kernel];
    const lir::Kernel& k = p_.kernels[static_cast<size_t>(kernel)];
    const std::vector<lir::Image>& images =
        k.module >= 0 ? p_.modules[static_cast<size_t>(k.module)].images : k.images;
    for (const lir::Image& image : images) {
      auto read = resources_.find(&image.cubin);
      if (read == resources_.end()) {
        std::string error;
        auto r = read_cubin_resources(image.cubin, &error);
        if (!r) {
          diags_.error(DiagCode::E0903, k.loc,
                       "the " + image.arch + " image of kernel `" + k.name + "` could not be read: " + error);
          ok_ = false;
        }
        read = resources_.emplace(&image.cubin, r.value_or(std::map<std::string, KernelResources>{})).first;
      }
      auto it = read->second.find(k.lowered_name);
      if (it == read->second.end()) continue;
      const KernelResources& r = it->second;
      d.known = true;
      uint32_t most = std::min(limits_.max_threads_per_block, max_threads_for_registers(r.registers, limits_.registers));
      if (r.max_threads) most = std::min(most, r.max_threads);
      if (most < d.max_threads || d.arch.empty()) {
        d.max_threads = std::min(d.max_threads, most);
        d.arch = image.arch;
        d.registers = r.registers;
        d.launch_bounds = r.max_threads;
      }
      d.static_shared = std::max(d.static_shared, r.static_shared);
      d.most_registers = std::max(d.most_registers, r.registers);
      if (r.has_cluster()) std::copy(r.cluster, r.cluster + 3, d.cluster);
    }
    // For the speed passes' one-wave test once compiled (launch_shape).
    if (d.known) p_.kernels[static_cast<size_t>(kernel)].demand = {d.most_registers, d.static_shared};
    return d;
  }

  // Reports `code` at the launch `n` (with the kernel's line) if `value`, at the defaults for
  // each family member, is more than `most`; and where the value depends on the params, adds
  // the bind check `condition` with the message `again`.
  void limit(const lir::Node& n, const lir::Kernel& k, DiagCode code, const std::vector<const lir::Expr*>& parts,
             std::function<std::optional<uint64_t>(std::optional<uint32_t>)> value,
             std::function<bool(uint64_t)> holds, std::function<std::string(uint64_t)> message,
             std::vector<expr::Instr> condition, const std::string& condition_text, const std::string& again) {
    bool family = false, host = false;
    for (const lir::Expr* e : parts) {
      host |= depends_on_host_values(*e);
      for (const expr::Instr& in : e->code) family |= in.kind == expr::InstrKind::FamilyIndex;
    }
    const uint32_t members = family ? std::max<uint32_t>(family_size_, 1) : 1;
    for (uint32_t m = 0; m < members; ++m) {
      std::optional<uint64_t> v = value(family ? std::optional<uint32_t>(m) : std::nullopt);
      if (!v || holds(*v)) continue;
      Diagnostic& d = diags_.error(code, n.loc, message(*v) + (family ? " for member " + std::to_string(m) : "") +
                                                    (host ? " (with the params' default values)" : ""));
      note_source(d, k);
      ok_ = false;
      return;
    }
    if (!host) return;
    lir::BindCheck b;
    b.code = to_string(code);
    b.message = again;
    b.condition.code = std::move(condition);
    b.condition.text = condition_text;
    b.loc = n.loc;
    b.family_size = family ? family_size_ : 0;
    p_.bind_checks.push_back(std::move(b));
  }

  void check_launches(const lir::Graph& g, const lir::Body& body) {
    family_size_ = g.family_size;
    for (const lir::Node& n : body.nodes) {
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
        for (const lir::Body& b : c->bodies) check_launches(g, b);
      const auto* kn = std::get_if<lir::KernelNode>(&n.op);
      if (!kn || kn->kernel < 0) continue;
      const Demand& d = demand_of(kn->kernel);
      if (!d.known) continue;
      const lir::Kernel& k = p_.kernels[static_cast<size_t>(kn->kernel)];
      check_block(n, *kn, k, d);
      check_shared(n, *kn, k, d);
      check_cluster(n, *kn, k, d);
    }
  }

  void check_block(const lir::Node& n, const lir::KernelNode& kn, const lir::Kernel& k, const Demand& d) {
    // The checker proved the block within the target's limit (E0201): only a smaller one is news.
    if (d.max_threads >= limits_.max_threads_per_block) return;
    std::string why;
    if (d.launch_bounds && d.launch_bounds == d.max_threads)
      why = "`" + k.name + "` is compiled with __launch_bounds__(" + std::to_string(d.launch_bounds) + ")";
    else
      why = "its " + d.arch + " code uses " + std::to_string(d.registers) + " registers per thread, and " +
            limits_.target + " has " + std::to_string(limits_.registers.per_block) + " per block";
    const std::string most = "at most " + std::to_string(d.max_threads) + " threads";
    Code c;
    c.append(kn.block[0]).constant(expr::ScalarType::U64, 1).binary(expr::Op::Mul, kn.block[0].type(), expr::ScalarType::U64);
    c.append(kn.block[1]).binary(expr::Op::Mul, expr::ScalarType::U64, kn.block[1].type());
    c.append(kn.block[2]).binary(expr::Op::Mul, expr::ScalarType::U64, kn.block[2].type());
    c.constant(expr::ScalarType::U64, d.max_threads).binary(expr::Op::Le, expr::ScalarType::U64, expr::ScalarType::U64);
    limit(n, k, DiagCode::E0206, {&kn.block[0], &kn.block[1], &kn.block[2]},
          [&](std::optional<uint32_t> m) -> std::optional<uint64_t> {
            auto x = value_at_defaults(p_, kn.block[0], m), y = value_at_defaults(p_, kn.block[1], m), z = value_at_defaults(p_, kn.block[2], m);
            if (!x || !y || !z || *x > 1024 || *y > 1024 || *z > 1024) return std::nullopt;
            return *x * *y * *z;
          },
          [&](uint64_t v) { return v <= d.max_threads; },
          [&](uint64_t v) {
            return "block of `" + k.name + "` has " + std::to_string(v) + " threads, but " + why + ", so a block may have " + most;
          },
          c.take(), "block threads <= " + std::to_string(d.max_threads),
          "block of `" + k.name + "` has too many threads: " + why + ", so a block may have " + most);
  }

  void check_shared(const lir::Node& n, const lir::KernelNode& kn, const lir::Kernel& k, const Demand& d) {
    if (d.static_shared == 0) return;  // the checker proved the dynamic part alone (E0204)
    const uint64_t optin = limits_.max_shared_bytes_per_block_optin;
    const uint64_t most = d.static_shared >= optin ? 0 : optin - d.static_shared;
    const std::string why = "with its " + std::to_string(d.static_shared) + " bytes of static shared memory, " +
                            limits_.target + " allows at most " + std::to_string(most) +
                            " per block (" + std::to_string(optin) + " in all)";
    if (kn.shared_bytes.code.empty()) {
      if (most > 0) return;
      Diagnostic& diag = diags_.error(DiagCode::E0204, n.loc,
                                      "kernel `" + k.name + "` has " + std::to_string(d.static_shared) +
                                          " bytes of static shared memory; " + limits_.target + " allows at most " +
                                          std::to_string(optin) + " per block");
      note_source(diag, k);
      ok_ = false;
      return;
    }
    Code c;
    c.append(kn.shared_bytes).constant(expr::ScalarType::U64, most).binary(expr::Op::Le, kn.shared_bytes.type(), expr::ScalarType::U64);
    limit(n, k, DiagCode::E0204, {&kn.shared_bytes},
          [&](std::optional<uint32_t> m) { return value_at_defaults(p_, kn.shared_bytes, m); },
          [&](uint64_t v) { return v <= most; },
          [&](uint64_t v) {
            return "launch of `" + k.name + "` asks for " + std::to_string(v) + " bytes of dynamic shared memory; " + why;
          },
          c.take(), "shared bytes <= " + std::to_string(most),
          "launch of `" + k.name + "` asks for too much dynamic shared memory: " + why);
  }

  void check_cluster(const lir::Node& n, const lir::KernelNode& kn, const lir::Kernel& k, const Demand& d) {
    if (d.cluster[0] == 0) return;
    const std::string dims = "__cluster_dims__(" + std::to_string(d.cluster[0]) + ", " + std::to_string(d.cluster[1]) +
                             ", " + std::to_string(d.cluster[2]) + ")";
    const uint64_t size = uint64_t{d.cluster[0]} * d.cluster[1] * d.cluster[2];
    if (size > limits_.max_cluster_size) {
      if (!cluster_reported_.insert(&k).second) return;  // once per kernel, at its first launch
      Diagnostic& diag = diags_.error(
          DiagCode::E0208, n.loc,
          "`" + k.name + "` is compiled with " + dims + ", a cluster of " + std::to_string(size) + " blocks; " +
              limits_.target + " allows at most " + std::to_string(limits_.max_cluster_size) +
              " (the portable cluster size: orch does not opt in to larger, non-portable ones)");
      note_source(diag, k);
      ok_ = false;
      return;
    }
    static const char* const kDim[] = {"x", "y", "z"};
    for (int i = 0; i < 3; ++i) {
      const uint32_t c = std::max<uint32_t>(d.cluster[i], 1);
      if (c == 1) continue;
      const lir::Expr& grid = kn.grid[i];
      Code code;
      code.append(grid).constant(grid.type(), c).binary(expr::Op::Mod, grid.type(), grid.type());
      code.constant(grid.type(), 0).binary(expr::Op::Eq, grid.type(), grid.type());
      const std::string why = "`" + k.name + "` is compiled with " + dims + ", and a grid must be whole clusters";
      limit(n, k, DiagCode::E0207, {&grid},
            [&](std::optional<uint32_t> m) { return value_at_defaults(p_, grid, m); },
            [&](uint64_t v) { return v % c == 0; },
            [&](uint64_t v) {
              return "grid of `" + k.name + "` has " + std::to_string(v) + " blocks in " + kDim[i] +
                     ", not a multiple of " + std::to_string(c) + ": " + why;
            },
            code.take(), std::string("grid ") + kDim[i] + " % " + std::to_string(c) + " == 0",
            "grid of `" + k.name + "` is not a multiple of " + std::to_string(c) + " blocks in " + kDim[i] + ": " + why);
    }
  }

  lir::Program& p_;
  const CompiledLimits& limits_;
  DiagnosticEngine& diags_;
  bool ok_ = true;
  std::map<const std::string*, PtxModule> parsed_;  // each module's PTX parsed once
  std::map<const std::string*, std::map<std::string, KernelResources>> resources_;  // per CUBIN
  std::map<int, Demand> demands_;
  std::set<const lir::Kernel*> cluster_reported_;
  uint32_t family_size_ = 0;
};

}  // namespace

CompiledLimits compiled_limits_of(const TargetProfile& profile) {
  CompiledLimits l;
  l.target = profile.name;
  l.max_threads_per_block = profile.max_threads_per_block;
  l.registers.per_block = profile.max_registers_per_block;
  l.registers.allocation_unit = profile.register_allocation_unit;
  l.registers.partitions = profile.register_file_partitions;
  l.max_shared_bytes_per_block_optin = profile.max_shared_bytes_per_block_optin;
  l.max_cluster_size = profile.max_cluster_size;
  return l;
}

bool check_compiled_kernels(lir::Program& program, const CompiledLimits& limits, DiagnosticEngine& diags) {
  Checker c(program, limits, diags);
  bool ok = c.run();
  return ok && !diags.has_errors();
}

}  // namespace orch::lowering
