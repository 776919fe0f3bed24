// Small expression helpers the statement checkers share (check_stmts.cpp, check_kernel_launch.cpp,
// check_control_flow.cpp, check_calls.cpp, check_collective.cpp): one definition, internal to
// the checker (not part of compiler/'s interface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/checker.h"

namespace orch::detail {

// A typed constant of the checker's own (comparisons in bind checks are exact across types).
inline ir::Expr constant(int64_t v, const SourceRange& loc = {}, ir::ScalarType t = ir::ScalarType::I64) {
  return ir::constant(ir::Value::of_int(t, v), loc);
}

inline ir::Expr binary(expr::Op op, ir::Expr a, ir::Expr b) { return make_binary(op, std::move(a), std::move(b)); }

// The elements of a buffer count (counts are checked positive where declared).
inline uint64_t elements(const ir::Value& v) { return v.magnitude(); }

inline void collect_device_reads(const ir::Expr& e, std::vector<ir::BufferAccess>& out) {
  if (e.kind == ir::ExprKind::DeviceScalar) add_access(out, e.ref, true, false);
  for (const ir::Expr& o : e.operands) collect_device_reads(o, out);
}

inline bool has_family_index(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::FamilyIndex) return true;
  for (const ir::Expr& o : e.operands)
    if (has_family_index(o)) return true;
  return false;
}

inline bool reads_rank(const ir::Expr& e) {
  if (e.kind == ir::ExprKind::Rank) return true;
  for (const ir::Expr& o : e.operands)
    if (reads_rank(o)) return true;
  return false;
}

inline const char* dim_name(int i) { return i == 0 ? "x" : i == 1 ? "y" : "z"; }

inline const std::string& kernel_name(const ir::Program& p, const ir::KernelNode& n) {
  return p.kernels[n.kernel].name;
}

}  // namespace orch::detail
