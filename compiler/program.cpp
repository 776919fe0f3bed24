#include "compiler/program.h"

#include <sstream>

#include "grammar/ast.h"

namespace orch::ir {

namespace {
struct TypeInfo {
  ScalarType type;
  const char* name;
  uint32_t size;
  bool is_float;
  bool is_signed;
};
constexpr TypeInfo kTypes[] = {
    {ScalarType::U8, "u8", 1, false, false},     {ScalarType::U16, "u16", 2, false, false},
    {ScalarType::U32, "u32", 4, false, false},   {ScalarType::U64, "u64", 8, false, false},
    {ScalarType::I8, "i8", 1, false, true},      {ScalarType::I16, "i16", 2, false, true},
    {ScalarType::I32, "i32", 4, false, true},    {ScalarType::I64, "i64", 8, false, true},
    {ScalarType::F16, "f16", 2, true, true},     {ScalarType::BF16, "bf16", 2, true, true},
    {ScalarType::F32, "f32", 4, true, true},     {ScalarType::F64, "f64", 8, true, true},
    {ScalarType::Bool, "bool", 1, false, false},
};
const TypeInfo& info(ScalarType t) { return kTypes[static_cast<int>(t)]; }
}  // namespace

std::optional<ScalarType> parse_scalar_type(const std::string& name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return t.type;
  return std::nullopt;
}
const char* to_string(ScalarType t) { return info(t).name; }
uint32_t size_of(ScalarType t) { return info(t).size; }
bool is_float(ScalarType t) { return info(t).is_float; }
bool is_signed(ScalarType t) { return info(t).is_signed; }

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
    case NodeKind::SetCondition: return "set_condition";
  }
  return "?";
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
    default: break;
  }
  for (const Expr& o : e.operands)
    if (depends_on_host_values(o)) return true;
  return false;
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.ref != b.ref || a.op != b.op || a.value.is_float != b.value.is_float ||
      a.value.i != b.value.i || a.value.f != b.value.f || a.operands.size() != b.operands.size())
    return false;
  for (size_t i = 0; i < a.operands.size(); ++i)
    if (!same_expr(a.operands[i], b.operands[i])) return false;
  return true;
}

namespace {
int precedence(const std::string& op) {
  static const char* levels[][4] = {{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="},
                                    {"<", "<=", ">", ">="}, {"<<", ">>"}, {"+", "-"},
                                    {"*", "/", "%"}};
  for (int i = 0; i < 10; ++i)
    for (const char* o : levels[i])
      if (o && op == o) return i + 1;
  return 11;
}

void print(std::ostringstream& out, const Expr& e, const Program& p, int parent_prec) {
  switch (e.kind) {
    case ExprKind::Const:
      if (e.value.is_float) {
        std::ostringstream f;
        f << e.value.f;
        std::string s = f.str();
        if (s.find_first_of(".en") == std::string::npos) s += ".0";
        out << s;
      } else {
        out << e.value.i;
      }
      return;
    case ExprKind::Param: out << p.params[e.ref].name; return;
    case ExprKind::DeviceScalar: out << p.buffers[e.ref].name; return;
    case ExprKind::FamilyIndex: out << e.op; return;
    case ExprKind::Rank: out << "rank"; return;
    case ExprKind::WorldSize: out << "world_size"; return;
    case ExprKind::Unary:
      out << e.op;
      print(out, e.operands[0], p, 12);
      return;
    case ExprKind::Binary: {
      int prec = precedence(e.op);
      if (prec < parent_prec) out << "(";
      print(out, e.operands[0], p, prec);
      out << " " << e.op << " ";
      print(out, e.operands[1], p, prec + 1);
      if (prec < parent_prec) out << ")";
      return;
    }
    case ExprKind::Call:
      out << e.op << "(";
      for (size_t i = 0; i < e.operands.size(); ++i) {
        if (i) out << ", ";
        print(out, e.operands[i], p, 0);
      }
      out << ")";
      return;
  }
}
}  // namespace

std::string to_string(const Expr& e, const Program& program) {
  std::ostringstream out;
  print(out, e, program, 0);
  return out.str();
}

}  // namespace orch::ir
