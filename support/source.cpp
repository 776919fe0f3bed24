#include "support/source.h"

#include <algorithm>

namespace orch {

namespace {

// The length of the UTF-8 sequence a lead byte starts; 1 for a byte that cannot lead one (the
// parser refuses invalid UTF-8 before it asks for columns, so this only has to terminate).
size_t sequence_length(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
}

bool is_continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

}  // namespace

SourceManager::SourceManager() { files_.push_back(SourceFile{"<none>", "", {0}, {0}, {}}); }

uint32_t SourceManager::add(std::string path, std::string text) {
  SourceFile f{std::move(path), std::move(text), {0}, {}, {}};
  const std::string& t = f.text;
  // One pass: line starts, and a code point table for each line that is not pure ASCII.
  size_t line_begin = 0;
  bool wide = false;
  auto end_line = [&](size_t line_end) {
    if (!wide) {
      f.wide_line_index.push_back(0);
      return;
    }
    std::vector<uint32_t> starts;
    for (size_t b = line_begin; b < line_end;) {
      starts.push_back(static_cast<uint32_t>(b - line_begin));
      b += sequence_length(static_cast<unsigned char>(t[b]));
    }
    f.wide_lines.push_back(std::move(starts));
    f.wide_line_index.push_back(static_cast<uint32_t>(f.wide_lines.size()));
  };
  for (size_t i = 0; i < t.size(); ++i) {
    if (static_cast<unsigned char>(t[i]) >= 0x80) wide = true;
    if (t[i] == '\n') {
      end_line(i);
      line_begin = i + 1;
      wide = false;
      f.line_starts.push_back(static_cast<uint32_t>(i + 1));
    }
  }
  end_line(t.size());
  files_.push_back(std::move(f));
  return static_cast<uint32_t>(files_.size() - 1);
}

std::string_view SourceManager::line_text(uint32_t file, uint32_t line) const {
  if (file >= files_.size()) return {};
  const SourceFile& f = files_[file];
  if (line == 0 || line > f.line_starts.size()) return {};
  uint32_t begin = f.line_starts[line - 1];
  uint32_t end = line < f.line_starts.size() ? f.line_starts[line] : f.text.size();
  std::string_view text(f.text);
  text = text.substr(begin, end - begin);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

SourceManager::Excerpt SourceManager::line_excerpt(uint32_t file, uint32_t line, uint32_t col,
                                                   size_t width) const {
  Excerpt out;
  out.text = line_text(file, line);
  if (out.text.size() <= width) return out;
  // Centre the window on the column, then move both ends back onto code point starts.
  size_t at = col > 0 ? std::min<size_t>(col - 1, out.text.size()) : 0;
  size_t begin = at > width / 2 ? at - width / 2 : 0;
  begin = std::min(begin, out.text.size() - width);
  size_t end = begin + width;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(out.text[i]); };
  while (begin > 0 && is_continuation(byte(begin))) --begin;
  while (end < out.text.size() && is_continuation(byte(end))) --end;
  out.cut_before = begin > 0;
  out.cut_after = end < out.text.size();
  out.offset = static_cast<uint32_t>(begin);
  out.text = out.text.substr(begin, end - begin);
  return out;
}

uint32_t SourceManager::byte_column(uint32_t file, uint32_t line, size_t cp) const {
  if (file >= files_.size()) return static_cast<uint32_t>(cp) + 1;
  const SourceFile& f = files_[file];
  if (line == 0 || line > f.wide_line_index.size() || f.wide_line_index[line - 1] == 0)
    return static_cast<uint32_t>(cp) + 1;  // ASCII: code points are bytes
  const std::vector<uint32_t>& starts = f.wide_lines[f.wide_line_index[line - 1] - 1];
  if (cp < starts.size()) return starts[cp] + 1;
  // Past the end (EOF, the newline): count on in bytes from the end of the line's text.
  size_t length = line_text(file, line).size();
  return static_cast<uint32_t>(length + (cp - starts.size())) + 1;
}

std::string SourceManager::describe(const SourceRange& range) const {
  if (!range.valid() || range.file >= files_.size()) return "<unknown>";
  return files_[range.file].path + ":" + std::to_string(range.begin.line) + ":" +
         std::to_string(range.begin.col);
}

}  // namespace orch
