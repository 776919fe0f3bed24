#include <algorithm>

#include "lowering/codegen.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

std::string launch_stream(mir::LaunchMode m) {
  switch (m) {
    case mir::LaunchMode::FireAndForget:
      return "cudaStreamGraphFireAndForget";
    case mir::LaunchMode::Sibling:
      return "cudaStreamGraphFireAndForgetAsSibling";
    case mir::LaunchMode::Tail:
      break;
  }
  return "cudaStreamGraphTailLaunch";
}

// Each update converts its value to the scalar's type as expr/ does; on an error (overflow,
// division by zero, a value the type cannot hold) the scalar keeps its value and the kernel
// reports the code through orch_expr_error.
void add_updates(GeneratedKernel& k, const mir::Program& p,
                 const std::vector<std::pair<int, mir::Expr>>& updates) {
  for (const auto& [dst, value] : updates) {
    std::string rhs = k.expr(value);
    std::string target = k.buffer(dst, true);
    mir::ScalarType t = p.buffers[dst].elem;
    std::string tc = expr::type_code(t);
    k.add_statement("{ orch_v<" + tc + "> r = " + expr::print_convert(rhs, value.type, t) +
                    "; if (r.e) orch_expr_error(r.e); else *" + target + " = orch_to_storage<" + tc +
                    ">(r.v); }");
  }
}

// One thread per element up to 4096 blocks of 256 (a grid-stride loop covers the rest): a
// constant where the count is one (so a one-block kernel is seen to be one: unroll_loops.cpp).
mir::Expr element_blocks(const mir::Expr& count) {
  if (count.kind == mir::ExprKind::Const && !mir::is_float(count.value.type)) {
    const uint64_t n = count.value.bits;
    return int_constant(static_cast<int64_t>(std::min<uint64_t>((n + 255) / 256, 4096)), mir::ScalarType::U64);
  }
  return mir::operation(expr::Op::Min, mir::operation(expr::Op::CeilDiv, count, int_constant(256, mir::ScalarType::U64)),
                       int_constant(4096, mir::ScalarType::U64));
}

class Generator {
 public:
  Generator(mir::Program& p, const PassOptions& o, IrLowering& out) : p_(p), o_(o), out_(out) {}

  void region(mir::Region& r, int graph) {
    for (mir::Node& n : r.nodes) {
      for (mir::Region& b : mir::bodies(n)) region(b, graph);
      switch (n.kind()) {
        case mir::NodeKind::ScalarUpdate:
          n = scalar_update(n);
          break;
        case mir::NodeKind::SetCondition:
          n = set_condition(n);
          break;
        case mir::NodeKind::Fill:
          // The rest become memset nodes; a guarded fill must be a kernel to hold its guard.
          if (n.guard || !memset_pattern(p_, n)) n = fill(n);
          break;
        case mir::NodeKind::Copy:
          if (n.guard) n = copy(n);  // a guarded copy must be a kernel to hold its guard
          break;
        case mir::NodeKind::LaunchGraph:
          n = launcher(n, graph);
          break;
        case mir::NodeKind::Kernel:
        case mir::NodeKind::If:
        case mir::NodeKind::While:
        case mir::NodeKind::Switch:
        case mir::NodeKind::Collective:
          break;  // already CUDA graph nodes: nothing to generate
        case mir::NodeKind::Shmem:
          break;  // generate_nvshmem_kernels' (next)
      }
    }
  }

 private:
  std::string name(const char* what) {
    return std::string("orch_") + what + "_" + std::to_string(count_++);
  }

  mir::Node scalar_update(const mir::Node& n) {
    const mir::ScalarUpdateNode& u = n.as<mir::ScalarUpdateNode>();
    GeneratedKernel k = kernel("update");
    std::vector<std::string> variants;
    if (n.guard) add_guard(k, p_, *n.guard, &variants);
    std::vector<std::pair<int, mir::Expr>> updates = u.fused_updates;
    if (updates.empty()) updates.push_back({u.dst, u.value});
    add_updates(k, p_, updates);
    return guarded(k.finish(n.loc, n.call_stack), n, std::move(variants));
  }

  // A node of an unrolled copy keeps its guard; its kernel holds the guard's code for each role.
  mir::Node guarded(mir::Node out, const mir::Node& n, std::vector<std::string> variants) {
    if (!n.guard) return out;
    out.guard = n.guard;
    out_.guard_variants[out.as<mir::KernelNode>().kernel] = std::move(variants);
    return out;
  }

  // Sets an unrolled loop's guard slots back to undecided (0).
  void reset_guards(GeneratedKernel& k, const mir::SetConditionNode& n) {
    for (int loop : n.reset_guards) {
      const mir::UnrolledLoop& L = p_.unrolled_loops[loop];
      const std::string slots = k.guard_slots(L.slots, true);
      k.add_statement("for (unsigned i = 0u; i < " + std::to_string(L.copies - 1) + "u; ++i) " + slots + "[i] = 0u;");
    }
  }

  // copy src -> dst of a copy node of an unrolled loop: element by element, like fill.
  mir::Node copy(const mir::Node& n) {
    const mir::CopyNode& c = n.as<mir::CopyNode>();
    const mir::Buffer& b = p_.buffers[c.src];
    GeneratedKernel k = kernel("copy");
    std::vector<std::string> variants;
    add_guard(k, p_, *n.guard, &variants);
    const std::string src = k.buffer(c.src, false);
    const std::string dst = k.buffer(c.dst, true);
    return elementwise(k, n, b, dst, src + "[i]", std::move(variants));
  }

  // The end of a generated fill or copy: dst[i] = `element` for every element of `b`, one thread
  // per element (grid-stride, blocks of 256).
  mir::Node elementwise(GeneratedKernel& k, const mir::Node& n, const mir::Buffer& b, const std::string& dst,
                       const std::string& element, std::vector<std::string> variants) {
    mir::Expr count = b.count ? *b.count : int_constant(1, mir::ScalarType::U64);
    std::string count_code = k.value(count, mir::ScalarType::U64);
    k.add_statement(
        "for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; "
        "i < " + count_code + "; i += (unsigned long long)gridDim.x * blockDim.x) " + dst + "[i] = " + element + ";");
    mir::Node out = k.finish_with_shape(n.loc, n.call_stack, element_blocks(count), int_constant(256));
    out.accesses = n.accesses;
    return guarded(std::move(out), n, std::move(variants));
  }

  mir::Node set_condition(const mir::Node& node) {
    const mir::SetConditionNode& n = node.as<mir::SetConditionNode>();
    GeneratedKernel k = kernel("condition");
    add_updates(k, p_, n.fused_updates);
    reset_guards(k, n);
    std::string h = k.handle(n.handle);
    std::string value = k.expr(n.cond);
    const mir::ScalarType t = n.cond.type;
    if (n.condition_of == mir::NodeKind::Switch) {
      // CUDA runs body i for value i and nothing for i >= size: case values map onto their
      // positions, everything else onto the default body (last) or past the end. A subject
      // that fails to evaluate runs no body.
      const std::string none = std::to_string(n.case_values.size() + (n.has_default ? 1 : 0)) + "u";
      std::string code = "orch_v<" + std::string(expr::type_code(t)) + "> c = " + value +
                         "; unsigned index = " + std::to_string(n.case_values.size()) +
                         "u; if (c.e) { orch_expr_error(c.e); index = " + none + "; } else switch (c.v) {";
      for (size_t i = 0; i < n.case_values.size(); ++i)
        code += " case " + expr::literal(expr::Value{t, static_cast<uint64_t>(n.case_values[i])}) +
                ": index = " + std::to_string(i) + "u; break;";
      code += " default: break; }";
      k.add_statement(code);
      k.add_statement("cudaGraphSetConditional(" + h + ", index);");
    } else {
      // A condition that fails to evaluate is false.
      k.add_statement("orch_v<orch_bool> c = orch_truth<" + std::string(expr::type_code(t)) + ">(" + value +
                      "); if (c.e) orch_expr_error(c.e);");
      k.add_statement("cudaGraphSetConditional(" + h + ", (!c.e && c.v) ? 1u : 0u);");
    }
    mir::Node out = k.finish(node.loc, node.call_stack);
    out.accesses = node.accesses;
    return out;
  }

  mir::Node fill(const mir::Node& n) {
    const mir::FillNode& f = n.as<mir::FillNode>();
    const mir::Buffer& b = p_.buffers[f.dst];
    GeneratedKernel k = kernel("fill");
    std::vector<std::string> variants;
    if (n.guard) add_guard(k, p_, *n.guard, &variants);
    // The host converts the value to the element type (exactly, or the runtime refuses it).
    std::string value = k.value(f.value, b.elem);
    std::string dst = k.buffer(f.dst, true);
    return elementwise(k, n, b, dst, value, std::move(variants));
  }

  // Launches the graph and reports a failed launch (cudaGraphLaunch returns the error to the
  // launching thread, and nothing else sees it) in the executable's device status; a family
  // index out of range is reported instead of read past the family's table.
  mir::Node launcher(const mir::Node& node, int graph) {
    const mir::LaunchGraphNode& n = node.as<mir::LaunchGraphNode>();
    const mir::Graph& g = p_.graphs[n.graph];
    GeneratedKernel k = kernel("launch");
    bool family = g.family_size > 0;
    std::string exec = k.graph(n.graph, family, n.graph == graph);
    std::string what = "launch " + g.name;
    if (family) what += "[" + mir::to_string(*n.family_member, p_) + "]";
    what += std::string(" ") + mir::to_string(n.mode);
    k.status(node.loc, node.call_stack, what);
    std::string launch = "{ const cudaError_t e = cudaGraphLaunch(" + exec + (family ? "[m]" : "") +
                         ", " + launch_stream(n.mode) +
                         "); if (e != cudaSuccess) orch_report_error(orch_status, 1u, orch_site, "
                         "(unsigned)e); }";
    if (family) {
      k.add_statement("const unsigned long long m = " +
                      k.value(*n.family_member, mir::ScalarType::U32) + ";");
      k.add_statement("if (m < " + std::to_string(g.family_size) + "ull) " + launch);
      k.add_statement("else orch_report_error(orch_status, 2u, orch_site, (unsigned)m);");
    } else {
      k.add_statement(launch);
    }
    mir::Node out = k.finish(node.loc, node.call_stack);
    out.accesses = node.accesses;  // ordered like the launched graph's own work
    return out;
  }

  // A kernel named for `what`, waiting at entry where programmatic edges may enter it.
  GeneratedKernel kernel(const char* what) {
    GeneratedKernel k(p_, name(what));
    if (o_.pdl) k.wait_at_entry();
    return k;
  }

  mir::Program& p_;
  const PassOptions& o_;
  IrLowering& out_;
  int count_ = 0;
};

}  // namespace

void generate_kernels(mir::Program& p, const PassOptions& o, IrLowering& out) {
  const size_t first = p.kernels.size();
  Generator gen(p, o, out);
  for (size_t g = 0; g < p.graphs.size(); ++g) gen.region(p.graphs[g].body, static_cast<int>(g));
  // Every kernel written here waits at entry where programmatic edges may be (Generator::kernel).
  if (o.pdl)
    for (size_t k = first; k < p.kernels.size(); ++k) out.waits_at_entry.insert(static_cast<int>(k));
}

}  // namespace orch::lowering
