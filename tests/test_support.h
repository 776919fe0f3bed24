// Helpers shared by the *_test.cpp files: where the example pipelines are, reading files,
// parsing a string the way orchc parses a file, and rendering diagnostics as orchc prints them.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/parse.h"
#include "support/diagnostics.h"
#include "support/source.h"

namespace orch::test {

// The checkout's examples/ (with errors/ in it), as CMake compiled it in.
inline std::string examples_dir() {
  return ORCH_EXAMPLES_DIR;
}

// Throws rather than returning "", so a missing file fails the test that needed it.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

// The files with `extension` in `dir`, sorted so test output is stable. Throws if `dir` does not
// exist: an empty list would make "every example parses" pass vacuously.
inline std::vector<std::string> files_in(const std::string& dir, const std::string& extension) {
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error("no such folder: " + dir);
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == extension)
      out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("orch_" + tag + "_XXXXXX")).string();
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// One parse, with everything needed to look at its result.
struct Parsed {
  SourceManager sources;
  DiagnosticEngine diags;
  uint32_t file = 0;
  std::unique_ptr<ast::Module> module;

  // The diagnostics exactly as `orchc` prints them (text format, no color).
  std::string diagnostics() const {
    return format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  }
  std::string ast() const { return dump_ast(*module, sources); }
};

// Heap-allocated so references to the SourceManager stay valid wherever the result goes.
inline std::unique_ptr<Parsed> parse_string(const std::string& text,
                                            const std::string& path = "test.orch") {
  auto p = std::make_unique<Parsed>();
  p->file = p->sources.add(path, text);
  p->module = parse_module(p->sources, p->file, p->diags);
  return p;
}

inline std::unique_ptr<Parsed> parse_file(const std::string& path) {
  return parse_string(read_file(path), path);
}

// Renders `diags` in the text format against `sources`.
inline std::string render_text(const std::vector<Diagnostic>& diags, const SourceManager& sources) {
  return format_diagnostics(diags, sources, DiagnosticFormat::Text);
}

}  // namespace orch::test
