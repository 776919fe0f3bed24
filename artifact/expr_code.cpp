#include "artifact/expr_code.h"

namespace orch::artifact {

expr::Instr to_expr(const fb::ExprInstr& in) {
  expr::Instr out;
  out.type = to_expr(in.type());
  out.ref = in.ref();
  switch (in.op()) {
    case fb::ExprOp::ConstInt:
      out.kind = expr::InstrKind::Const;
      out.value = expr::Value{out.type, static_cast<uint64_t>(in.i())};
      break;
    case fb::ExprOp::ConstFloat:
      out.kind = expr::InstrKind::Const;
      out.value = expr::Value::of_double(out.type, in.f());
      break;
    case fb::ExprOp::Param: out.kind = expr::InstrKind::Param; break;
    case fb::ExprOp::FamilyIndex: out.kind = expr::InstrKind::FamilyIndex; break;
    case fb::ExprOp::Rank: out.kind = expr::InstrKind::Rank; break;
    case fb::ExprOp::WorldSize: out.kind = expr::InstrKind::WorldSize; break;
    default:
      out.kind = expr::InstrKind::Operator;
      out.op = static_cast<expr::Op>(static_cast<int>(in.op()) - kFirstOperator);
      break;
  }
  return out;
}

fb::ExprInstr to_fb(const expr::Instr& in) {
  const fb::ScalarType t = to_fb(in.type);
  switch (in.kind) {
    case expr::InstrKind::Const:
      if (in.value.is_float()) return fb::ExprInstr(fb::ExprOp::ConstFloat, t, 0, 0, in.value.f64());
      return fb::ExprInstr(fb::ExprOp::ConstInt, t, 0, in.value.i64(), 0);
    case expr::InstrKind::Param: return fb::ExprInstr(fb::ExprOp::Param, t, in.ref, 0, 0);
    case expr::InstrKind::FamilyIndex: return fb::ExprInstr(fb::ExprOp::FamilyIndex, t, 0, 0, 0);
    case expr::InstrKind::Rank: return fb::ExprInstr(fb::ExprOp::Rank, t, 0, 0, 0);
    case expr::InstrKind::WorldSize: return fb::ExprInstr(fb::ExprOp::WorldSize, t, 0, 0, 0);
    case expr::InstrKind::DeviceScalar:  // host expressions never read device memory: a zero
      if (expr::is_float(in.type)) return fb::ExprInstr(fb::ExprOp::ConstFloat, t, 0, 0, 0);
      return fb::ExprInstr(fb::ExprOp::ConstInt, t, 0, 0, 0);
    case expr::InstrKind::Operator: break;
  }
  return fb::ExprInstr(to_fb(in.op), t, 0, 0, 0);
}

expr::Value default_of(const fb::Param& p) {
  const expr::ScalarType t = to_expr(p.type());
  if (expr::is_float(t)) return expr::Value::of_double(t, p.default_f());
  return expr::Value{t, static_cast<uint64_t>(p.default_i())};
}

std::vector<expr::Instr> to_expr(const fb::Expr* e) {
  std::vector<expr::Instr> code;
  if (e == nullptr || e->code() == nullptr) return code;
  code.reserve(e->code()->size());
  for (const fb::ExprInstr* in : *e->code()) code.push_back(to_expr(*in));
  return code;
}

}  // namespace orch::artifact
