// validate()'s rules for expressions: well formed (every operand there, every reference in
// range), well typed, within the length limit.
#include <string>
#include <vector>

#include "artifact/validate_internal.h"

namespace orch::artifact::detail {

namespace {

// Operands an expression instruction pops; each pushes one value.
int arity(fb::ExprOp op) {
  if (static_cast<int>(op) < kFirstOperator) return 0;
  return expr::arity(static_cast<expr::Op>(static_cast<int>(op) - kFirstOperator));
}

}  // namespace

// True when a present expression is well formed and well typed; otherwise false, with the
// complaint in *problem (for the caller to label), or in error_ when the budget ran out.
// Charges its size first.
bool Validator::expr_ok(const fb::Expr* e, std::string* problem) {
  const auto* code = e->code();
  const uint32_t n = size_of(code);
  if (!charge(8 + 24 * static_cast<uint64_t>(n))) return false;
  if (proven(code, n)) return true;
  *problem = expr_problem(code, n);
  return problem->empty();
}

// "" or what is wrong with the `n` instructions of a present, charged expression.
std::string Validator::expr_problem(const flatbuffers::Vector<const fb::ExprInstr*>* code, uint32_t n) {
  if (n == 0) return "expression has no instructions";
  if (n > kMaxExprLength) {
    return "expression has " + std::to_string(n) + " instructions, more than the limit of " +
           std::to_string(kMaxExprLength);
  }
  if (!detail::structs_aligned(code)) {
    return "expression code is not 8-byte aligned";
  }
  int64_t depth = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const fb::ExprInstr* in = code->Get(k);
    const fb::ExprOp op = in->op();
    if (!in_range(op)) {
      return "expression instruction " + std::to_string(k) + " has unknown op " +
             std::to_string(static_cast<unsigned>(op));
    }
    const int pops = arity(op);
    if (depth < pops) {
      return "expression instruction " + std::to_string(k) + " (" + fb::EnumNameExprOp(op) +
             ") needs " + plural(pops, "operand") + ", the stack holds " + std::to_string(depth);
    }
    if (!in_range(in->type())) {
      return "expression instruction " + std::to_string(k) + " has unknown type " +
             std::to_string(static_cast<unsigned>(in->type()));
    }
    if (op == fb::ExprOp::Param &&
        (in->ref() < 0 || in->ref() >= static_cast<int64_t>(n_params_))) {
      return "expression instruction " + std::to_string(k) + " refers to param " +
             std::to_string(in->ref()) + ", but the pipeline has " + plural(n_params_, "param");
    }
    if (op == fb::ExprOp::Param && in->type() != p_.params()->Get(static_cast<uint32_t>(in->ref()))->type()) {
      return "expression instruction " + std::to_string(k) + " reads param " + std::to_string(in->ref()) +
             " as " + fb::EnumNameScalarType(in->type()) + ", but it is " +
             fb::EnumNameScalarType(p_.params()->Get(static_cast<uint32_t>(in->ref()))->type());
    }
    if ((op == fb::ExprOp::FamilyIndex || op == fb::ExprOp::Rank || op == fb::ExprOp::WorldSize) &&
        in->type() != fb::ScalarType::U32) {
      return "expression instruction " + std::to_string(k) + " (" + fb::EnumNameExprOp(op) + ") must be U32";
    }
    depth = depth - pops + 1;
  }
  if (depth != 1) {
    return "expression leaves " + std::to_string(depth) + " values on the stack instead of 1";
  }
  // Types: every operator's by the rules, every constant a value of its type. Short code is
  // decoded in place: a pipeline holds several expressions per kernel node.
  constexpr uint32_t kInPlace = 8;
  expr::Instr in_place[kInPlace];
  std::vector<expr::Instr> on_heap;
  expr::Instr* decoded = in_place;
  if (n > kInPlace) {
    on_heap.resize(n);
    decoded = on_heap.data();
  }
  for (uint32_t k = 0; k < n; ++k) decoded[k] = to_expr(*code->Get(k));
  std::string typing = expr::verify(decoded, n);
  if (!typing.empty()) return "expression " + typing;
  remember(reinterpret_cast<const fb::ExprInstr*>(code->Data()), n);
  return std::string();
}

// Top-level expressions: `label` is e.g. "buffer 'u' count".
bool Validator::check_expr(const fb::Expr* e, bool required, const std::string& label) {
  if (e == nullptr) return required ? fail(label + " is missing") : true;
  std::string problem;
  if (expr_ok(e, &problem)) return true;
  return error_.empty() ? fail(label + ": " + problem) : false;
}

[[gnu::noinline]] bool Validator::node_expr_typed(const flatbuffers::Vector<const fb::ExprInstr*>* code,
                                                  uint32_t n, const char* label, int index) {
  const std::string problem = expr_problem(code, n);
  return problem.empty() || node_expr_failed(label, index, ": " + problem);
}

[[gnu::noinline]] bool Validator::node_expr_failed(const char* label, int index, const std::string& what) {
  return fail_here(std::string(label) + (index >= 0 ? "[" + std::to_string(index) + "]" : "") +
                   (what[0] == ':' ? "" : " ") + what);
}

}  // namespace orch::artifact::detail
