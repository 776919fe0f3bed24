#include "lowering/nvrtc_log.h"

#include <regex>

namespace orch {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A line holding only blanks and one `^`.
bool is_caret_line(std::string_view line, size_t* caret) {
  size_t pos = line.find('^');
  if (pos == std::string_view::npos) return false;
  for (size_t i = 0; i < line.size(); ++i)
    if (i != pos && line[i] != ' ' && line[i] != '\t') return false;
  *caret = pos;
  return true;
}

uint32_t to_u32(const std::string& digits) {
  // The regexes only pass digits; clamp absurd values rather than overflow.
  if (digits.size() > 9) return 0;
  return static_cast<uint32_t>(std::stoul(digits));
}

// `detected during instantiation of "..." at line 7 [of file.cu]`, possibly `detected during:`
// followed by indented `instantiation of ... at line N` lines.
bool parse_context_line(std::string_view trimmed, NvrtcLogNote* note, const std::string& file) {
  if (!starts_with(trimmed, "detected during") && !starts_with(trimmed, "instantiation of") &&
      !starts_with(trimmed, "processing of"))
    return false;
  static const std::regex at_line(R"(^(.*) at line ([0-9]+)(?: of (.+))?$)");
  std::string text(trimmed);
  std::smatch m;
  note->file = file;
  if (std::regex_match(text, m, at_line)) {
    note->text = m[1].str();
    note->line = to_u32(m[2].str());
    if (m[3].matched) note->file = m[3].str();
  } else {
    note->text = text;
  }
  return true;
}

}  // namespace

std::vector<NvrtcLogMessage> parse_nvrtc_log(std::string_view log) {
  static const std::regex header(
      R"(^(.+)\(([0-9]+)\): (catastrophic error|internal error|error|warning|note|remark)(?: #([0-9A-Za-z-]+))?: (.*)$)");
  std::vector<NvrtcLogMessage> out;
  std::vector<std::string_view> lines = split_lines(log);
  // The message (or its last note) that a following caret line gives a column to.
  enum class Pending { None, Message, Note } pending = Pending::None;
  bool detail_allowed = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    std::string text(line);
    std::smatch m;
    if (std::regex_match(text, m, header)) {
      std::string kind = m[3].str();
      if ((kind == "note" || kind == "remark") && !out.empty()) {
        out.back().notes.push_back({m[1].str(), to_u32(m[2].str()), 0, m[5].str()});
        pending = Pending::Note;
        detail_allowed = false;
        continue;
      }
      NvrtcLogMessage msg;
      msg.file = m[1].str();
      msg.line = to_u32(m[2].str());
      msg.severity = kind == "warning"                    ? Severity::Warning
                     : kind == "note" || kind == "remark" ? Severity::Note
                                                          : Severity::Error;
      msg.number = m[4].str();
      msg.text = m[5].str();
      out.push_back(std::move(msg));
      pending = Pending::Message;
      detail_allowed = true;
      continue;
    }
    if (out.empty()) continue;
    size_t caret = 0;
    if (is_caret_line(line, &caret)) {
      // The source line above the caret is echoed with two blanks of indent.
      uint32_t col = caret >= 2 ? uint32_t(caret - 1) : 1;
      if (pending == Pending::Message && out.back().col == 0) out.back().col = col;
      if (pending == Pending::Note && out.back().notes.back().col == 0)
        out.back().notes.back().col = col;
      pending = Pending::None;
      detail_allowed = false;
      continue;
    }
    std::string_view trimmed = trim(line);
    if (trimmed.empty()) {
      detail_allowed = false;
      continue;
    }
    NvrtcLogNote note;
    if (parse_context_line(trimmed, &note, out.back().file)) {
      if (note.text == "detected during:") continue;  // a header for the lines that follow
      out.back().notes.push_back(std::move(note));
      pending = Pending::None;
      detail_allowed = false;
      continue;
    }
    size_t ignored = 0;
    bool echo = i + 1 < lines.size() && is_caret_line(lines[i + 1], &ignored);
    // Detail lines (`operand types are: ...`) sit indented between the header and the echo.
    if (!echo && detail_allowed && line.front() == ' ')
      out.back().text += "; " + std::string(trimmed);
  }
  return out;
}

SourceRange map_kernel_location(const KernelSource& source, uint32_t line, uint32_t col) {
  SourceRange r;
  r.file = source.origin.file;
  if (line == 0) return source.origin;
  uint32_t first_line = source.first_line_in_origin ? source.first_line_in_origin : 1;
  uint32_t first_col = source.first_col_in_origin ? source.first_col_in_origin : 1;
  // The extent: the identifier at the column in the kernel's own text, else one character.
  uint32_t length = 1;
  if (col > 0) {
    size_t begin = 0;
    for (uint32_t l = 1; l < line && begin != std::string::npos; ++l) {
      begin = source.code.find('\n', begin);
      if (begin != std::string::npos) ++begin;
    }
    if (begin != std::string::npos) {
      size_t end = source.code.find('\n', begin);
      std::string_view text =
          std::string_view(source.code)
              .substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      auto ident = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_';
      };
      size_t pos = col - 1;
      if (pos < text.size() && ident(text[pos])) {
        size_t e = pos;
        while (e < text.size() && ident(text[e])) ++e;
        length = static_cast<uint32_t>(e - pos);
      }
    }
  }
  uint32_t c = col == 0 ? 1 : col;
  if (line == 1) c += first_col - 1;
  r.begin = {first_line + line - 1, c};
  r.end = {first_line + line - 1, c + (col == 0 ? 0 : length)};
  return r;
}

std::vector<Diagnostic> nvrtc_log_diagnostics(const std::vector<NvrtcLogMessage>& messages,
                                              const KernelSource& source, bool errors,
                                              bool warnings) {
  std::vector<Diagnostic> out;
  const std::string entry = source.entry.empty() ? source.name : source.entry;
  bool name_map_reported = false;
  for (const NvrtcLogMessage& m : messages) {
    bool is_error = m.severity == Severity::Error;
    if (m.severity == Severity::Note) continue;
    if ((is_error && !errors) || (!is_error && !warnings)) continue;
    Diagnostic d;
    d.severity = is_error ? Severity::Error : Severity::Warning;
    d.code = is_error ? "E0901" : "W0901";
    d.message = m.text;
    if (!m.number.empty()) d.message += " [#" + m.number + "]";
    if (m.file == source.file_name) {
      d.range = map_kernel_location(source, m.line, m.col);
    } else if (m.file == "__nv_name_map") {
      // NVRTC compiles the entry's name expression in a file of its own: the entry is wrong.
      if (name_map_reported) continue;
      name_map_reported = true;
      d.range = source.origin;
      d.message = "entry \"" + entry + "\" of kernel '" + source.name +
                  "' does not name a function in its source: " + m.text;
    } else {
      d.range = source.origin;
      d.message = m.file + ":" + std::to_string(m.line) +
                  (m.col ? ":" + std::to_string(m.col) : std::string()) + ": " + d.message;
    }
    for (const NvrtcLogNote& n : m.notes) {
      SourceRange nr =
          n.file == source.file_name ? map_kernel_location(source, n.line, n.col) : source.origin;
      std::string text = n.text;
      if (n.file != source.file_name && n.line)
        text = n.file + ":" + std::to_string(n.line) + ": " + text;
      d.notes.push_back({nr, std::move(text)});
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace orch
