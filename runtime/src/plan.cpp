#include "runtime/src/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "artifact/artifact.h"
#include "artifact/expr_code.h"

namespace orch::rt {

namespace {

std::string name_of(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

}  // namespace

const char* scalar_type_name(fb::ScalarType t) { return expr::to_string(artifact::to_expr(t)); }

std::string evaluate(const fb::ExprInstr* code, size_t length, const EvalEnv& env, Value* out) {
  if (length == 0 || code == nullptr) return "empty expression";
  // Most expressions (launch shapes, arguments) are one constant or one param: their value,
  // with the checks the evaluator makes of such a leaf, and nothing allocated. This runs for
  // every kernel node at instantiate and at every set_param.
  if (length == 1) {
    const expr::Instr in = artifact::to_expr(code[0]);
    if (in.kind == expr::InstrKind::Const && expr::verify(&in, 1).empty()) {
      *out = in.value;
      return {};
    }
    if (in.kind == expr::InstrKind::Param && env.params && in.ref >= 0 &&
        static_cast<size_t>(in.ref) < env.params->size() && (*env.params)[in.ref].type == in.type &&
        expr::valid(in.type)) {
      *out = (*env.params)[in.ref];
      return {};
    }
  }
  // In place for short code (no allocation), else on the heap.
  constexpr size_t kInPlace = 16;
  expr::Instr in_place[kInPlace];
  std::vector<expr::Instr> on_heap;
  expr::Instr* instrs = in_place;
  if (length > kInPlace) {
    on_heap.resize(length);
    instrs = on_heap.data();
  }
  for (size_t i = 0; i < length; ++i) instrs[i] = artifact::to_expr(code[i]);
  struct Leaves {
    const EvalEnv* env;
    bool outside_family = false;
    bool bad_param = false;
    int32_t missing_param = -1;
  } leaves{&env};
  // One pointer captured, so the std::function holds it in place.
  Leaves* l = &leaves;
  expr::Evaluation v = expr::evaluate(instrs, length, [l](const expr::Instr& in) -> std::optional<Value> {
    const EvalEnv& e = *l->env;
    switch (in.kind) {
      case expr::InstrKind::Param:
        if (!e.params || in.ref < 0 || static_cast<size_t>(in.ref) >= e.params->size()) {
          l->bad_param = true;
          l->missing_param = in.ref;
          return std::nullopt;
        }
        return (*e.params)[in.ref];
      case expr::InstrKind::FamilyIndex:
        if (e.family_index < 0) {
          l->outside_family = true;
          return std::nullopt;
        }
        return Value::of_uint(expr::ScalarType::U32, static_cast<uint64_t>(e.family_index));
      case expr::InstrKind::Rank: return Value::of_uint(expr::ScalarType::U32, static_cast<uint64_t>(e.rank));
      case expr::InstrKind::WorldSize:
        return Value::of_uint(expr::ScalarType::U32, static_cast<uint64_t>(e.world_size));
      default: return std::nullopt;
    }
  });
  if (v.failed()) return v.message;
  if (!v.known()) {
    if (leaves.bad_param) return "param index " + std::to_string(leaves.missing_param) + " is out of range";
    return leaves.outside_family ? "family index used outside a graph family" : "an operand is not known";
  }
  *out = v.value;
  return {};
}

std::string evaluate(const fb::Expr* expr, const EvalEnv& env, Value* out) {
  if (expr == nullptr || expr->code() == nullptr) return "missing expression";
  return evaluate(reinterpret_cast<const fb::ExprInstr*>(expr->code()->Data()), expr->code()->size(), env, out);
}

std::string encode_scalar(const Value& v, fb::ScalarType type, uint64_t* bits) {
  expr::Outcome c = expr::convert(v, artifact::to_expr(type));
  if (!c.ok()) return c.message;
  *bits = c.value.storage();
  return {};
}

std::string convert_binding(const ScalarValue& v, fb::ScalarType type, Value* out) {
  if (!expr::valid(artifact::to_expr(type))) return "has an unknown type";
  // A ScalarValue made by hand (or of memory gone bad) with a kind outside the three.
  if (v.kind != ScalarValue::Kind::Int && v.kind != ScalarValue::Kind::Uint && v.kind != ScalarValue::Kind::Float)
    return "is given a ScalarValue of unknown kind " + std::to_string(static_cast<unsigned>(v.kind)) +
           " (ScalarValue::of makes valid ones)";
  const Value in = v.kind == ScalarValue::Kind::Float ? Value::of_double(expr::ScalarType::F64, v.f)
                   : v.kind == ScalarValue::Kind::Int ? Value::of_int(expr::ScalarType::I64, v.i)
                                                      : Value::of_uint(expr::ScalarType::U64, v.u);
  expr::Outcome c = expr::convert(in, artifact::to_expr(type));
  if (!c.ok()) return c.message;
  *out = c.value;
  return {};
}

std::string where(const fb::Pipeline& p, const fb::SourceLoc* loc) {
  if (loc == nullptr || loc->line() == 0) return {};
  std::string file = "<unknown>";
  if (p.source_files() && loc->file() < p.source_files()->size()) file = name_of(p.source_files()->Get(loc->file()));
  return file + ":" + std::to_string(loc->line()) + ":" + std::to_string(loc->column());
}

namespace {

const fb::Op* find_collective(const fb::Pipeline& p, const fb::Graph* g, int depth) {
  if (!g->nodes() || depth > 80) return nullptr;
  for (const fb::Node* at : *g->nodes()) {
    const fb::Op* n = p.ops()->Get(at->op());
    if (artifact::op_kind(*n) == artifact::NodeKind::Collective) return n;
    if (const auto* nested = artifact::nested_graphs(*n))
      for (const fb::Graph* b : *nested)
        if (const fb::Op* c = find_collective(p, b, depth + 1)) return c;
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

bool depends_on(const fb::Graph& g, uint32_t node, uint32_t target) {
  const auto* nodes = g.nodes();
  const auto* deps = g.deps();
  if (!nodes || !deps || node >= nodes->size() || target >= node) return false;
  // Dependencies point at earlier nodes, so a path to `target` only passes nodes after it.
  std::vector<bool> seen(node - target, false);
  std::vector<uint32_t> stack{node};
  while (!stack.empty()) {
    const uint32_t at = stack.back();
    stack.pop_back();
    const uint32_t begin = at == 0 ? 0 : nodes->Get(at - 1)->deps_end();
    const uint32_t end = std::min<uint32_t>(nodes->Get(at)->deps_end(), deps->size());
    for (uint32_t j = begin; j < end; ++j) {
      const uint32_t from = deps->Get(j);
      if (from == target) return true;
      if (from < target || from >= at || seen[from - target]) continue;
      seen[from - target] = true;
      stack.push_back(from);
    }
  }
  return false;
}

const fb::Op* find_collective(const fb::Pipeline& p) {
  if (!p.graphs()) return nullptr;
  for (const fb::Graph* g : *p.graphs())
    if (const fb::Op* c = find_collective(p, g, 0)) return c;
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
      plan.params[i] = artifact::default_of(*q);
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
      if (v.is_float() || v.negative() || v.magnitude() == 0)
        return Error(ErrorCode::InvalidValue, "buffer '" + bn + "' would have " + v.to_string() + " elements (" +
                                                  artifact::expr_to_string(b->count(), p) + ")",
                     where(p, b->loc()));
      s.count = v.magnitude();
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
    if (b->symmetric())
      return Error(ErrorCode::InvalidArgument,
                   "buffer '" + bb.name +
                       "' is symmetric: the runtime allocates it on NVSHMEM's symmetric heap, on every PE at once, "
                       "so it cannot be bound (read it with Executable::buffer)",
                   where(p, b->loc()));
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

bool uses_nvshmem(const fb::Pipeline& p) {
  if (p.nvshmem_version()) return true;
  const uint32_t n = p.buffers() ? p.buffers()->size() : 0;
  for (uint32_t i = 0; i < n; ++i)
    if (p.buffers()->Get(i)->symmetric()) return true;
  return false;
}

uint64_t symmetric_sizes_hash(const fb::Pipeline& p, const Plan& plan) {
  // FNV-1a over (index, bytes) of each symmetric buffer: equal on ranks whose sizes agree.
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](uint64_t v) {
    for (int k = 0; k < 8; ++k) {
      h ^= (v >> (8 * k)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  const uint32_t n = p.buffers() ? p.buffers()->size() : 0;
  for (uint32_t i = 0; i < n && i < plan.buffers.size(); ++i) {
    if (!p.buffers()->Get(i)->symmetric()) continue;
    add(i);
    add(plan.buffers[i].bytes);
  }
  return h;
}

}  // namespace orch::rt
