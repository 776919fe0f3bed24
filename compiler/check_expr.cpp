// Expressions: names resolved, operators typed by expr/'s rules (untyped literals settle into
// the type their use site expects), and evaluated with the params' defaults by expr/'s
// evaluator, so an overflow or a division by zero is reported where it happens.
#include <set>
#include <sstream>

#include "compiler/checker.h"

namespace orch::detail {

namespace {

ir::Expr make(ir::ExprKind kind, const SourceRange& loc) {
  ir::Expr e;
  e.kind = kind;
  e.loc = loc;
  return e;
}

expr::Operand operand_of(const ir::Expr& e) {
  if (!e.is_literal) return {e.type, expr::Literal::None};
  return {e.type, ir::is_float(e.type) ? expr::Literal::Float : expr::Literal::Int};
}

const SourceRange& op_place(const ir::Expr& e) { return e.op_loc.valid() ? e.op_loc : e.loc; }

}  // namespace

bool Checker::settle(ir::Expr& e, ir::ScalarType t) {
  if (!e.is_literal) return true;
  e.is_literal = false;
  switch (e.kind) {
    case ir::ExprKind::Const: {
      expr::Outcome o = expr::settle_literal(e.value, t);
      if (!o.ok()) {
        diags_.error(DiagCode::E0109, e.loc, o.message);
        return false;
      }
      e.value = o.value;
      e.type = t;
      return true;
    }
    case ir::ExprKind::Unary:
    case ir::ExprKind::Binary:
    case ir::ExprKind::Call: {
      if (expr::is_integer_only(e.op) && ir::is_float(t)) {
        diags_.error(DiagCode::E0109, op_place(e),
                     std::string("`") + expr::symbol(e.op) + "` needs integers, but this literal expression takes the type " +
                         ir::to_string(t) + " of its use");
        return false;
      }
      bool ok = settle(e.operands[0], t);
      // A shift's count keeps its own type (settled when the shift was built).
      if (e.operands.size() > 1 && e.op != expr::Op::Shl && e.op != expr::Op::Shr)
        ok = settle(e.operands[1], t) && ok;
      e.type = t;
      return ok;
    }
    case ir::ExprKind::Param:
    case ir::ExprKind::DeviceScalar:
    case ir::ExprKind::FamilyIndex:
    case ir::ExprKind::Rank:
    case ir::ExprKind::WorldSize: return true;  // typed where they are made, never literal
  }
  return true;
}

std::optional<ir::Expr> Checker::expr(const ast::Expr& e, ExprContext ctx,
                                      const BodyContext* body) {
  switch (e.kind) {
    case ast::ExprKind::Int: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.is_literal = true;
      // Literals run from -2^63 to 2^64 - 1 until their use gives them a type.
      out.value = e.int_value > static_cast<uint64_t>(INT64_MAX)
                      ? ir::Value::of_uint(ir::ScalarType::U64, e.int_value)
                      : ir::Value::of_int(ir::ScalarType::I64, static_cast<int64_t>(e.int_value));
      out.type = out.value.type;
      return out;
    }
    case ast::ExprKind::Float: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.is_literal = true;
      out.value = ir::Value::of_double(ir::ScalarType::F64, e.float_value);
      out.type = ir::ScalarType::F64;
      return out;
    }
    case ast::ExprKind::Bool: {
      ir::Expr out = make(ir::ExprKind::Const, e.loc);
      out.type = ir::ScalarType::Bool;
      out.value = ir::Value::of_bool(e.int_value != 0);
      return out;
    }
    case ast::ExprKind::Name: {
      const std::string& name = e.text;
      if (cost_names_) {
        // A kernel's cost for one launch: check_cost() allowed only the kernel's value parameters.
        auto it = cost_names_->find(name);
        if (it == cost_names_->end()) return std::nullopt;
        return it->second;
      }
      if (body && !body->family_index.empty() && name == body->family_index) {
        if (ctx != ExprContext::Host && ctx != ExprContext::Device) {
          diags_.error(DiagCode::E0115, e.loc, "family index `" + name + "` is not a constant");
          return std::nullopt;
        }
        ir::Expr out = make(ir::ExprKind::FamilyIndex, e.loc);
        out.type = ir::ScalarType::U32;
        out.name = name;
        return out;
      }
      const Symbol* sym = lookup(name);
      if (!sym) {
        diags_.error(DiagCode::E0101, e.loc, "`" + name + "` is not declared");
        return std::nullopt;
      }
      switch (sym->kind) {
        case SymbolKind::Builtin: {
          // my_pe and n_pes are NVSHMEM's names for rank and world_size: orch starts NVSHMEM
          // over the communicator's ranks, so PE r is rank r (docs/multi-gpu.md, "NVSHMEM").
          const bool nvshmem_name = name == "my_pe" || name == "n_pes";
          bool is_rank = name == "rank" || name == "my_pe";
          if (nvshmem_name) {
            bool symmetric = false;
            for (const ast::Buffer& b : module_.buffers) symmetric |= b.symmetric;
            if (!symmetric) {
              diags_.error(DiagCode::E0709, e.loc,
                           "`" + name + "` is the PE " + (is_rank ? "number" : "count") +
                               " of NVSHMEM, but this pipeline declares no `symmetric` buffer" +
                               (program_->comms.empty() ? "" : (is_rank ? "; use `rank`" : "; use `world_size`")));
              return std::nullopt;
            }
            if (program_->comms.empty()) return std::nullopt;  // E0707 at the symmetric buffer says why
          }
          if (program_->comms.empty()) {
            diags_.error(DiagCode::E0114, e.loc,
                         "`" + name + "` comes from the bound communicator, but this pipeline "
                                      "declares no `comm`");
            return std::nullopt;
          }
          if (ctx == ExprContext::Constant || ctx == ExprContext::ParamDefault ||
              (is_rank && ctx == ExprContext::Size)) {
            diags_.error(DiagCode::E0115, e.loc, "`" + name + "` is not known " +
                                             (ctx == ExprContext::Size ? "when buffers are sized"
                                                                       : "at compile time"));
            return std::nullopt;
          }
          program_->uses_rank = true;
          ir::Expr out = make(is_rank ? ir::ExprKind::Rank : ir::ExprKind::WorldSize, e.loc);
          out.type = ir::ScalarType::U32;
          return out;
        }
        case SymbolKind::Param: {
          if (ctx == ExprContext::Constant) {
            diags_.error(DiagCode::E0115, e.loc, "this must be a constant, but `" + name + "` is a param");
            return std::nullopt;
          }
          ir::Expr out = make(ir::ExprKind::Param, e.loc);
          out.ref = sym->index;
          out.type = program_->params[sym->index].type;
          return out;
        }
        case SymbolKind::Buffer: {
          const ir::Buffer& b = program_->buffers[sym->index];
          if (!b.is_scalar()) {
            diags_.error(in_condition_ ? DiagCode::E0406 : DiagCode::E0109, e.loc,
                         "`" + name + "` is an array buffer; expressions read params and device "
                                      "scalars (buffers without a size)");
            return std::nullopt;
          }
          if (ctx != ExprContext::Device) {
            if (ctx == ExprContext::Host)
              diags_.error(DiagCode::E0108, e.loc,
                           "`" + name + "` is a device scalar, read on the GPU, but this value is "
                                        "computed on the host" +
                               (in_value_arg_ ? "; pass it to an `in` parameter" : ""));
            else
              diags_.error(DiagCode::E0115, e.loc, "`" + name + "` is a device scalar; this must be known "
                                                        "on the host");
            return std::nullopt;
          }
          // Mapped host memory is readable from the GPU, so a host scalar works too.
          ir::Expr out = make(ir::ExprKind::DeviceScalar, e.loc);
          out.ref = sym->index;
          out.type = b.elem;
          return out;
        }
        case SymbolKind::Kernel:
        case SymbolKind::Graph:
        case SymbolKind::Comm:
          diags_.error(DiagCode::E0109, e.loc,
                       "`" + name + "` is " +
                           (sym->kind == SymbolKind::Kernel ? "a kernel"
                            : sym->kind == SymbolKind::Graph ? "a graph"
                                                             : "a comm") +
                           ", not a value");
          return std::nullopt;
      }
      return std::nullopt;  // every SymbolKind returned above
    }
    case ast::ExprKind::Unary: {
      auto operand = expr(*e.operands[0], ctx, body);
      if (!operand) return std::nullopt;
      if (expr::is_unary_plus(e.text)) return operand;
      std::optional<expr::Op> op = expr::unary_op(e.text);
      if (!op) {
        diags_.error(DiagCode::E0109, e.name_loc.valid() ? e.name_loc : e.loc, "unknown operator `" + e.text + "`");
        return std::nullopt;
      }
      if (*op == expr::Op::Neg && operand->kind == ir::ExprKind::Const && operand->is_literal) {
        // -literal is a literal, so -2147483648 is an i32 and -9223372036854775808 an i64.
        ir::Value v = operand->value;
        if (v.is_float()) {
          v = ir::Value::of_double(ir::ScalarType::F64, -v.f64());
        } else if (v.negative()) {
          const uint64_t m = v.magnitude();
          v = m > static_cast<uint64_t>(INT64_MAX) ? ir::Value::of_uint(ir::ScalarType::U64, m)
                                                   : ir::Value::of_int(ir::ScalarType::I64, static_cast<int64_t>(m));
        } else if (v.magnitude() > (uint64_t(1) << 63)) {
          diags_.error(DiagCode::E0002, e.loc, "integer literal -" + v.to_string() + " does not fit in 64 bits");
          return std::nullopt;
        } else {
          v = ir::Value::of_int(ir::ScalarType::I64, static_cast<int64_t>(0 - v.magnitude()));
        }
        operand->value = v;
        operand->type = v.type;
        operand->loc = e.loc;
        return operand;
      }
      expr::Typing t = expr::type_unary(*op, operand_of(*operand));
      if (!t.error.empty()) {
        diags_.error(DiagCode::E0109, e.name_loc.valid() ? e.name_loc : e.loc, t.error);
        return std::nullopt;
      }
      if (t.settle[0] && !settle(*operand, *t.settle[0])) return std::nullopt;
      ir::Expr out = make(ir::ExprKind::Unary, e.loc);
      out.op_loc = e.name_loc;
      out.op = *op;
      out.type = t.result.type;
      out.is_literal = t.result.literal != expr::Literal::None;
      out.operands.push_back(std::move(*operand));
      return out;
    }
    case ast::ExprKind::Binary:
    case ast::ExprKind::Call: {
      const bool call = e.kind == ast::ExprKind::Call;
      std::optional<expr::Op> op = call ? expr::call_op(e.text) : expr::binary_op(e.text);
      if (call && e.text == "dim3") {
        diags_.error(DiagCode::E0109, e.loc, "`dim3(...)` is a launch shape; it can only be a grid or a block");
        return std::nullopt;
      }
      if (!op) {
        diags_.error(DiagCode::E0109, e.name_loc.valid() ? e.name_loc : e.loc,
                     call ? "unknown function `" + e.text + "`; expressions may call min, max and ceil_div"
                          : "unknown operator `" + e.text + "`");
        return std::nullopt;
      }
      if (call && e.operands.size() != 2) {
        diags_.error(DiagCode::E0109, e.loc,
                     "`" + e.text + "` takes 2 arguments, not " + std::to_string(e.operands.size()));
        return std::nullopt;
      }
      auto lhs = expr(*e.operands[0], ctx, body);
      auto rhs = expr(*e.operands[1], ctx, body);
      if (!lhs || !rhs) return std::nullopt;
      expr::Typing t = expr::type_binary(*op, operand_of(*lhs), operand_of(*rhs));
      const SourceRange& place = e.name_loc.valid() ? e.name_loc : e.loc;
      if (!t.error.empty()) {
        diags_.error(DiagCode::E0109, call ? e.loc : place, t.error);
        return std::nullopt;
      }
      bool ok = !t.settle[0] || settle(*lhs, *t.settle[0]);
      ok = (!t.settle[1] || settle(*rhs, *t.settle[1])) && ok;
      if (!ok) return std::nullopt;
      ir::Expr out = make(call ? ir::ExprKind::Call : ir::ExprKind::Binary, e.loc);
      out.op_loc = place;
      out.op = *op;
      out.type = t.result.type;
      out.is_literal = t.result.literal != expr::Literal::None;
      out.operands.push_back(std::move(*lhs));
      out.operands.push_back(std::move(*rhs));
      return out;
    }
  }
  return std::nullopt;
}

expr::Evaluation Checker::evaluation(const ir::Expr& e, std::optional<uint32_t> member,
                                     std::vector<const ir::Expr*>* origins) {
  std::vector<expr::Instr> code = ir::to_postfix(e, origins);
  return expr::evaluate(code, [&](const expr::Instr& in) -> std::optional<ir::Value> {
    switch (in.kind) {
      case expr::InstrKind::Param: {
        if (in.ref < 0 || static_cast<size_t>(in.ref) >= param_broken_.size() || param_broken_[in.ref])
          return std::nullopt;
        return program_->params[in.ref].default_evaluated;
      }
      case expr::InstrKind::FamilyIndex:
        if (member) return ir::Value::of_uint(ir::ScalarType::U32, *member);
        return std::nullopt;
      case expr::InstrKind::Const:
      case expr::InstrKind::Operator:
      case expr::InstrKind::DeviceScalar:
      case expr::InstrKind::Rank:
      case expr::InstrKind::WorldSize: break;  // unknown on the host (Const and Operator never reach here)
    }
    return std::nullopt;
  });
}

std::optional<ir::Value> Checker::evaluate(const ir::Expr& e, std::optional<uint32_t> member) {
  expr::Evaluation v = evaluation(e, member, nullptr);
  if (!v.known()) return std::nullopt;
  return v.value;
}

expr::Evaluation Checker::finish(ir::Expr& e, std::optional<ir::ScalarType> expected,
                                 DiagCode code) {
  if (e.is_literal) {
    const expr::Literal kind = ir::is_float(e.type) ? expr::Literal::Float : expr::Literal::Int;
    const ir::ScalarType t = expected ? expr::settle_type(kind, *expected) : e.type;
    if (e.kind == ir::ExprKind::Const && !expr::settle_literal(e.value, t).ok()) {
      // A lone literal that its use cannot hold: the use site's conversion says why, with the
      // use site's code ("default of param `x` does not fit its type: ...").
      expr::Evaluation v;
      v.value = e.value;
      v.type = e.type;
      return v;
    }
    if (!settle(e, t)) {
      expr::Evaluation failed;
      failed.state = expr::Evaluation::State::Failed;
      return failed;
    }
  }
  std::vector<const ir::Expr*> origins;
  expr::Evaluation v = evaluation(e, std::nullopt, &origins);
  if (v.failed()) {
    const ir::Expr* at = v.at < origins.size() ? origins[v.at] : &e;
    // An error that happens whatever the params are is E0109; one of the defaults, the code of
    // the check being proven, with the defaults named.
    std::vector<expr::Instr> code_without = ir::to_postfix(e);
    expr::Evaluation constant =
        expr::evaluate(code_without, [](const expr::Instr&) { return std::optional<ir::Value>(); });
    if (constant.failed() || !ir::depends_on_host_values(e))
      diags_.error(DiagCode::E0109, op_place(*at), constant.failed() ? constant.message : v.message);
    else
      diags_.error(code, op_place(*at), v.message + default_values_note(e));
  }
  return v;
}

std::optional<uint64_t> Checker::constant_uint(const ast::Expr& e, const std::string& what) {
  auto x = expr(e, ExprContext::Constant, nullptr);
  if (!x) return std::nullopt;
  expr::Evaluation v = finish(*x, ir::ScalarType::U64, DiagCode::E0115);
  if (!v.known()) return std::nullopt;
  expr::Outcome n = expr::convert(v.value, ir::ScalarType::U64);
  if (!n.ok()) {
    diags_.error(DiagCode::E0115, e.loc, what + " must be a non-negative integer: " + n.message);
    return std::nullopt;
  }
  return n.value.u64();
}

std::string Checker::default_values_note(const ir::Expr& e) {
  std::set<int> params;
  std::vector<const ir::Expr*> stack{&e};
  while (!stack.empty()) {
    const ir::Expr* x = stack.back();
    stack.pop_back();
    if (x->kind == ir::ExprKind::Param) params.insert(x->ref);
    for (const ir::Expr& o : x->operands) stack.push_back(&o);
  }
  std::string out;
  for (int p : params) {
    const ir::Param& param = program_->params[p];
    if (!param.default_evaluated) continue;
    out += (out.empty() ? "" : ", ") + param.name + " = " + param.default_evaluated->to_string();
  }
  return out.empty() ? "" : " (with the default values " + out + ")";
}

ir::Expr make_binary(expr::Op op, ir::Expr a, ir::Expr b) {
  expr::Typing t = expr::type_binary(op, operand_of(a), operand_of(b));
  for (int i = 0; i < 2; ++i) {
    ir::Expr& x = i == 0 ? a : b;
    if (t.settle[i] && x.kind == ir::ExprKind::Const && x.is_literal) {
      expr::Outcome o = expr::settle_literal(x.value, *t.settle[i]);
      if (o.ok()) x = ir::constant(o.value, x.loc);
    }
  }
  ir::Expr e = make(expr::form(op) == expr::OpForm::Call ? ir::ExprKind::Call : ir::ExprKind::Binary, a.loc);
  e.op = op;
  e.type = t.error.empty() ? t.result.type : ir::ScalarType::I64;
  e.operands.push_back(std::move(a));
  e.operands.push_back(std::move(b));
  return e;
}

}  // namespace orch::detail
