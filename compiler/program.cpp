#include "compiler/program.h"

#include "grammar/ast.h"
#include "support/overloaded.h"

namespace orch::ir {

// The checker copies these enums from the AST's, value for value.
const char* to_string(LaunchMode m) { return ast::to_string(static_cast<ast::LaunchMode>(m)); }
const char* to_string(Access a) { return ast::to_string(static_cast<ast::Access>(a)); }

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::Kernel: return "kernel";
    case NodeKind::Copy: return "copy";
    case NodeKind::Fill: return "fill";
    case NodeKind::ScalarUpdate: return "scalar_update";
    case NodeKind::If: return "if";
    case NodeKind::While: return "while";
    case NodeKind::Switch: return "switch";
    case NodeKind::LaunchGraph: return "launch";
    case NodeKind::Collective: return "collective";
    case NodeKind::Shmem: return "nvshmem";
  }
  return "?";
}

const char* to_string(ShmemOp op) {
  switch (op) {
    case ShmemOp::Put: return "put";
    case ShmemOp::Get: return "get";
    case ShmemOp::Signal: return "signal";
    case ShmemOp::Wait: return "wait";
    case ShmemOp::Quiet: return "quiet";
    case ShmemOp::Barrier: return "barrier";
  }
  return "?";
}

const char* to_string(WaitCmp c) {
  switch (c) {
    case WaitCmp::Eq: return "==";
    case WaitCmp::Ne: return "!=";
    case WaitCmp::Gt: return ">";
    case WaitCmp::Le: return "<=";
    case WaitCmp::Lt: return "<";
    case WaitCmp::Ge: return ">=";
  }
  return "?";
}

const ConditionalParts* conditional(const Node& n) {
  return std::visit(overloaded{[](const IfNode& c) -> const ConditionalParts* { return &c; },
                               [](const WhileNode& c) -> const ConditionalParts* { return &c; },
                               [](const SwitchNode& c) -> const ConditionalParts* { return &c; },
                               [](const KernelNode&) -> const ConditionalParts* { return nullptr; },
                               [](const CopyNode&) -> const ConditionalParts* { return nullptr; },
                               [](const FillNode&) -> const ConditionalParts* { return nullptr; },
                               [](const ScalarUpdateNode&) -> const ConditionalParts* { return nullptr; },
                               [](const LaunchGraphNode&) -> const ConditionalParts* { return nullptr; },
                               [](const CollectiveNode&) -> const ConditionalParts* { return nullptr; },
                               [](const ShmemNode&) -> const ConditionalParts* { return nullptr; }},
                    n.op);
}

ConditionalParts* conditional(Node& n) {
  return const_cast<ConditionalParts*>(conditional(static_cast<const Node&>(n)));
}

Bodies<const Region> bodies(const Node& n) {
  const ConditionalParts* c = conditional(n);
  if (!c) return {};
  return {c->bodies.data(), c->bodies.data() + c->bodies.size()};
}

Bodies<Region> bodies(Node& n) {
  ConditionalParts* c = conditional(n);
  if (!c) return {};
  return {c->bodies.data(), c->bodies.data() + c->bodies.size()};
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "allreduce";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::AllGather: return "allgather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::None: return "";
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg})
    if (name == to_string(op)) return op;
  return std::nullopt;
}

const char* to_string(DepKind k) {
  switch (k) {
    case DepKind::RAW: return "raw";
    case DepKind::WAR: return "war";
    case DepKind::WAW: return "waw";
    case DepKind::Condition: return "condition";
  }
  return "?";
}

bool reads_device(const Expr& e) {
  if (e.kind == ExprKind::DeviceScalar) return true;
  for (const Expr& o : e.operands)
    if (reads_device(o)) return true;
  return false;
}

bool depends_on_host_values(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Param:
    case ExprKind::Rank:
    case ExprKind::WorldSize:
    case ExprKind::FamilyIndex: return true;
    case ExprKind::Const:
    case ExprKind::DeviceScalar:
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::Call: break;
  }
  for (const Expr& o : e.operands)
    if (depends_on_host_values(o)) return true;
  return false;
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.ref != b.ref || a.operands.size() != b.operands.size()) return false;
  if ((a.kind == ExprKind::Unary || a.kind == ExprKind::Binary || a.kind == ExprKind::Call) && a.op != b.op)
    return false;
  if (a.kind == ExprKind::Const && a.value != b.value) return false;
  for (size_t i = 0; i < a.operands.size(); ++i)
    if (!same_expr(a.operands[i], b.operands[i])) return false;
  return true;
}

Expr constant(Value v, SourceRange loc) {
  Expr e;
  e.kind = ExprKind::Const;
  e.type = v.type;
  e.value = v;
  e.loc = loc;
  return e;
}

Expr operation(expr::Op op, Expr a, Expr b) {
  Expr e;
  e.kind = expr::form(op) == expr::OpForm::Call ? ExprKind::Call : ExprKind::Binary;
  e.op = op;
  e.type = expr::result_type(op, a.type, b.type).value_or(ScalarType::I64);
  e.loc = a.loc;
  e.operands.push_back(std::move(a));
  e.operands.push_back(std::move(b));
  return e;
}

namespace {

void postfix(const Expr& e, std::vector<expr::Instr>& code, std::vector<const Expr*>* origins) {
  for (const Expr& o : e.operands) postfix(o, code, origins);
  expr::Instr in;
  in.type = e.type;
  switch (e.kind) {
    case ExprKind::Const:
      in.kind = expr::InstrKind::Const;
      in.value = e.value;
      break;
    case ExprKind::Param:
      in.kind = expr::InstrKind::Param;
      in.ref = e.ref;
      break;
    case ExprKind::DeviceScalar:
      in.kind = expr::InstrKind::DeviceScalar;
      in.ref = e.ref;
      break;
    case ExprKind::FamilyIndex: in.kind = expr::InstrKind::FamilyIndex; break;
    case ExprKind::Rank: in.kind = expr::InstrKind::Rank; break;
    case ExprKind::WorldSize: in.kind = expr::InstrKind::WorldSize; break;
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::Call:
      in.kind = expr::InstrKind::Operator;
      in.op = e.op;
      break;
  }
  code.push_back(in);
  if (origins) origins->push_back(&e);
}

}  // namespace

std::vector<expr::Instr> to_postfix(const Expr& e, std::vector<const Expr*>* origins) {
  std::vector<expr::Instr> code;
  postfix(e, code, origins);
  return code;
}

std::string to_string(const Expr& e, const Declarations& program) {
  std::vector<const Expr*> origins;
  std::vector<expr::Instr> code = to_postfix(e, &origins);
  return expr::to_source(code, [&](const expr::Instr& in, size_t pc) -> std::string {
    switch (in.kind) {
      case expr::InstrKind::Param: return program.params[in.ref].name;
      case expr::InstrKind::DeviceScalar: return program.buffers[in.ref].name;
      case expr::InstrKind::FamilyIndex: return origins[pc]->name;
      case expr::InstrKind::Rank: return "rank";
      case expr::InstrKind::WorldSize: return "world_size";
      case expr::InstrKind::Const:
      case expr::InstrKind::Operator: break;  // printed by to_source itself
    }
    return "?";
  });
}

}  // namespace orch::ir
