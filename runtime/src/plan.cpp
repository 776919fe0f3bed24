#include "runtime/src/plan.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "artifact/artifact.h"
#include "artifact/scalar_bits.h"

namespace orch::rt {

namespace {

std::string name_of(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

bool is_float_type(fb::ScalarType t) {
  return t == fb::ScalarType::F16 || t == fb::ScalarType::BF16 || t == fb::ScalarType::F32 ||
         t == fb::ScalarType::F64;
}

using artifact::bfloat_bits;
using artifact::float_bits;
using artifact::half_bits;

// Range of each integer type as [lo, hi] in int64 (u64's top half is out of reach of Value).
bool int_range(fb::ScalarType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case fb::ScalarType::U8: *lo = 0; *hi = 0xff; return true;
    case fb::ScalarType::U16: *lo = 0; *hi = 0xffff; return true;
    case fb::ScalarType::U32: *lo = 0; *hi = 0xffffffffll; return true;
    case fb::ScalarType::U64: *lo = 0; *hi = std::numeric_limits<int64_t>::max(); return true;
    case fb::ScalarType::I8: *lo = -128; *hi = 127; return true;
    case fb::ScalarType::I16: *lo = -32768; *hi = 32767; return true;
    case fb::ScalarType::I32: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); return true;
    case fb::ScalarType::I64: *lo = std::numeric_limits<int64_t>::min(); *hi = std::numeric_limits<int64_t>::max(); return true;
    case fb::ScalarType::Bool: *lo = 0; *hi = 1; return true;
    default: return false;
  }
}

std::string show(const Value& v) {
  if (!v.is_float) return std::to_string(v.i);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v.f);
  return buf;
}

const char* op_name(fb::ExprOp op) {
  const char* n = fb::EnumNameExprOp(op);
  return n && *n ? n : "?";
}

}  // namespace

const char* scalar_type_name(fb::ScalarType t) {
  static const char* const names[] = {"u8",  "u16", "u32",  "u64", "i8",  "i16", "i32",
                                      "i64", "f16", "bf16", "f32", "f64", "bool"};
  unsigned i = static_cast<unsigned>(t);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

std::string evaluate(const fb::ExprInstr* code, size_t length, const EvalEnv& env, Value* out) {
  if (length == 0 || code == nullptr) return "empty expression";
  // Small expressions stay on the stack; the validator caps length at 4096.
  std::vector<Value> stack;
  stack.reserve(16);
  auto pop = [&](Value* v) {
    if (stack.empty()) return false;
    *v = stack.back();
    stack.pop_back();
    return true;
  };
  for (size_t pc = 0; pc < length; ++pc) {
    const fb::ExprInstr& in = code[pc];
    const fb::ExprOp op = in.op();
    switch (op) {
      case fb::ExprOp::ConstInt: stack.push_back(Value::integer(in.i())); continue;
      case fb::ExprOp::ConstFloat: stack.push_back(Value::real(in.f())); continue;
      case fb::ExprOp::Param: {
        if (!env.params || in.ref() < 0 || static_cast<size_t>(in.ref()) >= env.params->size())
          return "param index " + std::to_string(in.ref()) + " is out of range";
        stack.push_back((*env.params)[in.ref()]);
        continue;
      }
      case fb::ExprOp::FamilyIndex:
        if (env.family_index < 0) return "family index used outside a graph family";
        stack.push_back(Value::integer(env.family_index));
        continue;
      case fb::ExprOp::Rank: stack.push_back(Value::integer(env.rank)); continue;
      case fb::ExprOp::WorldSize: stack.push_back(Value::integer(env.world_size)); continue;
      case fb::ExprOp::Neg:
      case fb::ExprOp::Not:
      case fb::ExprOp::BitNot: {
        Value a;
        if (!pop(&a)) return std::string("stack underflow at ") + op_name(op);
        if (op == fb::ExprOp::Not) {
          stack.push_back(Value::integer(a.truthy() ? 0 : 1));
        } else if (op == fb::ExprOp::BitNot) {
          if (a.is_float) return "`~` needs an integer operand, got " + show(a);
          stack.push_back(Value::integer(~a.i));
        } else if (a.is_float) {
          stack.push_back(Value::real(-a.f));
        } else {
          if (a.i == std::numeric_limits<int64_t>::min()) return "integer overflow in -(" + show(a) + ")";
          stack.push_back(Value::integer(-a.i));
        }
        continue;
      }
      default: break;
    }
    if (static_cast<unsigned>(op) > static_cast<unsigned>(fb::ExprOp::MAX))
      return "unknown expression op " + std::to_string(static_cast<unsigned>(op));
    Value a, b;
    if (!pop(&b) || !pop(&a)) return std::string("stack underflow at ") + op_name(op);
    const bool fl = a.is_float || b.is_float;
    const std::string operands = show(a) + ", " + show(b);
    switch (op) {
      case fb::ExprOp::And: stack.push_back(Value::integer(a.truthy() && b.truthy())); continue;
      case fb::ExprOp::Or: stack.push_back(Value::integer(a.truthy() || b.truthy())); continue;
      case fb::ExprOp::Lt: stack.push_back(Value::integer(fl ? a.as_double() < b.as_double() : a.i < b.i)); continue;
      case fb::ExprOp::Le: stack.push_back(Value::integer(fl ? a.as_double() <= b.as_double() : a.i <= b.i)); continue;
      case fb::ExprOp::Gt: stack.push_back(Value::integer(fl ? a.as_double() > b.as_double() : a.i > b.i)); continue;
      case fb::ExprOp::Ge: stack.push_back(Value::integer(fl ? a.as_double() >= b.as_double() : a.i >= b.i)); continue;
      case fb::ExprOp::Eq: stack.push_back(Value::integer(fl ? a.as_double() == b.as_double() : a.i == b.i)); continue;
      case fb::ExprOp::Ne: stack.push_back(Value::integer(fl ? a.as_double() != b.as_double() : a.i != b.i)); continue;
      case fb::ExprOp::Min:
        stack.push_back(fl ? Value::real(std::fmin(a.as_double(), b.as_double())) : Value::integer(a.i < b.i ? a.i : b.i));
        continue;
      case fb::ExprOp::Max:
        stack.push_back(fl ? Value::real(std::fmax(a.as_double(), b.as_double())) : Value::integer(a.i < b.i ? b.i : a.i));
        continue;
      default: break;
    }
    if (fl) {
      const double x = a.as_double(), y = b.as_double();
      switch (op) {
        case fb::ExprOp::Add: stack.push_back(Value::real(x + y)); continue;
        case fb::ExprOp::Sub: stack.push_back(Value::real(x - y)); continue;
        case fb::ExprOp::Mul: stack.push_back(Value::real(x * y)); continue;
        case fb::ExprOp::Div:
          if (y == 0) return "division by zero (" + operands + ")";
          stack.push_back(Value::real(x / y));
          continue;
        default:
          return std::string("`") + op_name(op) + "` needs integer operands, got " + operands;
      }
    }
    const int64_t x = a.i, y = b.i;
    int64_t r = 0;
    switch (op) {
      case fb::ExprOp::Add:
        if (__builtin_add_overflow(x, y, &r)) return "integer overflow in " + show(a) + " + " + show(b);
        break;
      case fb::ExprOp::Sub:
        if (__builtin_sub_overflow(x, y, &r)) return "integer overflow in " + show(a) + " - " + show(b);
        break;
      case fb::ExprOp::Mul:
        if (__builtin_mul_overflow(x, y, &r)) return "integer overflow in " + show(a) + " * " + show(b);
        break;
      case fb::ExprOp::Div:
      case fb::ExprOp::Mod:
      case fb::ExprOp::CeilDiv:
        if (y == 0) return std::string("division by zero in ") + op_name(op) + "(" + operands + ")";
        if (x == std::numeric_limits<int64_t>::min() && y == -1)
          return std::string("integer overflow in ") + op_name(op) + "(" + operands + ")";
        if (op == fb::ExprOp::Div) r = x / y;
        else if (op == fb::ExprOp::Mod) r = x % y;
        else {
          r = x / y;
          if (x % y != 0 && ((x < 0) == (y < 0))) ++r;
        }
        break;
      case fb::ExprOp::Shl:
      case fb::ExprOp::Shr:
        if (y < 0 || y > 63) return "shift count " + std::to_string(y) + " is outside 0..63";
        if (op == fb::ExprOp::Shr) {
          r = x >> y;
        } else {
          r = static_cast<int64_t>(static_cast<uint64_t>(x) << y);
          if ((r >> y) != x) return "integer overflow in " + show(a) + " << " + show(b);
        }
        break;
      case fb::ExprOp::BitAnd: r = x & y; break;
      case fb::ExprOp::BitXor: r = x ^ y; break;
      case fb::ExprOp::BitOr: r = x | y; break;
      default: return std::string("unknown expression op ") + op_name(op);
    }
    stack.push_back(Value::integer(r));
  }
  if (stack.size() != 1) return "malformed expression leaves " + std::to_string(stack.size()) + " values";
  *out = stack.back();
  return {};
}

std::string evaluate(const fb::Expr* expr, const EvalEnv& env, Value* out) {
  if (expr == nullptr || expr->code() == nullptr) return "missing expression";
  return evaluate(reinterpret_cast<const fb::ExprInstr*>(expr->code()->Data()), expr->code()->size(), env, out);
}

std::string encode_scalar(const Value& v, fb::ScalarType type, bool truncate, uint64_t* bits) {
  const char* tn = scalar_type_name(type);
  switch (type) {
    case fb::ScalarType::F64: {
      double d = v.as_double();
      std::memcpy(bits, &d, 8);
      return {};
    }
    case fb::ScalarType::F32:
    case fb::ScalarType::F16:
    case fb::ScalarType::BF16: {
      double d = v.as_double();
      if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max())
        return show(v) + " does not fit " + tn;
      float f = static_cast<float>(d);
      *bits = type == fb::ScalarType::F32 ? float_bits(f) : type == fb::ScalarType::F16 ? half_bits(f) : bfloat_bits(f);
      return {};
    }
    default: break;
  }
  int64_t lo, hi;
  if (!int_range(type, &lo, &hi)) return "unknown scalar type " + std::to_string(static_cast<unsigned>(type));
  int64_t i;
  if (v.is_float) {
    if (!std::isfinite(v.f)) return show(v) + " does not fit " + tn;
    double t = std::trunc(v.f);
    if (!truncate && t != v.f) return show(v) + " is not an integer, and " + tn + " holds integers";
    if (t < -9.2233720368547758e18 || t >= 9.2233720368547758e18) return show(v) + " does not fit " + tn;
    i = static_cast<int64_t>(t);
  } else {
    i = v.i;
  }
  if (i < lo || i > hi) return std::to_string(i) + " does not fit " + tn;
  const size_t size = artifact::scalar_size(type);
  uint64_t u = static_cast<uint64_t>(i);
  *bits = size == 8 ? u : u & ((uint64_t(1) << (size * 8)) - 1);
  return {};
}

std::string convert_binding(const ScalarValue& v, fb::ScalarType type, Value* out) {
  const char* tn = scalar_type_name(type);
  if (is_float_type(type)) {
    double d = v.kind == ScalarValue::Kind::Float ? v.f
               : v.kind == ScalarValue::Kind::Int ? static_cast<double>(v.i)
                                                  : static_cast<double>(v.u);
    if (std::isfinite(d) && type != fb::ScalarType::F64 && std::fabs(d) > std::numeric_limits<float>::max())
      return "does not fit " + std::string(tn);
    if (type == fb::ScalarType::F32) d = static_cast<double>(static_cast<float>(d));
    *out = Value::real(d);
    return {};
  }
  int64_t lo, hi;
  if (!int_range(type, &lo, &hi)) return "has an unknown type";
  if (v.kind == ScalarValue::Kind::Uint) {
    // u64 values past INT64_MAX are kept as their two's complement bits.
    if (type == fb::ScalarType::U64) {
      *out = Value::integer(static_cast<int64_t>(v.u));
      return {};
    }
    if (v.u > static_cast<uint64_t>(hi)) return std::to_string(v.u) + " does not fit " + tn;
    *out = Value::integer(static_cast<int64_t>(v.u));
    return {};
  }
  Value in = v.kind == ScalarValue::Kind::Float ? Value::real(v.f) : Value::integer(v.i);
  uint64_t bits;
  std::string e = encode_scalar(in, type, /*truncate=*/false, &bits);
  if (!e.empty()) return e;
  if (in.is_float) in = Value::integer(static_cast<int64_t>(in.f));
  *out = in;
  return {};
}

std::string where(const fb::Pipeline& p, const fb::SourceLoc* loc) {
  if (loc == nullptr || loc->line() == 0) return {};
  std::string file = "<unknown>";
  if (p.source_files() && loc->file() < p.source_files()->size()) file = name_of(p.source_files()->Get(loc->file()));
  return file + ":" + std::to_string(loc->line()) + ":" + std::to_string(loc->column());
}

namespace {

const fb::Node* find_collective(const flatbuffers::Vector<flatbuffers::Offset<fb::Node>>* nodes, int depth) {
  if (!nodes || depth > 80) return nullptr;
  for (const fb::Node* n : *nodes) {
    if (n->kind() == fb::NodeKind::Collective) return n;
    if (n->bodies())
      for (const fb::Graph* b : *n->bodies())
        if (const fb::Node* c = find_collective(b->nodes(), depth + 1)) return c;
  }
  return nullptr;
}

template <class T>
std::string names_list(const flatbuffers::Vector<flatbuffers::Offset<T>>* v) {
  std::string out;
  if (v)
    for (const T* x : *v) out += (out.empty() ? "" : ", ") + name_of(x->name());
  return out.empty() ? "none" : out;
}

}  // namespace

const fb::Node* find_collective(const fb::Pipeline& p) {
  if (!p.graphs()) return nullptr;
  for (const fb::Graph* g : *p.graphs())
    if (const fb::Node* c = find_collective(g->nodes(), 0)) return c;
  return nullptr;
}

Result<Plan> make_plan(const fb::Pipeline& p, const Bindings& bindings) {
  Plan plan;
  const std::string pname = name_of(p.name());
  const uint32_t nparams = p.params() ? p.params()->size() : 0;
  const uint32_t nbuffers = p.buffers() ? p.buffers()->size() : 0;
  const uint32_t ncomms = p.comms() ? p.comms()->size() : 0;

  // Params: every bound name must exist; the last binding of a name wins.
  std::vector<const ScalarValue*> bound(nparams, nullptr);
  for (const Bindings::Param& b : bindings.params()) {
    uint32_t i = 0;
    for (; i < nparams; ++i)
      if (name_of(p.params()->Get(i)->name()) == b.name) break;
    if (i == nparams)
      return Error(ErrorCode::UnknownName, "pipeline '" + pname + "' has no param '" + b.name +
                                               "' (its params: " + names_list(p.params()) + ")");
    bound[i] = &b.value;
  }
  plan.params.resize(nparams);
  for (uint32_t i = 0; i < nparams; ++i) {
    const fb::Param* q = p.params()->Get(i);
    const std::string qn = name_of(q->name());
    if (bound[i]) {
      std::string e = convert_binding(*bound[i], q->type(), &plan.params[i]);
      if (!e.empty())
        return Error(ErrorCode::InvalidValue, "param '" + qn + "' (" + scalar_type_name(q->type()) + "): " + e,
                     where(p, q->loc()));
    } else if (q->has_default()) {
      plan.params[i] = is_float_type(q->type()) ? Value::real(q->default_f()) : Value::integer(q->default_i());
    } else {
      return Error(ErrorCode::Unbound,
                   "param '" + qn + "' (" + scalar_type_name(q->type()) + ") is not bound and has no default",
                   where(p, q->loc()));
    }
  }

  // Comms: all bound; rank and world_size come from the first one.
  std::vector<const Bindings::Comm*> comms(ncomms, nullptr);
  for (const Bindings::Comm& c : bindings.comms()) {
    uint32_t i = 0;
    for (; i < ncomms; ++i)
      if (name_of(p.comms()->Get(i)->name()) == c.name) break;
    if (i == ncomms)
      return Error(ErrorCode::UnknownName, "pipeline '" + pname + "' has no comm '" + c.name +
                                               "' (its comms: " + names_list(p.comms()) + ")");
    if (c.rank < 0 && c.world_size < 0)
      return Error(ErrorCode::InvalidValue, "comm '" + c.name +
                                                "' has no rank and world size yet (instantiate() reads them from the "
                                                "bound communicator)");
    if (c.world_size < 1 || c.rank < 0 || c.rank >= c.world_size)
      return Error(ErrorCode::InvalidValue, "comm '" + c.name + "': rank " + std::to_string(c.rank) +
                                                " is not within world size " + std::to_string(c.world_size));
    comms[i] = &c;
  }
  for (uint32_t i = 0; i < ncomms; ++i)
    if (!comms[i])
      return Error(ErrorCode::Unbound, "comm '" + name_of(p.comms()->Get(i)->name()) +
                                           "' is not bound (Bindings::comm gives the NCCL communicator, rank and world size)");
  if (ncomms > 0) {
    plan.rank = comms[0]->rank;
    plan.world_size = comms[0]->world_size;
  }

  // Bind checks, in file order; the first false one is the error. A check that uses a family's
  // index holds for every member.
  const EvalEnv env = plan.env();
  if (p.bind_checks()) {
    for (const fb::BindCheck* c : *p.bind_checks()) {
      const uint32_t members = c->family_size();
      for (uint32_t m = 0; m < (members > 0 ? members : 1); ++m) {
        const std::string member = members > 0 ? " (family member " + std::to_string(m) + ")" : "";
        Value v;
        std::string e = evaluate(c->condition(), members > 0 ? plan.env(m) : env, &v);
        if (!e.empty())
          return Error(ErrorCode::InvalidValue,
                       name_of(c->code()) + ": cannot evaluate a bind check (" + e + "): " + name_of(c->message()) +
                           member,
                       where(p, c->loc()));
        if (!v.truthy())
          return Error(ErrorCode::BindCheckFailed, name_of(c->code()) + ": " + name_of(c->message()) + member,
                       where(p, c->loc()));
      }
    }
  }

  // Buffer sizes.
  plan.buffers.resize(nbuffers);
  for (uint32_t i = 0; i < nbuffers; ++i) {
    const fb::Buffer* b = p.buffers()->Get(i);
    const std::string bn = name_of(b->name());
    const size_t elem = artifact::scalar_size(b->type());
    BufferSize& s = plan.buffers[i];
    if (b->count()) {
      Value v;
      std::string e = evaluate(b->count(), env, &v);
      if (!e.empty())
        return Error(ErrorCode::InvalidValue, "buffer '" + bn + "': cannot evaluate its size " +
                                                  artifact::expr_to_string(b->count(), p) + ": " + e,
                     where(p, b->loc()));
      if (v.is_float || v.i <= 0)
        return Error(ErrorCode::InvalidValue, "buffer '" + bn + "' would have " + show(v) + " elements (" +
                                                  artifact::expr_to_string(b->count(), p) + ")",
                     where(p, b->loc()));
      s.count = static_cast<uint64_t>(v.i);
    }
    if (elem == 0 || s.count > std::numeric_limits<uint64_t>::max() / elem)
      return Error(ErrorCode::InvalidValue, "buffer '" + bn + "' is too large", where(p, b->loc()));
    s.bytes = s.count * elem;
  }

  // Bound buffers: known names, non-null, large enough.
  for (const Bindings::Buffer& bb : bindings.buffers()) {
    uint32_t i = 0;
    for (; i < nbuffers; ++i)
      if (name_of(p.buffers()->Get(i)->name()) == bb.name) break;
    if (i == nbuffers)
      return Error(ErrorCode::UnknownName, "pipeline '" + pname + "' has no buffer '" + bb.name +
                                               "' (its buffers: " + names_list(p.buffers()) + ")");
    const fb::Buffer* b = p.buffers()->Get(i);
    if (bb.ptr == nullptr)
      return Error(ErrorCode::InvalidArgument, "buffer '" + bb.name + "' is bound to a null pointer", where(p, b->loc()));
    if (bb.bytes < plan.buffers[i].bytes)
      return Error(ErrorCode::BufferTooSmall,
                   "buffer '" + bb.name + "' is bound to " + std::to_string(bb.bytes) + " bytes; it needs " +
                       std::to_string(plan.buffers[i].bytes) + " (" + std::to_string(plan.buffers[i].count) + " " +
                       scalar_type_name(b->type()) + " elements" +
                       (b->count() ? ", count " + artifact::expr_to_string(b->count(), p) : std::string()) + ")",
                   where(p, b->loc()));
  }
  return plan;
}

}  // namespace orch::rt
