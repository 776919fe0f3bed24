// Diagnostics: clang-style errors with stable codes (docs/diagnostics.md lists them all).
// Stages report into a DiagnosticEngine and keep going, so one run shows every problem.
#pragma once

#include <string>
#include <vector>

#include "support/source.h"

namespace orch {

enum class Severity { Error, Warning, Note };

struct DiagnosticNote {
  SourceRange range;
  std::string message;
};

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string code;  // "E0101"; stable across releases
  SourceRange range;
  std::string message;
  std::vector<DiagnosticNote> notes;
};

class DiagnosticEngine {
 public:
  // Returns the diagnostic so a caller can attach notes: `diags.error(...).notes.push_back(..)`.
  Diagnostic& error(std::string code, SourceRange range, std::string message);
  Diagnostic& warning(std::string code, SourceRange range, std::string message);
  void add_note(Diagnostic& d, SourceRange range, std::string message) {
    d.notes.push_back({range, std::move(message)});
  }

  bool has_errors() const { return error_count_ > 0; }
  size_t error_count() const { return error_count_; }
  const std::vector<Diagnostic>& all() const { return diags_; }
  // Sorted by file and position, errors and warnings as reported, for stable output.
  std::vector<Diagnostic> sorted() const;

 private:
  std::vector<Diagnostic> diags_;
  size_t error_count_ = 0;
};

enum class DiagnosticFormat { Text, Json, Sarif };

// Text: `file:line:col: error[CODE]: message`, the source line and a caret under the span,
// then each note the same way. JSON: one object per diagnostic. SARIF: 2.1.0, one run.
std::string format_diagnostics(const std::vector<Diagnostic>& diags, const SourceManager& sources,
                               DiagnosticFormat format, bool color = false);

// The short description of a code, for SARIF rule metadata and docs; empty if unknown.
std::string describe_code(const std::string& code);
std::vector<std::string> all_diagnostic_codes();

}  // namespace orch
