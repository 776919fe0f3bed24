#include "lowering/codegen.h"
#include "lowering/passes.h"

namespace orch::lowering {

namespace {

std::string launch_stream(ir::LaunchMode m) {
  switch (m) {
    case ir::LaunchMode::FireAndForget:
      return "cudaStreamGraphFireAndForget";
    case ir::LaunchMode::Sibling:
      return "cudaStreamGraphFireAndForgetAsSibling";
    case ir::LaunchMode::Tail:
      break;
  }
  return "cudaStreamGraphTailLaunch";
}

void add_updates(GeneratedKernel& k, const ir::Program& p,
                 const std::vector<std::pair<int, ir::Expr>>& updates) {
  for (const auto& [dst, value] : updates) {
    std::string rhs = k.expr(value);
    std::string target = k.buffer(dst, true);
    ir::ScalarType t = p.buffers[dst].elem;
    std::string type = cuda_type(t);
    if (t == ir::ScalarType::F16 || t == ir::ScalarType::BF16)
      k.add_statement("*" + target + " = " + type + "(float(" + rhs + "));");
    else
      k.add_statement("*" + target + " = static_cast<" + type + ">(" + rhs + ");");
  }
}

class Generator {
 public:
  explicit Generator(ir::Program& p) : p_(p) {}

  void region(ir::Region& r, int graph) {
    for (ir::Node& n : r.nodes) {
      for (ir::Region& b : n.bodies) region(b, graph);
      switch (n.kind) {
        case ir::NodeKind::ScalarUpdate:
          n = scalar_update(n);
          break;
        case ir::NodeKind::SetCondition:
          n = set_condition(n);
          break;
        case ir::NodeKind::Fill:
          if (n.memset_element_size == 0) n = fill(n);
          break;
        case ir::NodeKind::LaunchGraph:
          n = launcher(n, graph);
          break;
        default:
          break;
      }
    }
  }

 private:
  std::string name(const char* what) {
    return std::string("orch_") + what + "_" + std::to_string(count_++);
  }

  ir::Node scalar_update(const ir::Node& n) {
    GeneratedKernel k(p_, name("update"));
    std::vector<std::pair<int, ir::Expr>> updates = n.fused_updates;
    if (updates.empty()) updates.push_back({n.dst, n.value});
    add_updates(k, p_, updates);
    return k.finish(n.loc, n.call_stack);
  }

  ir::Node set_condition(const ir::Node& n) {
    GeneratedKernel k(p_, name("condition"));
    add_updates(k, p_, n.fused_updates);
    std::string h = k.handle(n.handle);
    std::string value = k.expr(*n.cond);
    if (n.condition_of == ir::NodeKind::Switch) {
      // CUDA runs body i for value i and nothing for i >= size: case values map onto their
      // positions, everything else onto the default body (last) or past the end.
      std::string code = "long long v = static_cast<long long>(" + value +
                         "); unsigned index = " + std::to_string(n.case_values.size()) +
                         "u; switch (v) {";
      for (size_t i = 0; i < n.case_values.size(); ++i)
        code += " case " + std::to_string(n.case_values[i]) + "ll: index = " + std::to_string(i) +
                "u; break;";
      code += " default: break; }";
      k.add_statement(code);
      k.add_statement("cudaGraphSetConditional(" + h + ", index);");
    } else {
      k.add_statement("cudaGraphSetConditional(" + h + ", (" + value + ") ? 1u : 0u);");
    }
    ir::Node out = k.finish(n.loc, n.call_stack);
    out.accesses = n.accesses;
    return out;
  }

  ir::Node fill(const ir::Node& n) {
    const ir::Buffer& b = p_.buffers[n.dst];
    GeneratedKernel k(p_, name("fill"));
    std::string value = k.expr(n.value);
    std::string dst = k.buffer(n.dst, true);
    ir::Expr count = b.count ? *b.count : int_constant(1, ir::ScalarType::U64);
    std::string count_code = k.value(count);
    std::string type = cuda_type(b.elem);
    std::string converted = b.elem == ir::ScalarType::F16 || b.elem == ir::ScalarType::BF16
                                ? type + "(float(" + value + "))"
                                : "static_cast<" + type + ">(" + value + ")";
    k.add_statement("const " + type + " value = " + converted + ";");
    k.add_statement(
        "for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; "
        "i < (unsigned long long)" +
        count_code + "; i += (unsigned long long)gridDim.x * blockDim.x) " + dst + "[i] = value;");
    // One thread per element up to 4096 blocks of 256; a grid-stride loop covers the rest.
    ir::Expr blocks;
    blocks.kind = ir::ExprKind::Call;
    blocks.op = "min";
    blocks.type = ir::ScalarType::U64;
    ir::Expr ceil;
    ceil.kind = ir::ExprKind::Call;
    ceil.op = "ceil_div";
    ceil.type = ir::ScalarType::U64;
    ceil.operands = {count, int_constant(256)};
    blocks.operands = {ceil, int_constant(4096)};
    ir::Node out = k.finish_with_shape(n.loc, n.call_stack, blocks, int_constant(256));
    out.accesses = n.accesses;
    return out;
  }

  // Launches the graph and reports a failed launch (cudaGraphLaunch returns the error to the
  // launching thread, and nothing else sees it) in the executable's device status; a family
  // index out of range is reported instead of read past the family's table.
  ir::Node launcher(const ir::Node& n, int graph) {
    const ir::Graph& g = p_.graphs[n.graph];
    GeneratedKernel k(p_, name("launch"));
    bool family = g.family_size > 0;
    std::string exec = k.graph(n.graph, family, n.graph == graph);
    std::string what = "launch " + g.name;
    if (family) what += "[" + ir::to_string(*n.family_member, p_) + "]";
    what += std::string(" ") + ir::to_string(n.mode);
    k.status(n.loc, n.call_stack, what);
    std::string launch = "{ const cudaError_t e = cudaGraphLaunch(" + exec + (family ? "[m]" : "") +
                         ", " + launch_stream(n.mode) +
                         "); if (e != cudaSuccess) orch_report_error(orch_status, 1u, orch_site, "
                         "(unsigned)e); }";
    if (family) {
      k.add_statement("const unsigned long long m = (unsigned long long)(" +
                      k.expr(*n.family_member) + ");");
      k.add_statement("if (m < " + std::to_string(g.family_size) + "ull) " + launch);
      k.add_statement("else orch_report_error(orch_status, 2u, orch_site, (unsigned)m);");
    } else {
      k.add_statement(launch);
    }
    ir::Node out = k.finish(n.loc, n.call_stack);
    out.accesses = n.accesses;  // ordered like the launched graph's own work
    return out;
  }

  ir::Program& p_;
  int count_ = 0;
};

}  // namespace

void generate_kernels(ir::Program& p) {
  Generator gen(p);
  for (size_t g = 0; g < p.graphs.size(); ++g) gen.region(p.graphs[g].body, static_cast<int>(g));
}

}  // namespace orch::lowering
