// The example pipelines (examples/): every example checks clean, and every file in
// examples/errors/ is rejected with its first diagnostic an error with the code its header
// names (`// error-code: E0NNN`, the second line) on a line it names (`// error-line: N [M]`,
// the first). Both iterate their folder, so a new example is tested without touching this
// file; each file runs as its own SUBCASE, so a failure names it.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/check.h"
#include "tests/test_support.h"

namespace orch {
namespace {

struct SpecCheck {
  SourceManager sources;
  DiagnosticEngine diags;
  std::string text() const {
    return format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  }
};

std::unique_ptr<SpecCheck> check_spec_file(const std::string& path) {
  auto c = std::make_unique<SpecCheck>();
  CheckOptions options;
  options.targets_dir = ORCH_TEST_TARGETS_DIR;
  check_file(path, c->sources, options, c->diags);
  return c;
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// The lines named by the header `// error-line: N [M ...]` on the file's first line; empty if
// the header is missing or names no line.
std::vector<uint32_t> expected_error_lines(const std::string& text) {
  const std::string first_line = text.substr(0, text.find('\n'));
  const std::string tag = "// error-line:";
  if (first_line.rfind(tag, 0) != 0) return {};
  std::istringstream in(first_line.substr(tag.size()));
  std::vector<uint32_t> lines;
  uint32_t n = 0;
  while (in >> n) lines.push_back(n);
  return lines;
}

// The code named by the header's second line, `// error-code: E0NNN`; empty if missing.
std::string expected_error_code(const std::string& text) {
  const size_t second = text.find('\n') + 1;
  const std::string line = text.substr(second, text.find('\n', second) - second);
  const std::string tag = "// error-code: ";
  return line.rfind(tag, 0) == 0 ? line.substr(tag.size()) : std::string();
}

}  // namespace

TEST_SUITE("examples") {

TEST_CASE("examples check with no diagnostics") {
  const std::vector<std::string> files =
      test::files_in(test::examples_dir(), ".orch");
  REQUIRE(!files.empty());
  for (const std::string& path : files) {
    SUBCASE(file_name(path).c_str()) {
      auto c = check_spec_file(path);
      CHECK(c->text() == "");
    }
  }
}

TEST_CASE("example error files are rejected with the code and at the line their header names") {
  const std::vector<std::string> files = test::files_in(test::examples_dir() + "/errors", ".orch");
  REQUIRE(!files.empty());
  for (const std::string& path : files) {
    SUBCASE(file_name(path).c_str()) {
      // CHECK, not REQUIRE, in here: a fatal failure would end the test case and leave the
      // files after this one untested.
      const std::string source = test::read_file(path);
      const std::vector<uint32_t> lines = expected_error_lines(source);
      const std::string code = expected_error_code(source);
      auto c = check_spec_file(path);
      const std::string text = c->text();
      CAPTURE(text);
      const std::vector<Diagnostic> sorted = c->diags.sorted();
      if (lines.empty()) {
        FAIL_CHECK("the first line must be `// error-line: N [M]`");
      } else if (code.empty()) {
        FAIL_CHECK("the second line must be `// error-code: E0NNN`");
      } else if (sorted.empty()) {
        FAIL_CHECK("accepted, but it must be rejected");
      } else {
        const Diagnostic& first = sorted.front();
        CHECK(first.severity == Severity::Error);
        CHECK(first.code == code);
        // In the file itself (not a located-nowhere diagnostic), on a line the header names.
        CHECK(first.range.valid());
        CHECK(c->sources.path(first.range.file) == path);
        const uint32_t line_of_first = first.range.begin.line;
        CAPTURE(line_of_first);
        bool on_named_line = false;
        for (uint32_t line : lines) on_named_line |= line_of_first == line;
        CHECK(on_named_line);
      }
    }
  }
}

}  // TEST_SUITE("examples")

}  // namespace orch
