// The `cost` a kernel declares in the .orch file (`cost bytes 12 * n, flops 2 * n`), as lowered
// into each launch (pipeline.bin: Node.cost_bytes, Node.cost_flops over the params), evaluated
// for the values a run binds. Counts are evaluated in double precision, so a large count does
// not overflow the params' integer types (integer division and shifts still round down).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"
#include "expr/evaluate_real.h"

namespace orch::run {

using CostLeaf = expr::LeafReal;

// expr::evaluate_real, and false (and *error) for a result that is negative or not finite.
bool evaluate_cost(const std::vector<expr::Instr>& code, const CostLeaf& leaf, double* out, std::string* error);

struct DeclaredCost {
  bool has_bytes = false, has_flops = false;
  double bytes = 0, flops = 0;
  orch::fb::ScalarType flops_type = orch::fb::ScalarType::F32;
  std::string error;  // why a declared cost could not be evaluated
};
// The declared cost of a kernel node for one run; `leaf` gives the params' values.
DeclaredCost declared_cost(const orch::fb::Pipeline& p, const orch::fb::Op& op, const CostLeaf& leaf);

}  // namespace orch::run
