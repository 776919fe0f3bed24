// The expression table (tests/expr_table.cpp) through the checker, expr/'s evaluator, and NVRTC
// (the printed device code compiles). The printed host code runs in orch_expr_table_host (a
// generated program); the printed device code runs in the GPU suite (runtime/tests).
#include <doctest/doctest.h>

#include <nvrtc.h>

#include <cmath>
#include <string>
#include <vector>

#include "expr/evaluate_real.h"
#include "tests/expr_table.h"

namespace orch::exprtable {
namespace {

// Words an error of this kind is reported with.
bool mentions(const std::string& text, expr::ErrorKind k) {
  switch (k) {
    case expr::ErrorKind::Overflow: return text.find("overflow") != std::string::npos;
    case expr::ErrorKind::DivisionByZero: return text.find("division by zero") != std::string::npos;
    case expr::ErrorKind::ShiftCount: return text.find("shift count") != std::string::npos;
    case expr::ErrorKind::Conversion:
      return text.find("does not fit") != std::string::npos || text.find("not exactly representable") != std::string::npos ||
             text.find("not an integer") != std::string::npos;
    case expr::ErrorKind::None:
    case expr::ErrorKind::Invalid: break;
  }
  return false;
}

TEST_CASE("expression table: at least 200 rows, and most of them reach the evaluator") {
  CHECK(rows().size() >= 200);
  size_t printed = generate().printed.size();
  CHECK(printed >= 200);
  MESSAGE(rows().size(), " rows; ", printed, " pass the checker with unknown params and run on host and device");
}

TEST_CASE("expression table: the checker accepts what evaluates and refuses constants that fail") {
  for (const Row& row : rows()) {
    INFO(describe(row));
    Checked c = check_row(row, false);
    INFO(c.diagnostics);
    if (c.code.empty()) {
      // Only an error the checker can prove (a constant, a known divisor or count) stops a row.
      CHECK(row.expect.error != expr::ErrorKind::None);
      CHECK(mentions(c.diagnostics, row.expect.error));
    }
  }
}

TEST_CASE("expression table: the checker with the values as defaults agrees") {
  size_t checked = 0;
  for (const Row& row : rows()) {
    if (!row.scalars.empty()) continue;  // device scalars are read on the GPU only
    Checked c = check_row(row, true);
    if (c.diagnostics == "(a default cannot be written)") continue;
    INFO(describe(row));
    INFO(c.diagnostics);
    ++checked;
    if (row.expect.error == expr::ErrorKind::None) {
      CHECK(c.diagnostics.empty());
    } else {
      CHECK(mentions(c.diagnostics, row.expect.error));
    }
  }
  CHECK(checked >= 150);
}

TEST_CASE("expression table: expr/'s evaluator gives every row's result") {
  for (const Row& row : rows()) {
    Checked c = check_row(row, false);
    if (c.code.empty()) continue;
    INFO(describe(row));
    expr::Evaluation v = expr::evaluate(c.code, [&](const expr::Instr& in) { return leaf_value(row, in); });
    REQUIRE(!(v.state == expr::Evaluation::State::Unknown));
    Result got;
    if (v.failed()) {
      got.error = static_cast<int>(v.error);
      INFO(v.message);
    } else {
      expr::Outcome o = expr::convert(v.value, row.type);
      INFO(o.message);
      got.error = static_cast<int>(o.error);
      if (o.ok()) got.bits = o.value.storage();
    }
    INFO("got error ", got.error, " bits ", got.bits, " (", (v.failed() ? v.message : v.value.to_string()), ")");
    CHECK(matches(row, got));
  }
}

// Whether a value is exactly a double (integers up to 2^53).
bool exact_in_double(const expr::Value& v) {
  return v.is_float() || !expr::is_integer(v.type) || v.magnitude() <= (uint64_t{1} << 53);
}

// orch-run's `cost` evaluator works in doubles, so a count does not overflow its params' types:
// where the exact evaluator gives a value, it gives the same (to the precision of the row's
// floating-point type, for integers no larger than 2^53), and it fails on a division by zero as
// the exact one does.
TEST_CASE("expression table: evaluate_real (declared costs) agrees with expr/'s evaluator") {
  size_t agreed = 0;
  for (const Row& row : rows()) {
    Checked c = check_row(row, false);
    if (c.code.empty()) continue;
    bool exact_inputs = true;
    for (const expr::Instr& in : c.code) {
      if (in.kind == expr::InstrKind::Const) exact_inputs &= exact_in_double(in.value);
      else if (in.kind != expr::InstrKind::Operator)
        if (std::optional<expr::Value> v = leaf_value(row, in)) exact_inputs &= exact_in_double(*v);
    }
    if (!exact_inputs) continue;
    INFO(describe(row));
    expr::Evaluation exact = expr::evaluate(c.code, [&](const expr::Instr& in) { return leaf_value(row, in); });
    double real = 0;
    std::string error;
    const bool ok = expr::evaluate_real(
        c.code,
        [&](const expr::Instr& in) -> std::optional<double> {
          std::optional<expr::Value> v = leaf_value(row, in);
          if (!v) return std::nullopt;
          return v->as_double();
        },
        &real, &error);
    INFO(error);
    if (!ok && error.find("is not arithmetic") != std::string::npos) continue;  // comparisons, bits
    if (exact.failed()) {
      if (exact.error == expr::ErrorKind::DivisionByZero && !expr::is_float(c.type)) CHECK_FALSE(ok);
      continue;  // an overflow, a shift count or a conversion: the double has a value
    }
    REQUIRE(exact.known());
    const double want = exact.value.as_double();
    if (!std::isfinite(want)) continue;
    REQUIRE(ok);
    const double epsilon = c.type == expr::ScalarType::F16 || c.type == expr::ScalarType::BF16 ? 1e-2
                           : c.type == expr::ScalarType::F32                                    ? 1e-6
                                                                                                : 1e-12;
    CHECK(real == doctest::Approx(want).epsilon(epsilon));
    ++agreed;
  }
  MESSAGE(agreed, " rows evaluated by both");
  CHECK(agreed >= 100);
}

TEST_CASE("expression table: the printed device code compiles with NVRTC (sm_90, no launch)") {
  const Generated g = generate();
  nvrtcProgram prog = nullptr;
  REQUIRE(nvrtcCreateProgram(&prog, g.code.c_str(), "expr_table.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  const char* opts[] = {"-arch=sm_90", "-std=c++17"};
  nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  size_t n = 0;
  REQUIRE(nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS);
  std::string log(n, '\0');
  REQUIRE(nvrtcGetProgramLog(prog, log.data()) == NVRTC_SUCCESS);
  INFO(log);
  CHECK(r == NVRTC_SUCCESS);
  size_t cubin = 0;
  if (r == NVRTC_SUCCESS) CHECK(nvrtcGetCUBINSize(prog, &cubin) == NVRTC_SUCCESS);
  CHECK(cubin > 0);
  nvrtcDestroyProgram(&prog);
}

}  // namespace
}  // namespace orch::exprtable
