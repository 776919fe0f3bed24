// Helpers for orch_lsp_tests: the checkout's files, and positions by the text they point at.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "support/source.h"

namespace orch::lsp::test {

inline std::string source_dir() { return ORCH_LSP_SOURCE_DIR; }

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string example(const std::string& name) { return source_dir() + "/examples/" + name; }

// The 1-based position of the `nth` (0-based) occurrence of `needle` in `text`, plus `shift`
// bytes.
inline SourcePos pos_of(const std::string& text, const std::string& needle, int nth = 0, size_t shift = 0) {
  size_t at = text.find(needle);
  for (int i = 0; i < nth && at != std::string::npos; ++i) at = text.find(needle, at + 1);
  if (at == std::string::npos) throw std::runtime_error("not found: " + needle);
  at += shift;
  SourcePos p{1, 1};
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.col = 1;
    } else {
      ++p.col;
    }
  }
  return p;
}

}  // namespace orch::lsp::test
