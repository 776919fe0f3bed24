// The artifact's postfix expressions (fb::ExprInstr) as expr/'s code (expr::Instr) and back. The
// artifact's ExprOp lists the six leaves, then expr::Op in its order; the asserts below prove
// the mapping one to one, as they prove the scalar types equal.
#pragma once

#include <vector>

#include "artifact/pipeline_generated.h"
#include "expr/expr.h"

namespace orch::artifact {

constexpr int kFirstOperator = static_cast<int>(fb::ExprOp::Neg);

constexpr fb::ExprOp to_fb(expr::Op op) { return static_cast<fb::ExprOp>(static_cast<int>(op) + kFirstOperator); }

#define ORCH_SAME_OP(name) static_assert(to_fb(expr::Op::name) == fb::ExprOp::name, "ExprOp " #name);
ORCH_SAME_OP(Neg) ORCH_SAME_OP(Not) ORCH_SAME_OP(BitNot) ORCH_SAME_OP(Add) ORCH_SAME_OP(Sub)
ORCH_SAME_OP(Mul) ORCH_SAME_OP(Div) ORCH_SAME_OP(Mod) ORCH_SAME_OP(Shl) ORCH_SAME_OP(Shr)
ORCH_SAME_OP(Lt) ORCH_SAME_OP(Le) ORCH_SAME_OP(Gt) ORCH_SAME_OP(Ge) ORCH_SAME_OP(Eq) ORCH_SAME_OP(Ne)
ORCH_SAME_OP(BitAnd) ORCH_SAME_OP(BitXor) ORCH_SAME_OP(BitOr) ORCH_SAME_OP(And) ORCH_SAME_OP(Or)
ORCH_SAME_OP(Min) ORCH_SAME_OP(Max) ORCH_SAME_OP(CeilDiv)
#undef ORCH_SAME_OP
static_assert(static_cast<int>(fb::ExprOp::MAX) - kFirstOperator + 1 == expr::kOpCount,
              "every artifact operator is an expr::Op");

#define ORCH_SAME_TYPE(name) \
  static_assert(static_cast<int>(fb::ScalarType::name) == static_cast<int>(expr::ScalarType::name), "ScalarType " #name);
ORCH_SAME_TYPE(U8) ORCH_SAME_TYPE(U16) ORCH_SAME_TYPE(U32) ORCH_SAME_TYPE(U64) ORCH_SAME_TYPE(I8)
ORCH_SAME_TYPE(I16) ORCH_SAME_TYPE(I32) ORCH_SAME_TYPE(I64) ORCH_SAME_TYPE(F16) ORCH_SAME_TYPE(BF16)
ORCH_SAME_TYPE(F32) ORCH_SAME_TYPE(F64) ORCH_SAME_TYPE(Bool)
#undef ORCH_SAME_TYPE
static_assert(static_cast<int>(fb::ScalarType::MAX) + 1 == expr::kScalarTypeCount, "one scalar type enum");

constexpr expr::ScalarType to_expr(fb::ScalarType t) { return static_cast<expr::ScalarType>(t); }
constexpr fb::ScalarType to_fb(expr::ScalarType t) { return static_cast<fb::ScalarType>(t); }

// One artifact instruction as expr/'s (values as their type says; no range checks: the
// validator runs expr::verify on the result).
expr::Instr to_expr(const fb::ExprInstr& in);
fb::ExprInstr to_fb(const expr::Instr& in);
// A param's default as a value of its type (has_default must be set).
expr::Value default_of(const fb::Param& p);
// The whole code of an expression (empty for a missing one).
std::vector<expr::Instr> to_expr(const fb::Expr* e);

}  // namespace orch::artifact
