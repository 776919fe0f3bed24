#include "tools/orch_run/costs.h"

#include <cmath>

#include "artifact/expr_code.h"

namespace orch::run {

bool evaluate_cost(const std::vector<expr::Instr>& code, const CostLeaf& leaf, double* out, std::string* error) {
  double v = 0;
  if (!expr::evaluate_real(code, leaf, &v, error)) return false;
  if (!std::isfinite(v) || v < 0) {
    *error = "it is " + std::to_string(v) + ", not a count";
    return false;
  }
  *out = v;
  return true;
}

DeclaredCost declared_cost(const orch::fb::Pipeline& p, const orch::fb::Op& op, const CostLeaf& leaf) {
  DeclaredCost c;
  const orch::fb::KernelOp* kernel = op.body_as_KernelOp();
  if (!kernel) return c;  // only a kernel declares a cost
  const orch::fb::KernelOp& node = *kernel;
  if (p.kernels() && node.kernel() >= 0 && static_cast<uint32_t>(node.kernel()) < p.kernels()->size())
    c.flops_type = p.kernels()->Get(node.kernel())->cost_flops_type();
  std::string error;
  if (node.cost_bytes()) {
    if (evaluate_cost(orch::artifact::to_expr(node.cost_bytes()), leaf, &c.bytes, &error)) c.has_bytes = true;
    else c.error = "its declared bytes: " + error;
  }
  if (node.cost_flops()) {
    if (evaluate_cost(orch::artifact::to_expr(node.cost_flops()), leaf, &c.flops, &error)) c.has_flops = true;
    else if (c.error.empty()) c.error = "its declared flops: " + error;
  }
  return c;
}

}  // namespace orch::run
