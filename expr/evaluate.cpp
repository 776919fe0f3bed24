// The one evaluator of postfix code (the checker with defaults, the runtime with bound values).
#include <algorithm>
#include <vector>

#include "expr/expr.h"

namespace orch::expr {

namespace {

std::string where(size_t pc, const Instr& in) {
  const char* what = in.kind == InstrKind::Operator ? name(in.op)
                     : in.kind == InstrKind::Const  ? "Const"
                     : in.kind == InstrKind::Param  ? "Param"
                                                    : "leaf";
  return "instruction " + std::to_string(pc) + " (" + what + ")";
}

// verify()'s stack of types: in place up to 32 entries, on the heap past that, so verifying the
// short expressions that launch shapes and arguments are (validate() checks thousands per
// pipeline) allocates nothing.
class TypeStack {
 public:
  size_t size() const { return size_; }
  ScalarType back() const { return data_[size_ - 1]; }
  ScalarType operator[](size_t i) const { return data_[i]; }
  void resize(size_t n) { size_ = n; }  // verify() only shrinks it this way
  void push_back(ScalarType t) {
    if (size_ == capacity_) {
      std::vector<ScalarType> bigger(2 * capacity_);
      std::copy(data_, data_ + size_, bigger.begin());
      heap_.swap(bigger);
      data_ = heap_.data();
      capacity_ = heap_.size();
    }
    data_[size_++] = t;
  }

 private:
  static constexpr size_t kInPlace = 32;
  ScalarType in_place_[kInPlace];
  std::vector<ScalarType> heap_;
  ScalarType* data_ = in_place_;
  size_t size_ = 0, capacity_ = kInPlace;
};

}  // namespace

std::string verify(const Instr* code, size_t n) {
  if (code == nullptr || n == 0) return "empty expression";
  TypeStack stack;
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& in = code[pc];
    if (!valid(in.type)) return where(pc, in) + " has an unknown type";
    if (in.kind != InstrKind::Operator) {
      if (in.kind == InstrKind::Const) {
        if (in.value.type != in.type)
          return where(pc, in) + " holds a " + to_string(in.value.type) + " value but has type " + to_string(in.type);
        Outcome o = convert(in.value, in.type);
        if (!o.ok() || o.value != in.value) return where(pc, in) + " is not a value of " + to_string(in.type);
      }
      if (in.kind > InstrKind::Operator) return where(pc, in) + " has an unknown kind";
      stack.push_back(in.type);
      continue;
    }
    if (!is_valid(in.op)) return where(pc, in) + " has an unknown operator";
    const size_t k = static_cast<size_t>(arity(in.op));
    if (stack.size() < k) return where(pc, in) + " has too few operands";
    std::string why;
    std::optional<ScalarType> t = k == 1 ? result_type(in.op, stack.back(), &why)
                                         : result_type(in.op, stack[stack.size() - 2], stack.back(), &why);
    if (!t) return where(pc, in) + ": " + why;
    if (*t != in.type)
      return where(pc, in) + " has type " + to_string(in.type) + ", but its operands give " + to_string(*t);
    stack.resize(stack.size() - k);
    stack.push_back(*t);
  }
  if (stack.size() != 1) return "expression leaves " + std::to_string(stack.size()) + " values instead of 1";
  return {};
}

Evaluation evaluate(const Instr* code, size_t n, const LeafValue& leaf) {
  using State = Evaluation::State;
  Evaluation bad;
  bad.state = State::Failed;
  bad.error = ErrorKind::Invalid;
  std::string problem = verify(code, n);
  if (!problem.empty()) {
    bad.message = "malformed expression: " + problem;
    return bad;
  }
  std::vector<Evaluation> stack;
  stack.reserve(16);
  auto fail = [&](size_t pc, const Outcome& o) {
    Evaluation e;
    e.state = State::Failed;
    e.error = o.error;
    e.message = o.message;
    e.at = pc;
    e.type = code[pc].type;
    return e;
  };
  auto unknown = [&](ScalarType t) {
    Evaluation e;
    e.state = State::Unknown;
    e.type = t;
    return e;
  };
  for (size_t pc = 0; pc < n; ++pc) {
    const Instr& in = code[pc];
    if (in.kind != InstrKind::Operator) {
      std::optional<Value> v = in.kind == InstrKind::Const ? std::optional<Value>(in.value) : leaf(in);
      if (!v) {
        stack.push_back(unknown(in.type));
        continue;
      }
      if (v->type != in.type) {
        stack.push_back(fail(pc, Outcome::fail(ErrorKind::Invalid, std::string("a ") + to_string(v->type) +
                                                                       " value where " + to_string(in.type) +
                                                                       " was expected")));
        continue;
      }
      Evaluation e;
      e.value = *v;
      e.type = in.type;
      stack.push_back(e);
      continue;
    }
    if (arity(in.op) == 1) {
      Evaluation a = stack.back();
      stack.pop_back();
      if (a.failed()) stack.push_back(a);
      else if (!a.known()) stack.push_back(unknown(in.type));
      else {
        Outcome o = apply(in.op, a.value);
        if (!o.ok()) stack.push_back(fail(pc, o));
        else stack.push_back(Evaluation{State::Known, o.value, in.type, ErrorKind::None, {}, 0});
      }
      continue;
    }
    Evaluation b = stack.back();
    stack.pop_back();
    Evaluation a = stack.back();
    stack.pop_back();
    if (in.op == Op::And || in.op == Op::Or) {
      // The left operand decides first: an error in the right one is hidden when it decides.
      if (a.failed()) {
        stack.push_back(a);
      } else if (a.known() && a.value.truthy() == (in.op == Op::Or)) {
        stack.push_back(Evaluation{State::Known, Value::of_bool(in.op == Op::Or), in.type, ErrorKind::None, {}, 0});
      } else if (!a.known()) {
        stack.push_back(unknown(in.type));
      } else if (b.failed()) {
        stack.push_back(b);
      } else if (!b.known()) {
        stack.push_back(unknown(in.type));
      } else {
        stack.push_back(Evaluation{State::Known, Value::of_bool(b.value.truthy()), in.type, ErrorKind::None, {}, 0});
      }
      continue;
    }
    if (a.failed()) {
      stack.push_back(a);
      continue;
    }
    if (b.failed()) {
      stack.push_back(b);
      continue;
    }
    if (!a.known() || !b.known()) {
      // Some errors need only the known operand: an integer divisor of 0, a bad shift count.
      if (b.known() && !is_float(in.type) && !is_comparison(in.op)) {
        Value probe = Value::of_int(a.type, 1);
        if (in.op == Op::Div || in.op == Op::Mod || in.op == Op::CeilDiv || in.op == Op::Shl || in.op == Op::Shr) {
          Outcome o = apply(in.op, probe, b.value);
          if (!o.ok() && (o.error == ErrorKind::DivisionByZero || o.error == ErrorKind::ShiftCount)) {
            // The probe's value is not the operand's: say what is known.
            if (o.error == ErrorKind::DivisionByZero)
              o.message = std::string("division by zero: the divisor of `") + symbol(in.op) + "` is 0";
            else
              o.message = "shift count: " + b.value.to_string() + " is outside 0 to " +
                          std::to_string(bit_width(in.type) - 1) + " for " + to_string(in.type);
            stack.push_back(fail(pc, o));
            continue;
          }
        }
      }
      stack.push_back(unknown(in.type));
      continue;
    }
    Outcome o = apply(in.op, a.value, b.value);
    if (!o.ok()) stack.push_back(fail(pc, o));
    else stack.push_back(Evaluation{State::Known, o.value, in.type, ErrorKind::None, {}, 0});
  }
  return stack.back();
}

}  // namespace orch::expr
