// Postfix code evaluated in double precision: for estimates that must not overflow the integer
// types they are written in, such as the `cost` a kernel declares (`cost bytes 12 * n`), which
// orch-run evaluates with the bound params (docs/language.md, "kernel"). Exact values, errors
// and types are expr::evaluate's (expr.h); the expression table (tests/expr_table_test.cpp)
// checks that this one agrees with it wherever both give a value.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "expr/expr.h"

namespace orch::expr {

// A leaf's value (a param, the family member, rank, world size) as a double; nullopt: unknown.
using LeafReal = std::function<std::optional<double>(const Instr&)>;

// The arithmetic operators (- + - * / % << >> min max ceil_div); where an instruction's type is
// an integer, / and ceil_div round as integers do (<< and >> always do). false (and *error) for
// another operator, an unknown leaf, a division by zero or malformed code.
bool evaluate_real(const std::vector<Instr>& code, const LeafReal& leaf, double* out, std::string* error);

}  // namespace orch::expr
