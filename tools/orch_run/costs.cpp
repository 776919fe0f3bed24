#include "tools/orch_run/costs.h"

#include <algorithm>
#include <cmath>

#include "artifact/expr_code.h"

namespace orch::run {

bool evaluate_cost(const std::vector<expr::Instr>& code, const CostLeaf& leaf, double* out, std::string* error) {
  std::vector<double> stack;
  for (const expr::Instr& in : code) {
    if (in.kind != expr::InstrKind::Operator) {
      std::optional<double> v;
      if (in.kind == expr::InstrKind::Const) v = in.value.as_double();
      else v = leaf(in);
      if (!v) {
        *error = "a value it needs is not known";
        return false;
      }
      stack.push_back(*v);
      continue;
    }
    const int n = expr::arity(in.op);
    if (static_cast<int>(stack.size()) < n || n < 1 || n > 2) {
      *error = "malformed expression";
      return false;
    }
    const double b = stack.back();
    const double a = n == 2 ? stack[stack.size() - 2] : 0;
    stack.resize(stack.size() - static_cast<size_t>(n));
    const bool integer = expr::is_integer(in.type);
    double r = 0;
    switch (in.op) {
      case expr::Op::Neg: r = -b; break;
      case expr::Op::Add: r = a + b; break;
      case expr::Op::Sub: r = a - b; break;
      case expr::Op::Mul: r = a * b; break;
      case expr::Op::Div:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = integer ? std::trunc(a / b) : a / b;
        break;
      case expr::Op::Mod:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = std::fmod(a, b);
        break;
      case expr::Op::Shl: r = a * std::ldexp(1.0, static_cast<int>(b)); break;
      case expr::Op::Shr: r = std::floor(a / std::ldexp(1.0, static_cast<int>(b))); break;
      case expr::Op::Min: r = std::min(a, b); break;
      case expr::Op::Max: r = std::max(a, b); break;
      case expr::Op::CeilDiv:
        if (b == 0) {
          *error = "division by zero";
          return false;
        }
        r = std::ceil(a / b);
        break;
      default:
        *error = std::string("`") + expr::symbol(in.op) + "` is not arithmetic";
        return false;
    }
    stack.push_back(r);
  }
  if (stack.size() != 1) {
    *error = "malformed expression";
    return false;
  }
  if (!std::isfinite(stack[0]) || stack[0] < 0) {
    *error = "it is " + std::to_string(stack[0]) + ", not a count";
    return false;
  }
  *out = stack[0];
  return true;
}

DeclaredCost declared_cost(const orch::fb::Pipeline& p, const orch::fb::Op& node, const CostLeaf& leaf) {
  DeclaredCost c;
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
