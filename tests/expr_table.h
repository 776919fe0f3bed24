// The expression table (issue 10): rows of (expression text, params, device scalars, expected
// type) -> value or error, each written by hand from docs/language.md ("Arithmetic"). Every row
// runs through the checker (as the value of `r = <text>` with a scalar `r` of the expected
// type), expr/'s evaluator, the host printer (a generated program, built and run by ctest) and
// the device printer (a generated kernel, compiled by NVRTC in a CPU test and run in the GPU
// suite). Every path must give the row's result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "expr/expr.h"

namespace orch::exprtable {

// A param (a host value) or a device scalar, with its value.
struct Leaf {
  std::string name;
  expr::Value value;
};

struct Expect {
  expr::ErrorKind error = expr::ErrorKind::None;  // None: the value
  expr::Value value;                              // of the row's expected type
  bool nan = false;                               // the value is a NaN (any NaN)
};

struct Row {
  std::string text;
  std::vector<Leaf> params;
  std::vector<Leaf> scalars;
  expr::ScalarType type;  // of `r`, which the expression's value is converted to
  Expect expect;
};

const std::vector<Row>& rows();

// The pipeline of a row: params (with the row's values as defaults when `with_defaults`), device
// scalars, the result scalar `r` and `graph main { r = <text> }`.
std::string pipeline_of(const Row& row, bool with_defaults);

// A row as the checker sees it: its diagnostics, and, when it checks clean, the typed value
// expression of the assignment as postfix code.
struct Checked {
  std::string diagnostics;  // empty when clean
  std::vector<expr::Instr> code;
  expr::ScalarType type = expr::ScalarType::I64;  // the expression's type
};
Checked check_row(const Row& row, bool with_defaults);

// The row's leaf value for an instruction of its code (a param or a device scalar).
std::optional<expr::Value> leaf_value(const Row& row, const expr::Instr& in);

// What the printed code returns: the error code and, without one, the stored bits of the value.
struct Result {
  int error = 0;
  uint64_t bits = 0;
};
// Whether `got` is the row's expected result (NaN for a NaN row).
bool matches(const Row& row, const Result& got);
std::string describe(const Row& row);  // "n * n (n = 65536 u32) -> u32"

// The generated program: expr/'s preamble, one function per row that the checker accepts
// (`orch_table_row_<i>`), and `orch_table_run(in, bits, err)` running all of them, for host and
// device alike. `inputs` receives the storage bits of every leaf, in the order the code reads
// them; `printed` the indices of the rows it holds.
struct Generated {
  std::string code;
  std::vector<uint64_t> inputs;
  std::vector<size_t> printed;
};
Generated generate();

}  // namespace orch::exprtable
