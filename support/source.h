// Source files and positions. Every AST node, DAG node and diagnostic carries a SourceRange,
// so any message the tools print can point at the text the user wrote.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace orch {

// 1-based line and column; column counts bytes. A range is [begin, end) on one or more lines.
struct SourcePos {
  uint32_t line = 0;
  uint32_t col = 0;
};

struct SourceRange {
  uint32_t file = 0;  // index into SourceManager; 0 is "no file"
  SourcePos begin;
  SourcePos end;

  bool valid() const { return file != 0 && begin.line != 0; }
};

struct SourceFile {
  std::string path;
  std::string text;
  std::vector<uint32_t> line_starts;  // byte offset of each line's first character
  // For each line that is not pure ASCII, the byte offset (within the line) of each code
  // point, so byte_column() takes constant time on any line (a 1 MB single-line file has
  // tens of thousands of tokens, each needing a column). ASCII lines need no table.
  std::vector<uint32_t> wide_line_index;   // per line: 0, or 1 + index into wide_lines
  std::vector<std::vector<uint32_t>> wide_lines;
};

// Owns the text of every file a compilation read, so ranges stay cheap (ids, not strings).
class SourceManager {
 public:
  SourceManager();
  uint32_t add(std::string path, std::string text);
  const SourceFile& file(uint32_t id) const { return files_.at(id); }
  const std::string& path(uint32_t id) const { return files_.at(id).path; }
  // Ids run from 1 to count() - 1 (0 is "no file").
  uint32_t count() const { return static_cast<uint32_t>(files_.size()); }
  // The text of a 1-based line without its newline; empty if out of range.
  std::string_view line_text(uint32_t file, uint32_t line) const;
  // At most `width` bytes of a line around byte column `col` (1-based), cut at UTF-8
  // boundaries, and the byte offset of the excerpt in the line; the whole line when it fits.
  // Diagnostics and generated comments show this, so that one megabyte-long line is not
  // printed once per error.
  struct Excerpt {
    std::string_view text;
    uint32_t offset = 0;
    bool cut_before = false, cut_after = false;
  };
  Excerpt line_excerpt(uint32_t file, uint32_t line, uint32_t col, size_t width) const;
  // ANTLR counts columns in code points; orch counts bytes (what editors and clang show for
  // ASCII, and what carets need). Converts a 0-based code point column to a 1-based byte one,
  // in constant time.
  uint32_t byte_column(uint32_t file, uint32_t line, size_t code_point_col) const;
  // "path:line:col" for messages; "<unknown>" for an invalid range.
  std::string describe(const SourceRange& range) const;

 private:
  std::vector<SourceFile> files_;
};

}  // namespace orch
