// Diagnostic codes as an enum: one enumerator per entry of support/diagnostic_codes.def, so a
// mistyped or retired code does not compile. A reported diagnostic keeps its code as text
// (Diagnostic::code), which is what JSON, SARIF, the artifact's bind checks and tools read.
#pragma once

#include <cstdint>

namespace orch {

enum class DiagCode : uint16_t {
#define ORCH_DIAGNOSTIC(code, summary) code,
#include "support/diagnostic_codes.def"
#undef ORCH_DIAGNOSTIC
};

const char* to_string(DiagCode code);  // "E0101"

}  // namespace orch
