#include "lowering/nvrtc_log.h"

#include <algorithm>

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

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

uint32_t to_u32(std::string_view digits) {
  if (digits.size() > 9) return 0;  // no source has a billion lines: treat as unknown
  uint32_t v = 0;
  for (char c : digits) v = v * 10 + uint32_t(c - '0');
  return v;
}

struct Header {
  std::string file;
  uint32_t line = 0;
  std::string kind;  // "error", "warning", "catastrophic error", ...
  std::string number;
  std::string text;
};

// `file(LINE): KIND[ #NUMBER]: text`, parsed by hand: std::regex recurses per character and
// could overflow the stack on the very long source lines NVRTC echoes.
bool parse_header(std::string_view line, Header* h) {
  static const char* const kKinds[] = {
      "catastrophic error", "internal error", "error", "warning", "note", "remark"};
  for (size_t close = line.find("): "); close != std::string_view::npos;
       close = line.find("): ", close + 1)) {
    size_t open = line.rfind('(', close);
    if (open == std::string_view::npos || open == 0) continue;
    std::string_view digits = line.substr(open + 1, close - open - 1);
    if (!all_digits(digits)) continue;
    std::string_view rest = line.substr(close + 3);
    for (const char* kind : kKinds) {
      std::string_view k(kind);
      if (rest.substr(0, k.size()) != k) continue;
      std::string_view after = rest.substr(k.size());
      std::string_view number;
      if (after.substr(0, 2) == " #") {
        size_t end = after.find(':');
        if (end == std::string_view::npos) continue;
        number = after.substr(2, end - 2);
        after = after.substr(end);
      }
      if (after.substr(0, 2) != ": ") continue;
      h->file = std::string(line.substr(0, open));
      h->line = to_u32(digits);
      h->kind = kind;
      h->number = std::string(number);
      h->text = std::string(after.substr(2));
      return true;
    }
  }
  return false;
}

// `detected during instantiation of "..." at line 7 [of file.cu]`, possibly `detected during:`
// followed by indented `instantiation of ... at line N` lines.
bool parse_context_line(std::string_view trimmed, NvrtcLogNote* note, const std::string& file) {
  if (!starts_with(trimmed, "detected during") && !starts_with(trimmed, "instantiation of") &&
      !starts_with(trimmed, "processing of"))
    return false;
  note->file = file;
  note->text = std::string(trimmed);
  size_t at = trimmed.rfind(" at line ");
  if (at == std::string_view::npos) return true;
  std::string_view tail = trimmed.substr(at + 9);
  size_t digits_end = 0;
  while (digits_end < tail.size() && tail[digits_end] >= '0' && tail[digits_end] <= '9')
    ++digits_end;
  std::string_view rest = tail.substr(digits_end);
  if (digits_end == 0 || !(rest.empty() || rest.substr(0, 4) == " of ")) return true;
  note->line = to_u32(tail.substr(0, digits_end));
  if (!rest.empty()) note->file = std::string(rest.substr(4));
  note->text = std::string(trimmed.substr(0, at));
  return true;
}

}  // namespace

std::vector<NvrtcLogMessage> parse_nvrtc_log(std::string_view log) {
  std::vector<NvrtcLogMessage> out;
  std::vector<std::string_view> lines = split_lines(log);
  // The message (or its last note) that a following caret line gives a column to.
  enum class Pending { None, Message, Note } pending = Pending::None;
  bool detail_allowed = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    Header h;
    if (parse_header(line, &h)) {
      if ((h.kind == "note" || h.kind == "remark") && !out.empty()) {
        out.back().notes.push_back({h.file, h.line, 0, h.text});
        pending = Pending::Note;
        detail_allowed = false;
        continue;
      }
      NvrtcLogMessage msg;
      msg.file = std::move(h.file);
      msg.line = h.line;
      msg.severity = h.kind == "warning"                      ? Severity::Warning
                     : h.kind == "note" || h.kind == "remark" ? Severity::Note
                                                              : Severity::Error;
      msg.number = std::move(h.number);
      msg.text = std::move(h.text);
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
  if (!source.segments.empty()) {
    // Joined code: the statement of the kernel that holds the line (its columns are orchc's).
    const KernelSource::Segment* at = &source.segments.front();
    for (const KernelSource::Segment& s : source.segments)
      if (s.first_line <= line) at = &s;
    return at->origin;
  }
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
  // The entries' name expressions, for a message that one of them names nothing.
  std::vector<std::string> exprs;
  if (source.entries.empty()) exprs.push_back(source.name);
  for (const KernelEntry& e : source.entries) {
    const std::string& expr = e.entry.empty() ? e.name : e.entry;
    if (std::find(exprs.begin(), exprs.end(), expr) == exprs.end()) exprs.push_back(expr);
  }
  std::string entry;
  for (const std::string& e : exprs) entry += (entry.empty() ? "" : "\" or \"") + e;
  bool name_map_reported = false;
  for (const NvrtcLogMessage& m : messages) {
    bool is_error = m.severity == Severity::Error;
    if (m.severity == Severity::Note) continue;
    if ((is_error && !errors) || (!is_error && !warnings)) continue;
    Diagnostic d;
    d.severity = is_error ? Severity::Error : Severity::Warning;
    d.code = to_string(is_error ? DiagCode::E0901 : DiagCode::W0901);
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
