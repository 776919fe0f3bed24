#include "support/diagnostics.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace orch {

namespace {

struct CodeInfo {
  const char* code;
  const char* summary;
};

const CodeInfo kCodes[] = {
#define ORCH_DIAGNOSTIC(code, summary) {#code, summary},
#include "support/diagnostic_codes.def"
#undef ORCH_DIAGNOSTIC
};

// A diagnostic's own notes, then its context (`call` sites).
std::vector<DiagnosticNote> all_notes(const Diagnostic& d) {
  std::vector<DiagnosticNote> out = d.notes;
  out.insert(out.end(), d.context.begin(), d.context.end());
  return out;
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
    case Severity::Error: break;
  }
  return "error";
}

// Lines longer than this are shown as an excerpt around the caret, so a megabyte-long line
// with many errors does not print a megabyte per error.
constexpr size_t kSnippetWidth = 256;

// The source line and a caret line under [begin, end) of that line, clang style.
void render_snippet(std::ostringstream& out, const SourceManager& sources, const SourceRange& r,
                    bool color) {
  if (!r.valid()) return;
  SourceManager::Excerpt ex = sources.line_excerpt(r.file, r.begin.line, r.begin.col, kSnippetWidth);
  std::string_view text = ex.text;
  if (text.empty() && r.begin.col > 1 && !ex.cut_before) return;
  const std::string prefix = ex.cut_before ? "..." : "";
  out << prefix << text << (ex.cut_after ? "..." : "") << "\n";
  std::string caret(prefix.size(), ' ');
  // Columns relative to the excerpt (1-based); a caret left of it points at its start.
  uint32_t col = std::max<uint32_t>(r.begin.col, 1);
  col = col > ex.offset ? col - ex.offset : 1;
  for (uint32_t i = 1; i < col && i - 1 < text.size(); ++i) caret += text[i - 1] == '\t' ? '\t' : ' ';
  while (caret.size() + 1 < col + prefix.size()) caret += ' ';
  caret += '^';
  uint32_t end = r.end.line == r.begin.line ? r.end.col : static_cast<uint32_t>(ex.offset + text.size()) + 1;
  end = end > ex.offset ? end - ex.offset : 1;
  for (uint32_t c = col + 1; c < end && c <= text.size(); ++c) caret += '~';
  if (color) out << "\033[1;32m" << caret << "\033[0m\n";
  else out << caret << "\n";
}

void render_text(std::ostringstream& out, const SourceManager& sources, const SourceRange& r,
                 Severity severity, const std::string& code, const std::string& message,
                 bool color) {
  if (color) out << "\033[1m";
  out << sources.describe(r) << ": ";
  if (color) out << (severity == Severity::Note ? "\033[1;36m" : severity == Severity::Warning ? "\033[1;35m" : "\033[1;31m");
  out << severity_name(severity);
  if (!code.empty()) out << "[" << code << "]";
  if (color) out << "\033[0m\033[1m";
  out << ": " << message;
  if (color) out << "\033[0m";
  out << "\n";
  render_snippet(out, sources, r, color);
}

nlohmann::json json_range(const SourceManager& sources, const SourceRange& r) {
  if (!r.valid()) return nullptr;
  return {{"file", sources.path(r.file)},
          {"line", r.begin.line},
          {"column", r.begin.col},
          {"end_line", r.end.line},
          {"end_column", r.end.col}};
}

nlohmann::json sarif_location(const SourceManager& sources, const SourceRange& r,
                              const std::string& message = "") {
  nlohmann::json loc;
  if (r.valid()) {
    loc["physicalLocation"] = {
        {"artifactLocation", {{"uri", sources.path(r.file)}}},
        {"region",
         {{"startLine", r.begin.line},
          {"startColumn", r.begin.col},
          {"endLine", r.end.line},
          {"endColumn", r.end.col}}}};
  }
  if (!message.empty()) loc["message"] = {{"text", message}};
  return loc;
}

std::string render_sarif(const std::vector<Diagnostic>& diags, const SourceManager& sources) {
  nlohmann::json rules = nlohmann::json::array();
  std::map<std::string, size_t> rule_index;
  for (const CodeInfo& c : kCodes) {
    rule_index[c.code] = rules.size();
    rules.push_back({{"id", c.code},
                     {"shortDescription", {{"text", c.summary}}},
                     {"helpUri", std::string("docs/diagnostics.md#") + c.code}});
  }
  nlohmann::json results = nlohmann::json::array();
  for (const Diagnostic& d : diags) {
    nlohmann::json result = {
        {"ruleId", d.code},
        {"level", d.severity == Severity::Warning ? "warning" : "error"},
        {"message", {{"text", d.message}}},
        {"locations", nlohmann::json::array({sarif_location(sources, d.range)})}};
    auto it = rule_index.find(d.code);
    if (it != rule_index.end()) result["ruleIndex"] = it->second;
    if (!d.notes.empty() || !d.context.empty()) {
      nlohmann::json related = nlohmann::json::array();
      int id = 1;
      for (const DiagnosticNote& n : all_notes(d)) {
        nlohmann::json loc = sarif_location(sources, n.range, n.message);
        loc["id"] = id++;
        related.push_back(loc);
      }
      result["relatedLocations"] = related;
    }
    results.push_back(result);
  }
  nlohmann::json sarif = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs",
       nlohmann::json::array({{{"tool",
                                {{"driver",
                                  {{"name", "orchc"},
                                   {"informationUri", "docs/diagnostics.md"},
                                   {"rules", rules}}}}},
                               {"results", results}}})}};
  return sarif.dump(2) + "\n";
}

}  // namespace

Diagnostic& DiagnosticEngine::report(Severity severity, std::string code, SourceRange range,
                                     std::string message) {
  auto key = std::make_tuple(static_cast<int>(severity), code, range.file, range.begin.line,
                             range.begin.col, range.end.line, range.end.col, message);
  if (!seen_.insert(std::move(key)).second) {
    discarded_ = Diagnostic{};
    return discarded_;
  }
  if (severity == Severity::Error) ++error_count_;
  diags_.push_back({severity, std::move(code), range, std::move(message), {}, {}});
  Diagnostic& d = diags_.back();
  // Innermost first. A deep chain shows its innermost frames and its outermost one, which
  // says how many it leaves out.
  const size_t n = context_.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > kMaxContextNotes && i + 1 == kMaxContextNotes) {
      DiagnosticNote last = context_.front();
      last.message += " (" + std::to_string(n - kMaxContextNotes) + " more in between are not shown)";
      d.context.push_back(std::move(last));
      break;
    }
    d.context.push_back(context_[n - 1 - i]);
  }
  return d;
}

Diagnostic& DiagnosticEngine::error(DiagCode code, SourceRange range, std::string message) {
  return report(Severity::Error, to_string(code), range, std::move(message));
}

Diagnostic& DiagnosticEngine::warning(DiagCode code, SourceRange range, std::string message) {
  return report(Severity::Warning, to_string(code), range, std::move(message));
}

Diagnostic& DiagnosticEngine::add(Diagnostic d) {
  Diagnostic& added = report(d.severity, std::move(d.code), d.range, std::move(d.message));
  if (&added != &discarded_) added.notes = std::move(d.notes);
  return added;
}

std::vector<Diagnostic> DiagnosticEngine::sorted() const {
  std::vector<Diagnostic> out = diags_;
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.range.file, a.range.begin.line, a.range.begin.col) <
           std::tie(b.range.file, b.range.begin.line, b.range.begin.col);
  });
  return out;
}

const char* to_string(DiagCode code) {
  // kCodes and DiagCode are made from the same list, in the same order.
  return kCodes[static_cast<size_t>(code)].code;
}

std::string describe_code(const std::string& code) {
  for (const CodeInfo& c : kCodes)
    if (code == c.code) return c.summary;
  return {};
}

std::vector<std::string> all_diagnostic_codes() {
  std::vector<std::string> out;
  for (const CodeInfo& c : kCodes) out.push_back(c.code);
  return out;
}

std::string format_diagnostics(const std::vector<Diagnostic>& diags, const SourceManager& sources,
                               DiagnosticFormat format, bool color) {
  if (format == DiagnosticFormat::Sarif) return render_sarif(diags, sources);
  if (format == DiagnosticFormat::Json) {
    nlohmann::json list = nlohmann::json::array();
    for (const Diagnostic& d : diags) {
      nlohmann::json notes = nlohmann::json::array();
      for (const DiagnosticNote& n : all_notes(d))
        notes.push_back({{"message", n.message}, {"location", json_range(sources, n.range)}});
      list.push_back({{"severity", severity_name(d.severity)},
                      {"code", d.code},
                      {"message", d.message},
                      {"location", json_range(sources, d.range)},
                      {"notes", notes}});
    }
    return nlohmann::json({{"diagnostics", list}}).dump(2) + "\n";
  }
  std::ostringstream out;
  size_t errors = 0, warnings = 0;
  for (const Diagnostic& d : diags) {
    (d.severity == Severity::Error ? errors : warnings) += 1;
    render_text(out, sources, d.range, d.severity, d.code, d.message, color);
    for (const DiagnosticNote& n : all_notes(d))
      render_text(out, sources, n.range, Severity::Note, "", n.message, color);
  }
  if (errors || warnings) {
    if (errors) out << errors << (errors == 1 ? " error" : " errors");
    if (errors && warnings) out << " and ";
    if (warnings) out << warnings << (warnings == 1 ? " warning" : " warnings");
    out << " generated.\n";
  }
  return out.str();
}

}  // namespace orch
