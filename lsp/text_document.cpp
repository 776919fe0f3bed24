#include "lsp/text_document.h"

#include <algorithm>
#include <cctype>

namespace orch::lsp {

namespace {

// The length of the UTF-8 sequence a lead byte starts, or 1 for a byte that cannot lead one
// (invalid UTF-8 is one unit per byte, so every byte string has positions).
size_t sequence_length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
}

// Bytes of the character at `at` (never past `text`'s end) and its UTF-16 units.
void next_char(std::string_view text, size_t at, size_t* bytes, size_t* units16) {
  size_t n = sequence_length(static_cast<unsigned char>(text[at]));
  if (at + n > text.size()) n = 1;
  for (size_t i = 1; i < n; ++i)
    if ((static_cast<unsigned char>(text[at + i]) & 0xc0) != 0x80) n = 1;
  *bytes = n;
  *units16 = n == 4 ? 2 : 1;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

size_t encoded_length(std::string_view text, PositionEncoding enc) {
  if (enc == PositionEncoding::Utf8) return text.size();
  size_t units = 0;
  for (size_t at = 0; at < text.size();) {
    size_t bytes, u16;
    next_char(text, at, &bytes, &u16);
    at += bytes;
    units += u16;
  }
  return units;
}

TextDocument::TextDocument(std::string text, int64_t version) : text_(std::move(text)), version_(version) {
  index_lines();
}

void TextDocument::index_lines() {
  line_starts_.assign(1, 0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

std::string_view TextDocument::line(size_t l) const {
  if (l >= line_starts_.size()) return {};
  size_t begin = line_starts_[l];
  size_t end = l + 1 < line_starts_.size() ? line_starts_[l + 1] - 1 : text_.size();
  std::string_view s(text_);
  s = s.substr(begin, end - begin);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);  // CRLF: the CR is the line break's
  return s;
}

size_t TextDocument::offset(Position p, PositionEncoding enc) const {
  if (p.line < 0) return 0;
  if (static_cast<uint64_t>(p.line) >= line_starts_.size()) return text_.size();
  std::string_view l = line(static_cast<size_t>(p.line));
  const size_t begin = line_starts_[static_cast<size_t>(p.line)];
  if (p.character <= 0) return begin;
  if (enc == PositionEncoding::Utf8) return begin + std::min<uint64_t>(p.character, l.size());
  size_t at = 0;
  int64_t units = 0;
  while (at < l.size() && units < p.character) {
    size_t bytes, u16;
    next_char(l, at, &bytes, &u16);
    at += bytes;
    units += static_cast<int64_t>(u16);
  }
  return begin + at;
}

Position TextDocument::position(size_t off, PositionEncoding enc) const {
  off = std::min(off, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
  const size_t l = static_cast<size_t>(it - line_starts_.begin()) - 1;
  std::string_view text = line(l);
  size_t in_line = std::min(off - line_starts_[l], text.size());
  // Back onto the start of a UTF-8 sequence.
  while (in_line > 0 && in_line < text.size() && (static_cast<unsigned char>(text[in_line]) & 0xc0) == 0x80)
    --in_line;
  return {static_cast<int64_t>(l), static_cast<int64_t>(encoded_length(text.substr(0, in_line), enc))};
}

SourcePos TextDocument::source_pos(Position p, PositionEncoding enc) const {
  size_t off = offset(p, enc);
  Position byte = position(off, PositionEncoding::Utf8);
  return {static_cast<uint32_t>(byte.line + 1), static_cast<uint32_t>(byte.character + 1)};
}

Position TextDocument::lsp_position(SourcePos p, PositionEncoding enc) const {
  if (p.line == 0) return {0, 0};
  return position(offset({static_cast<int64_t>(p.line) - 1, p.col > 0 ? static_cast<int64_t>(p.col) - 1 : 0},
                         PositionEncoding::Utf8),
                  enc);
}

Range TextDocument::lsp_range(const SourceRange& r, PositionEncoding enc) const {
  if (!r.valid()) return {};
  Range out{lsp_position(r.begin, enc), lsp_position(r.end.line ? r.end : r.begin, enc)};
  if (out.end.line < out.start.line || (out.end.line == out.start.line && out.end.character < out.start.character))
    out.end = out.start;
  return out;
}

void TextDocument::replace(Range range, const std::string& text, PositionEncoding enc) {
  size_t a = offset(range.start, enc), b = offset(range.end, enc);
  if (b < a) std::swap(a, b);
  text_.replace(a, b - a, text);
  index_lines();
}

void TextDocument::set_text(std::string text) {
  text_ = std::move(text);
  index_lines();
}

std::string uri_to_path(const std::string& uri) {
  const std::string scheme = "file://";
  if (uri.compare(0, scheme.size(), scheme) != 0) return uri;
  std::string rest = uri.substr(scheme.size());
  // file://host/path: only an empty host or localhost is this machine.
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return uri;
  std::string host = rest.substr(0, slash);
  if (!host.empty() && host != "localhost") return uri;
  rest = rest.substr(slash);
  std::string out;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size()) {
      int hi = hex_value(rest[i + 1]), lo = hex_value(rest[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += rest[i];
  }
  return out;
}

std::string path_to_uri(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace orch::lsp
