// An open document as the editor sees it: its text, version and the positions LSP speaks in.
// LSP positions are (line, character) with characters counted in UTF-16 code units unless the
// client accepts UTF-8 (positionEncoding); orch's SourceRange counts bytes from 1. Everything
// converts through byte offsets here, clamping what is out of range: an editor's stale or
// wrong position must never throw or crash the server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/source.h"

namespace orch::lsp {

enum class PositionEncoding { Utf16, Utf8 };

// An LSP position: 0-based line, 0-based character in the negotiated encoding.
struct Position {
  int64_t line = 0;
  int64_t character = 0;
};

struct Range {
  Position start, end;
};

class TextDocument {
 public:
  TextDocument() = default;
  TextDocument(std::string text, int64_t version);

  const std::string& text() const { return text_; }
  int64_t version() const { return version_; }
  size_t line_count() const { return line_starts_.size(); }

  // The byte offset of an LSP position, clamped into the text (a line past the end is the
  // end; a character past the line's end is the line's end, before its newline).
  size_t offset(Position p, PositionEncoding enc) const;
  // The LSP position of a byte offset (clamped); an offset inside a UTF-8 sequence counts as
  // the start of its character.
  Position position(size_t offset, PositionEncoding enc) const;
  // orch's 1-based (line, byte column) for an LSP position, and back.
  SourcePos source_pos(Position p, PositionEncoding enc) const;
  Position lsp_position(SourcePos p, PositionEncoding enc) const;
  Range lsp_range(const SourceRange& r, PositionEncoding enc) const;

  // Replaces [start, end) with `text` (an incremental didChange; start after end is swapped).
  void replace(Range range, const std::string& text, PositionEncoding enc);
  // Replaces everything (a full didChange).
  void set_text(std::string text);
  void set_version(int64_t v) { version_ = v; }

 private:
  void index_lines();
  // The bytes of line `line` (0-based) without its line break.
  std::string_view line(size_t line) const;

  std::string text_;
  int64_t version_ = 0;
  std::vector<size_t> line_starts_{0};
};

// The units `text` takes in the encoding (UTF-16: 2 for a code point past U+FFFF). Invalid
// UTF-8 bytes count one unit each.
size_t encoded_length(std::string_view text, PositionEncoding enc);

// file:// URIs and paths. Other schemes keep the URI as the "path" (the document is then
// checked under that name; `from` files are not found next to it).
std::string uri_to_path(const std::string& uri);
std::string path_to_uri(const std::string& path);

}  // namespace orch::lsp
