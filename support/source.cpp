#include "support/source.h"

namespace orch {

SourceManager::SourceManager() { files_.push_back(SourceFile{"<none>", "", {0}}); }

uint32_t SourceManager::add(std::string path, std::string text) {
  SourceFile f{std::move(path), std::move(text), {0}};
  for (uint32_t i = 0; i < f.text.size(); ++i)
    if (f.text[i] == '\n') f.line_starts.push_back(i + 1);
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

uint32_t SourceManager::byte_column(uint32_t file, uint32_t line, size_t cp) const {
  std::string_view text = line_text(file, line);
  size_t byte = 0;
  for (size_t seen = 0; seen < cp && byte < text.size(); ++seen) {
    unsigned char c = static_cast<unsigned char>(text[byte]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    byte += len;
  }
  if (byte < cp && byte >= text.size()) byte += cp - byte;  // past the end (EOF, newline)
  return static_cast<uint32_t>(byte) + 1;
}

std::string SourceManager::describe(const SourceRange& range) const {
  if (!range.valid() || range.file >= files_.size()) return "<unknown>";
  return files_[range.file].path + ":" + std::to_string(range.begin.line) + ":" +
         std::to_string(range.begin.col);
}

}  // namespace orch
