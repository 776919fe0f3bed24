// Diagnostics: clang-style errors with stable codes (docs/diagnostics.md lists them all).
// Stages report into a DiagnosticEngine and keep going, so one run shows every problem.
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "support/diagnostic_code.h"
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
  // Where the reporting stage was when it found the problem (`call` sites, innermost first),
  // printed after `notes`. At most kMaxContextNotes; the last one then summarises the rest.
  std::vector<DiagnosticNote> context = {};
};

// Notes shown for the context of one diagnostic (a chain of `call`s 64 deep prints 8).
constexpr size_t kMaxContextNotes = 8;

class DiagnosticEngine {
 public:
  // Returns the diagnostic so a caller can attach notes: `diags.error(...).notes.push_back(..)`.
  // A diagnostic identical to an earlier one (severity, code, place and message) is dropped:
  // the same statement checked again through another `call` reports its mistake once. The
  // reference returned for it is to a scratch diagnostic that nothing prints.
  Diagnostic& error(DiagCode code, SourceRange range, std::string message);
  Diagnostic& warning(DiagCode code, SourceRange range, std::string message);
  // A diagnostic made away from the engine (by a kernel compile on a worker thread), its code
  // from to_string(DiagCode); reported like error() or warning() by its severity, notes kept.
  Diagnostic& add(Diagnostic d);
  void add_note(Diagnostic& d, SourceRange range, std::string message) {
    d.notes.push_back({range, std::move(message)});
  }

  // While a context is pushed, every diagnostic reported gets a note for it ("called from
  // here"), innermost first. Pair each push with a pop; ScopedContext does.
  void push_context(SourceRange range, std::string message) {
    context_.push_back({range, std::move(message)});
  }
  void pop_context() { context_.pop_back(); }
  class ScopedContext {
   public:
    ScopedContext(DiagnosticEngine& e, SourceRange range, std::string message) : e_(e) {
      e_.push_context(range, std::move(message));
    }
    ~ScopedContext() { e_.pop_context(); }
    ScopedContext(const ScopedContext&) = delete;
    ScopedContext& operator=(const ScopedContext&) = delete;

   private:
    DiagnosticEngine& e_;
  };

  bool has_errors() const { return error_count_ > 0; }
  size_t error_count() const { return error_count_; }
  const std::vector<Diagnostic>& all() const { return diags_; }
  // Sorted by file and position, errors and warnings as reported, for stable output.
  std::vector<Diagnostic> sorted() const;

 private:
  Diagnostic& report(Severity severity, std::string code, SourceRange range, std::string message);

  std::vector<Diagnostic> diags_;
  size_t error_count_ = 0;
  std::vector<DiagnosticNote> context_;
  std::set<std::tuple<int, std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, std::string>>
      seen_;
  Diagnostic discarded_;
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
