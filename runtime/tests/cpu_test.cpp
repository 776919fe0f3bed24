// Runtime tests that need no GPU: the expression evaluator, scalar conversions, param
// resolution, bind checks, buffer sizes and binding validation, and the errors the loader
// gives for malformed input before it touches CUDA.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/orch.h"
#include "orch/runtime.h"
#include "runtime/src/plan.h"
#include "runtime/tests/test_util.h"

namespace fb = orch::fb;
using orch::rt::Value;

namespace {

using Op = fb::ExprOp;
using T = fb::ScalarType;
using orch::expr::ScalarType;

// Every instruction carries its value's type (docs/format.md); integers default to i64.
fb::ExprInstr I(int64_t v, T t = T::I64) { return fb::ExprInstr(Op::ConstInt, t, 0, v, 0); }
fb::ExprInstr F(double v, T t = T::F64) { return fb::ExprInstr(Op::ConstFloat, t, 0, 0, v); }
fb::ExprInstr P(int ref, T t = T::I64) { return fb::ExprInstr(Op::Param, t, ref, 0, 0); }
fb::ExprInstr O(Op op, T t = T::I64) { return fb::ExprInstr(op, t, 0, 0, 0); }
fb::ExprInstr B(Op op) { return O(op, T::Bool); }
Value i64(int64_t v) { return Value::of_int(ScalarType::I64, v); }

struct Eval {
  std::string error;
  Value value;
};

Eval eval(const std::vector<fb::ExprInstr>& code, std::vector<Value> params = {}, int64_t member = -1) {
  orch::rt::EvalEnv env;
  env.params = &params;
  env.family_index = member;
  env.rank = 3;
  env.world_size = 8;
  Eval r;
  r.error = orch::rt::evaluate(code.data(), code.size(), env, &r.value);
  return r;
}

int64_t eval_int(const std::vector<fb::ExprInstr>& code, std::vector<Value> params = {}) {
  Eval r = eval(code, std::move(params));
  INFO(r.error);
  REQUIRE(r.error.empty());
  REQUIRE_FALSE(r.value.is_float());
  return r.value.i64();
}

using Opened = orch::test::OpenedExample;
using orch::test::open_example;

}  // namespace

TEST_CASE("expressions: integer arithmetic in postfix") {
  CHECK(eval_int({I(2), I(3), O(Op::Add), I(4), O(Op::Mul)}) == 20);
  CHECK(eval_int({I(7), I(2), O(Op::Div)}) == 3);
  CHECK(eval_int({I(-7), I(2), O(Op::Div)}) == -3);  // truncates like C
  CHECK(eval_int({I(-7), I(2), O(Op::Mod)}) == -1);
  CHECK(eval_int({I(10), I(256), O(Op::CeilDiv)}) == 1);
  CHECK(eval_int({I(512), I(256), O(Op::CeilDiv)}) == 2);
  CHECK(eval_int({I(513), I(256), O(Op::CeilDiv)}) == 3);
  CHECK(eval_int({I(-7), I(2), O(Op::CeilDiv)}) == -3);
  CHECK(eval_int({I(7), I(-2), O(Op::CeilDiv)}) == -3);
  CHECK(eval_int({I(-7), I(-2), O(Op::CeilDiv)}) == 4);
  CHECK(eval_int({I(1), I(20), O(Op::Shl)}) == (1 << 20));
  CHECK(eval_int({I(-16), I(2), O(Op::Shr)}) == -4);
  CHECK(eval_int({I(6), I(3), O(Op::BitAnd)}) == 2);
  CHECK(eval_int({I(6), I(3), O(Op::BitOr)}) == 7);
  CHECK(eval_int({I(6), I(3), O(Op::BitXor)}) == 5);
  CHECK(eval_int({I(5), O(Op::BitNot)}) == ~int64_t(5));
  CHECK(eval_int({I(5), O(Op::Neg)}) == -5);
  CHECK(eval({I(0), B(Op::Not)}).value.truthy());
  CHECK(eval_int({I(3), I(9), O(Op::Min)}) == 3);
  CHECK(eval_int({I(3), I(9), O(Op::Max)}) == 9);
  CHECK(eval({I(3), I(9), B(Op::Lt), I(1), I(1), B(Op::Ne), B(Op::Or)}).value.truthy());
  CHECK_FALSE(eval({I(3), I(9), B(Op::Ge), I(1), B(Op::And)}).value.truthy());
  CHECK(eval_int({P(0), P(1), O(Op::Mul)}, {i64(6), i64(7)}) == 42);
  CHECK(eval({fb::ExprInstr(Op::Rank, T::U32, 0, 0, 0), fb::ExprInstr(Op::WorldSize, T::U32, 0, 0, 0),
              O(Op::Add, T::U32)})
            .value.u64() == 11);
  // Each instruction computes in its type: u32 overflows where i64 would not.
  CHECK(eval({I(65536, T::U32), I(65536, T::U32), O(Op::Mul, T::U32)}).error ==
        "overflow: 65536 * 65536 does not fit u32");
  CHECK(eval({I(0, T::U32), O(Op::BitNot, T::U32)}).value.u64() == 4294967295u);
  // u64 uses its whole range.
  CHECK(eval({P(0, T::U64), I(1, T::U64), O(Op::Shr, T::U64)}, {Value::of_uint(ScalarType::U64, ~uint64_t(0))})
            .value.u64() == ~uint64_t(0) >> 1);
}

TEST_CASE("expressions: floats mix with integers; comparisons give bools") {
  Eval r = eval({F(1.0), fb::ExprInstr(Op::WorldSize, T::U32, 0, 0, 0), O(Op::Div, T::F64)});
  REQUIRE(r.error.empty());
  CHECK(r.value.is_float());
  CHECK(r.value.f64() == 0.125);
  r = eval({P(0, T::F64), F(1e-6), B(Op::Gt)}, {Value::of_double(ScalarType::F64, 2e-6)});
  REQUIRE(r.error.empty());
  CHECK(r.value.type == ScalarType::Bool);
  CHECK(r.value.truthy());
  r = eval({F(2.5), O(Op::Neg, T::F64), I(1), O(Op::Max, T::F64)});
  REQUIRE(r.error.empty());
  CHECK(r.value.f64() == 1.0);
  // f32 computes in f32: 1/3 rounded once to f32.
  r = eval({F(1.0, T::F32), F(3.0, T::F32), O(Op::Div, T::F32)});
  REQUIRE(r.error.empty());
  CHECK(r.value.f64() == static_cast<double>(1.0f / 3.0f));
}

TEST_CASE("expressions: every bad evaluation is an error, never undefined behaviour") {
  const int64_t min = std::numeric_limits<int64_t>::min(), max = std::numeric_limits<int64_t>::max();
  CHECK(eval({I(1), I(0), O(Op::Div)}).error.find("division by zero") != std::string::npos);
  CHECK(eval({I(1), I(0), O(Op::Mod)}).error.find("division by zero") != std::string::npos);
  CHECK(eval({I(1), I(0), O(Op::CeilDiv)}).error.find("division by zero") != std::string::npos);
  CHECK(eval({F(1), F(0), O(Op::Div, T::F64)}).error.find("division by zero") != std::string::npos);
  CHECK(eval({I(min), I(-1), O(Op::Div)}).error.find("overflow") != std::string::npos);
  CHECK(eval_int({I(min), I(-1), O(Op::Mod)}) == 0);
  CHECK(eval({I(min), O(Op::Neg)}).error.find("overflow") != std::string::npos);
  CHECK(eval({I(max), I(1), O(Op::Add)}).error.find("overflow") != std::string::npos);
  CHECK(eval({I(min), I(1), O(Op::Sub)}).error.find("overflow") != std::string::npos);
  CHECK(eval({I(1), I(1), O(Op::Add), I(max), O(Op::Mul)}).error.find("overflow") != std::string::npos);
  CHECK(eval({I(1), I(64), O(Op::Shl)}).error.find("shift count") != std::string::npos);
  CHECK(eval({I(1), I(-1), O(Op::Shr)}).error.find("shift count") != std::string::npos);
  CHECK(eval({I(3), I(62), O(Op::Shl)}).error.find("overflow") != std::string::npos);
  CHECK(eval({F(1.5), I(2), O(Op::Mod, T::F64)}).error.find("integer operands") != std::string::npos);
  CHECK(eval({F(1.5), I(2), O(Op::BitAnd, T::F64)}).error.find("integer operands") != std::string::npos);
  CHECK(eval({F(1.5), O(Op::BitNot, T::F64)}).error.find("integer") != std::string::npos);
  CHECK(eval({fb::ExprInstr(Op::FamilyIndex, T::U32, 0, 0, 0)}).error.find("family") != std::string::npos);
  CHECK(eval({fb::ExprInstr(Op::FamilyIndex, T::U32, 0, 0, 0)}, {}, 5).value.u64() == 5);
  CHECK(eval({P(2)}, {i64(1)}).error.find("out of range") != std::string::npos);
  CHECK(eval({P(-1)}, {i64(1)}).error.find("out of range") != std::string::npos);
  CHECK(eval({P(0)}, {Value::of_int(ScalarType::I32, 1)}).error.find("i32 value where i64") != std::string::npos);
  CHECK(eval({I(1), O(Op::Add)}).error.find("too few operands") != std::string::npos);
  CHECK(eval({O(Op::Neg)}).error.find("too few operands") != std::string::npos);
  CHECK(eval({I(1), I(2)}).error.find("leaves 2 values") != std::string::npos);
  CHECK(eval({}).error.find("empty") != std::string::npos);
  CHECK(eval({fb::ExprInstr(static_cast<Op>(200), T::I64, 0, 0, 0)}).error.find("unknown") != std::string::npos);
  CHECK(eval({I(1), I(2), O(Op::Add, T::U32)}).error.find("has type u32, but its operands give i64") !=
        std::string::npos);
}

TEST_CASE("scalars: kernel arguments are converted exactly, or refused") {
  uint64_t bits = 0;
  CHECK(orch::rt::encode_scalar(i64(4000000000ll), T::U32, &bits).empty());
  CHECK(bits == 4000000000ull);
  CHECK(orch::rt::encode_scalar(i64(-1), T::U32, &bits) == "-1 does not fit u32");
  CHECK(orch::rt::encode_scalar(i64(1ll << 32), T::U32, &bits).find("does not fit") != std::string::npos);
  CHECK(orch::rt::encode_scalar(i64(-1), T::I8, &bits).empty());
  CHECK(bits == 0xff);
  CHECK(orch::rt::encode_scalar(i64(128), T::I8, &bits).find("does not fit") != std::string::npos);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 1.0), T::F16, &bits).empty());
  CHECK(bits == 0x3c00);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 1.0), T::BF16, &bits).empty());
  CHECK(bits == 0x3f80);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 0.5), T::F32, &bits).empty());
  CHECK(bits == 0x3f000000);
  CHECK(orch::rt::encode_scalar(i64(3), T::F64, &bits).empty());
  double d;
  std::memcpy(&d, &bits, 8);
  CHECK(d == 3.0);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 1e300), T::F32, &bits).find("does not fit") !=
        std::string::npos);
  // No silent truncation anywhere: 2.75 is not an i32, 16777217 not an f32.
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 2.75), T::I32, &bits).find("not an integer") !=
        std::string::npos);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, 2.0), T::I32, &bits).empty());
  CHECK(bits == 2);
  CHECK(orch::rt::encode_scalar(i64(16777217), T::F32, &bits).find("not exactly representable in f32") !=
        std::string::npos);
  CHECK(orch::rt::encode_scalar(Value::of_double(ScalarType::F64, NAN), T::I32, &bits).find("does not fit") !=
        std::string::npos);
  CHECK(orch::rt::encode_scalar(i64(2), T::Bool, &bits).find("does not fit bool") != std::string::npos);
}

TEST_CASE("scalars: bound values must fit the param's type exactly (issue 9)") {
  using orch::ScalarValue;
  Value v;
  // A ScalarValue made by hand with a kind that is none of the three is refused, not bound as 0
  // (issue 21).
  ScalarValue odd = ScalarValue::of(7);
  odd.kind = static_cast<ScalarValue::Kind>(9);
  CHECK(orch::rt::convert_binding(odd, T::U32, &v).find("unknown kind 9") != std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(4096u), T::U32, &v).empty());
  CHECK(v == Value::of_uint(ScalarType::U32, 4096));
  CHECK(orch::rt::convert_binding(ScalarValue::of(-1), T::U32, &v).find("does not fit u32") != std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(1.5), T::U32, &v).find("not an integer") != std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(8.0), T::U32, &v).empty());
  CHECK(v == Value::of_uint(ScalarType::U32, 8));
  CHECK(orch::rt::convert_binding(ScalarValue::of(uint64_t(1) << 40), T::U32, &v).find("does not fit") !=
        std::string::npos);
  // u64: the whole range, and floats that are integers within it.
  CHECK(orch::rt::convert_binding(ScalarValue::of(~uint64_t(0)), T::U64, &v).empty());
  CHECK(v.u64() == ~uint64_t(0));
  CHECK(orch::rt::convert_binding(ScalarValue::of(1e19), T::U64, &v).empty());
  CHECK(v.u64() == 10000000000000000000ull);
  CHECK(orch::rt::convert_binding(ScalarValue::of(2e19), T::U64, &v).find("does not fit u64") != std::string::npos);
  // Floats round to nearest in their type, but never to infinity.
  CHECK(orch::rt::convert_binding(ScalarValue::of(0.1), T::F32, &v).empty());
  CHECK(v.f64() == static_cast<double>(0.1f));  // what the kernel will see
  CHECK(orch::rt::convert_binding(ScalarValue::of(3), T::F64, &v).empty());
  CHECK(v.f64() == 3.0);
  CHECK(orch::rt::convert_binding(ScalarValue::of(1e300), T::F32, &v).find("does not fit") != std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(1e6), T::F16, &v).find("does not fit f16") != std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(65520.0), T::F16, &v).find("does not fit f16") !=
        std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(65519.0), T::F16, &v).empty());
  CHECK(v.f64() == 65504.0);
  CHECK(orch::rt::convert_binding(ScalarValue::of(3.5e38), T::BF16, &v).find("does not fit bf16") !=
        std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(1e39), T::BF16, &v).find("does not fit bf16") != std::string::npos);
  // Integers into floats only when exact.
  CHECK(orch::rt::convert_binding(ScalarValue::of(16777217), T::F32, &v).find("not exactly representable") !=
        std::string::npos);
  CHECK(orch::rt::convert_binding(ScalarValue::of(16777216), T::F32, &v).empty());
  CHECK(orch::rt::convert_binding(ScalarValue::of(2049), T::F16, &v).find("not exactly representable") !=
        std::string::npos);
}

TEST_CASE("plan: params come from bindings or defaults, and size the buffers") {
  Opened o = open_example("saxpy");
  orch::Bindings b;
  auto plan = orch::rt::make_plan(*o.p, b);
  INFO(plan.error().to_string());
  REQUIRE(plan.ok());
  CHECK(plan->params[0].u64() == 1048576);                  // n's default
  CHECK(plan->params[1].f64() == 2.0);     // a's default
  CHECK(plan->buffers[0].bytes == 1048576ull * 4);

  b.param("n", 1000u).param("a", 0.5f);
  plan = orch::rt::make_plan(*o.p, b);
  REQUIRE(plan.ok());
  CHECK(plan->params[0].u64() == 1000);
  CHECK(plan->params[1].f64() == 0.5);
  for (const auto& s : plan->buffers) CHECK(s.bytes == 4000);

  b.param("n", 10u);  // binding again replaces
  plan = orch::rt::make_plan(*o.p, b);
  REQUIRE(plan.ok());
  CHECK(plan->buffers[2].count == 10);
}

TEST_CASE("plan: bindings are validated by name, type and size") {
  Opened o = open_example("saxpy");
  {
    orch::Bindings b;
    b.param("m", 3u);
    auto plan = orch::rt::make_plan(*o.p, b);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code() == orch::ErrorCode::UnknownName);
    CHECK(plan.error().message() == "pipeline 'saxpy' has no param 'm' (its params: n, a)");
  }
  {
    orch::Bindings b;
    b.param("n", -5);
    auto plan = orch::rt::make_plan(*o.p, b);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code() == orch::ErrorCode::InvalidValue);
    CHECK(plan.error().message() == "param 'n' (u32): -5 does not fit u32");
    CHECK(plan.error().where().find("saxpy.orch:5:1") != std::string::npos);
  }
  {
    orch::Bindings b;
    int dummy;
    b.param("n", 100u).buffer("x", &dummy, 396);
    auto plan = orch::rt::make_plan(*o.p, b);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code() == orch::ErrorCode::BufferTooSmall);
    CHECK(plan.error().message() == "buffer 'x' is bound to 396 bytes; it needs 400 (100 f32 elements, count n)");
    CHECK(plan.error().where().find("saxpy.orch:") != std::string::npos);
    b.buffer("x", &dummy, 400);
    CHECK(orch::rt::make_plan(*o.p, b).ok());
    b.buffer("x", nullptr, 400);
    CHECK(orch::rt::make_plan(*o.p, b).error().code() == orch::ErrorCode::InvalidArgument);
    b.buffer("x", &dummy, 400).buffer("nope", &dummy, 400);
    CHECK(orch::rt::make_plan(*o.p, b).error().code() == orch::ErrorCode::UnknownName);
  }
  {
    orch::Bindings b;
    b.param("n", 0u);
    auto plan = orch::rt::make_plan(*o.p, b);
    REQUIRE_FALSE(plan.ok());
    // The grid bind check comes first: ceil_div(0, 256) blocks is no launch, and it says so
    // (not "too many blocks").
    CHECK(plan.error().code() == orch::ErrorCode::BindCheckFailed);
    CHECK(plan.error().message() == "E0205: grid of `saxpy` is empty in x (no blocks)");
    CHECK(plan.error().where().find("saxpy.orch:") != std::string::npos);
  }
}

TEST_CASE("plan: a failing bind check names its code, message and statement") {
  Opened o = open_example("moe");
  orch::Bindings b;
  b.param("tokens", 1u << 20).param("hidden", 1u << 20);
  auto plan = orch::rt::make_plan(*o.p, b);
  REQUIRE_FALSE(plan.ok());
  // tokens * hidden computes in u32 (both are u32): it overflows before the grid is too large.
  CHECK(plan.error().code() == orch::ErrorCode::InvalidValue);
  CHECK(plan.error().message() ==
        "E0203: cannot evaluate a bind check (overflow: 1048576 * 1048576 does not fit u32): grid of `combine` "
        "has too many blocks in x; sm_90 allows at most 2147483647");
  CHECK(plan.error().where().find("moe.orch:31:13") != std::string::npos);
  b.param("tokens", 1u << 16).param("hidden", 1u << 15);  // 2^31 fits u32: 2^23 blocks
  CHECK(orch::rt::make_plan(*o.p, b).ok());
  // The size of the buffers overflows before anything is allocated, too.
  b.param("tokens", 300u).param("hidden", 64u);
  CHECK(orch::rt::make_plan(*o.p, b).ok());
}

TEST_CASE("plan: a bind check that uses the family index holds for every member") {
  // Was: "family index used outside a graph family" for any shape that used the index.
  const char* src = R"(pipeline member_checks
param base: u32 = 32
param which: u32 = 1
buffer t: u32[4]
kernel count(i: u32, t: inout u32[]) source """extern "C" __global__ void count(unsigned i, unsigned* t) {}"""
graph part[i: 4] device { count<<<1, base * (i + 1)>>>(i, t) }
graph main { launch part[which] tail }
)";
  std::string log;
  std::string path = orch::test::compile_source("member_checks", src, &log);
  INFO(log);
  REQUIRE(!path.empty());
  const Opened opened = orch::test::open_artifact(path);
  orch::Bindings b;
  auto plan = orch::rt::make_plan(*opened.p, b);
  INFO(plan.error().to_string());
  CHECK(plan.ok());
  b.param("base", 256u);  // members 0..3: blocks of 256, 512, 768 and 1024 threads
  CHECK(orch::rt::make_plan(*opened.p, b).ok());
  b.param("base", 257u);  // member 3: 1028
  plan = orch::rt::make_plan(*opened.p, b);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == orch::ErrorCode::BindCheckFailed);
  CHECK(plan.error().message() ==
        "E0201: block of `count` has too many threads; sm_90 allows at most 1024 per block (family member 3)");
  b.param("base", 32u).param("which", 4u);
  plan = orch::rt::make_plan(*opened.p, b);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().message() ==
        "E0504: `part` has members 0 to 3; the index of `launch part[...]` is one of them");
  CHECK(plan.error().where().find("member_checks.orch:7:26") != std::string::npos);
}

// The runtime keeps each collective after the one before it, by an edge only where the graph
// does not order them already (a kernel lined up after the first, before the second).
TEST_CASE("plan: depends_on sees a collective ordered after the one before it through a kernel") {
  std::string src =
      "pipeline chain\ntarget sm_90\nparam n: u32 = 256\ncomm world\nbuffer g0: f32[n]\nbuffer g1: f32[n]\n"
      "kernel scale(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float* x) "
      "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\"\"\"\n"
      "graph main {\n  scale<<<ceil_div(n, 256), 256>>>(n, g0)\n  allreduce sum g0 on world\n"
      "  scale<<<ceil_div(n, 256), 256>>>(n, g1)\n  allreduce sum g1 on world\n}\n";
  for (const char* options : {"", "--no-line-up"}) {
    INFO(options);
    std::string log;
    const std::string path = orch::test::compile_source(options[0] ? "chain_free" : "chain", src, &log, options);
    INFO(log);
    REQUIRE(!path.empty());
    const Opened o = orch::test::open_artifact(path);
    const orch::fb::Graph& g = *o.p->graphs()->Get(o.p->main_graph());
    REQUIRE(g.nodes()->size() == 4);
    // Node 1 is the first allreduce, node 3 the second; node 2 its kernel.
    CHECK(orch::rt::depends_on(g, 3, 2));
    CHECK(orch::rt::depends_on(g, 1, 0));
    CHECK_FALSE(orch::rt::depends_on(g, 1, 3));  // only earlier nodes
    // Lined up, the second kernel waits for the first allreduce, and so the second allreduce;
    // free, the second allreduce still waits for the first, by the artifact's own edge
    // (lowering/collectives_in_order.cpp), and the runtime adds none.
    const bool lined_up = options[0] == 0;
    CHECK(orch::rt::depends_on(g, 2, 1) == lined_up);
    CHECK(orch::rt::depends_on(g, 2, 0) == lined_up);
    CHECK(orch::rt::depends_on(g, 3, 1));
  }
}

TEST_CASE("plan: comms must be bound, and give rank and world_size") {
  Opened o = open_example("dp_step");
  REQUIRE(orch::rt::find_collective(*o.p) != nullptr);
  orch::Bindings b;
  b.param("n", 1024u);
  auto plan = orch::rt::make_plan(*o.p, b);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == orch::ErrorCode::Unbound);
  CHECK(plan.error().message().find("comm 'world' is not bound") == 0);
  b.comm("world", nullptr, 2, 4);
  plan = orch::rt::make_plan(*o.p, b);
  REQUIRE(plan.ok());
  CHECK(plan->rank == 2);
  CHECK(plan->world_size == 4);
  b.comm("world", nullptr, 4, 4);
  CHECK(orch::rt::make_plan(*o.p, b).error().code() == orch::ErrorCode::InvalidValue);
  b.comm("world", nullptr, 0, 1).comm("other", nullptr, 0, 1);
  CHECK(orch::rt::make_plan(*o.p, b).error().code() == orch::ErrorCode::UnknownName);
  CHECK(orch::rt::find_collective(*open_example("saxpy").p) == nullptr);
  // Rank and size left to the communicator: instantiate() reads them before make_plan.
  int fake = 0;
  b = orch::Bindings();
  b.param("n", 1024u).comm("world", &fake);
  plan = orch::rt::make_plan(*o.p, b);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == orch::ErrorCode::InvalidValue);
  CHECK(plan.error().message() ==
        "comm 'world' has no rank and world size yet (instantiate() reads them from the bound communicator)");
  const char id[128] = {1};
  b.comm_from_unique_id("world", id, 1, 2);
  plan = orch::rt::make_plan(*o.p, b);
  REQUIRE(plan.ok());
  CHECK(plan->rank == 1);
  CHECK(plan->world_size == 2);
}

TEST_CASE("plan: a param without default must be bound; its error names the declaration") {
  auto tree = std::unique_ptr<fb::PipelineT>(
      fb::GetPipeline(orch::artifact::sample_payload().data())->UnPack());
  REQUIRE(!tree->params.empty());
  tree->params[0]->has_default = false;
  const std::string payload = orch::artifact::pack_payload(*tree);
  const std::string file = orch::artifact::wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  auto opened = orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  INFO(opened.error);
  REQUIRE(opened.ok());
  orch::Bindings b;
  auto plan = orch::rt::make_plan(*opened.pipeline, b);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().code() == orch::ErrorCode::Unbound);
  CHECK(plan.error().message().find("param '" + tree->params[0]->name + "'") == 0);
  CHECK(plan.error().message().find("is not bound and has no default") != std::string::npos);
}

TEST_CASE("load: malformed input is an error value before any CUDA call") {
  auto r = orch::Pipeline::load_from_memory("hello", 5);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::InvalidArtifact);
  CHECK(r.error().message().find("file too small") == 0);

  std::string file = orch::artifact::sample_artifact();
  file[40] ^= 0x55;
  r = orch::Pipeline::load_from_memory(file.data(), file.size());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::InvalidArtifact);
  CHECK(r.error().message().find("checksum") != std::string::npos);

  r = orch::Pipeline::load_from_memory(nullptr, 10);
  CHECK(r.error().code() == orch::ErrorCode::InvalidArgument);

  r = orch::Pipeline::load(orch::test::temp_dir() + "/does-not-exist.bin");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::Io);
  CHECK(r.error().to_string() == "error: " + orch::test::temp_dir() + "/does-not-exist.bin: cannot open: No such file or directory");

  // A valid file with an odd address inside a bigger buffer: load_from_memory copies it.
  std::string good = orch::artifact::sample_artifact();
  std::string shifted = "x" + good;
  r = orch::Pipeline::load_from_memory(shifted.data() + 1, good.size());
  if (orch::test::gpu_unavailable_reason().empty()) {
    CHECK(r.error().code() != orch::ErrorCode::InvalidArtifact);
  } else {
    // Verified, then refused for the missing GPU, with the reason.
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == orch::ErrorCode::NoDevice);
    CHECK(r.error().message().find("no CUDA device: ") == 0);
  }
}

TEST_CASE("C API: errors as values over the same calls") {
  orch_pipeline* p = reinterpret_cast<orch_pipeline*>(1);
  orch_error* e = orch_pipeline_load((orch::test::temp_dir() + "/nope.bin").c_str(), &p);
  REQUIRE(e != nullptr);
  CHECK(p == nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_IO);
  CHECK(std::string(orch_error_message(e)).find("cannot open") != std::string::npos);
  orch_error_destroy(e);
  e = orch_pipeline_load_from_memory("junkjunk", 8, &p);
  REQUIRE(e != nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARTIFACT);
  orch_error_destroy(e);
  e = orch_launch(nullptr, nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  orch_error_destroy(e);
  orch_bindings* b = orch_bindings_create();
  orch_bindings_param_u32(b, "n", 7);
  orch_bindings_param_f32(b, "a", 1.5f);
  orch_bindings_destroy(b);
  orch_error_destroy(nullptr);
  orch_pipeline_destroy(nullptr);
  orch_executable_destroy(nullptr);
  CHECK(orch_error_code(nullptr) == ORCH_OK);
}

TEST_CASE("errors: to_string puts the statement first") {
  orch::Error e(orch::ErrorCode::BindCheckFailed, "E0203: too big", "jacobi.orch:27:13");
  CHECK(e.to_string() == "jacobi.orch:27:13: error: E0203: too big");
  CHECK(orch::Error().ok());
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::Unsupported)) == "Unsupported");
  orch::Status s;
  CHECK(s.ok());
  orch::Result<int> r(5);
  CHECK(*r == 5);
  CHECK(r.error().ok());
}
