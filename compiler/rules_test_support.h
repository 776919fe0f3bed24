// What the rules tests (compiler/rules_*test.cpp) share: checking a pipeline in memory as orchc
// does, applying edits to it, a target profile with some limits changed, and the table of
// cases most rules take: a pipeline that breaks the rule, the full text orchc prints for it, and
// the closest pipeline that obeys it (edits of the failing one), which must check clean.
#pragma once

#include <doctest/doctest.h>

#include <initializer_list>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/check.h"
#include "tests/test_support.h"

namespace orch {
namespace {

struct Checked {
  SourceManager sources;
  DiagnosticEngine diags;
  CheckResult result;

  // Exactly what `orchc --check --color=never` prints on stderr.
  std::string text() const {
    return format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
  }
  // "E0101 E0101": the codes, sorted by place; for cases that cannot pin the whole text.
  std::string codes() const {
    std::string out;
    for (const Diagnostic& d : diags.sorted()) out += (out.empty() ? "" : " ") + d.code;
    return out;
  }
};

// Checks `program` as the file t.orch (in memory), the way orchc does, against `target`
// (a profile name or a .yaml path; empty: the pipeline's own `target` line, else sm_90).
inline std::unique_ptr<Checked> check(const std::string& program, const std::string& target = "",
                               const std::string& path = "t.orch") {
  auto c = std::make_unique<Checked>();
  CheckOptions options;
  options.target_override = target;
  options.targets_dir = ORCH_TEST_TARGETS_DIR;
  c->result = check_text(path, program, c->sources, options, c->diags);
  return c;
}

inline std::string diagnostics_of(const std::string& program, const std::string& target = "") {
  return check(program, target)->text();
}

// `program` with each edit (from, to) applied in order. Each `from` must occur exactly once,
// so that a fix can never silently apply nowhere (or in two places).
template <class Edits>
std::string fix_with(std::string program, const Edits& edits) {
  for (const auto& [from, to] : edits) {
    size_t at = program.find(from);
    if (at == std::string::npos || program.find(from, at + 1) != std::string::npos)
      throw std::logic_error(std::string("edit must match exactly once: ") + from);
    program.replace(at, std::string(from).size(), to);
  }
  return program;
}
inline std::string fix(std::string program, std::initializer_list<std::pair<const char*, const char*>> edits) {
  return fix_with(std::move(program), edits);
}

// A complete target profile, "test_profile", with sm_90's limits and some keys changed, written
// to a temporary directory for CheckOptions::target_override.
class TestProfile {
 public:
  explicit TestProfile(std::initializer_list<std::pair<std::string, std::string>> changes)
      : dir_("rules") {
    std::map<std::string, std::string> values = {
        {"name", "test_profile"},
        {"arch", "sm_90"},
        {"compute_capability", "90"},
        {"max_threads_per_block", "1024"},
        {"max_block_dim", "[1024, 1024, 64]"},
        {"max_grid_dim", "[2147483647, 65535, 65535]"},
        {"max_shared_bytes_per_block", "49152"},
        {"max_shared_bytes_per_block_optin", "232448"},
        {"max_sm_count", "132"},
        {"max_threads_per_sm", "2048"},
        {"max_blocks_per_sm", "32"},
        {"max_shared_bytes_per_sm", "233472"},
        {"reserved_shared_bytes_per_block", "1024"},
        {"shared_allocation_unit", "128"},
        {"max_registers_per_block", "65536"},
        {"max_registers_per_sm", "65536"},
        {"register_allocation_unit", "256"},
        {"register_file_partitions", "4"},
        {"max_cluster_size", "8"},
        {"max_fire_and_forget_launches", "120"},
        {"max_tail_launches", "255"},
        {"max_self_tail_launches", "1"},
        {"max_switch_cases", "1024"},
        {"supports_if", "true"},
        {"supports_if_else", "true"},
        {"supports_while", "true"},
        {"supports_switch", "true"},
        {"supports_device_launch", "true"},
        {"programmatic_dependent_launch", "true"},
    };
    for (const auto& [key, value] : changes) {
      if (!values.count(key)) throw std::logic_error("no profile key " + key);
      values[key] = value;
    }
    std::string yaml;
    for (const auto& [key, value] : values) yaml += key + ": " + value + "\n";
    path_ = dir_.file("test_profile.yaml");
    test::write_file(path_, yaml);
  }
  const std::string& path() const { return path_; }

 private:
  test::TempDir dir_;
  std::string path_;
};

// One rule's case: the failing pipeline, exactly what `orchc --check` prints for it (file:line:col,
// code, message, source line, caret and notes), and its closest fix.
struct RuleCase {
  const char* name;      // "E0101: a buffer that is never declared"
  const char* program;   // t.orch, which breaks the rule
  const char* expected;  // the diagnostics, in full
  const char* fix_why;   // the closest valid pipeline, in words
  std::vector<std::pair<const char*, const char*>> fix;  // ... and as edits of `program`
};

// Each case: the program gives exactly `expected`, and with its edits applied checks clean.
template <size_t N>
void check_rule_cases(const RuleCase (&cases)[N]) {
  for (const RuleCase& c : cases) {
    INFO(c.name);
    CHECK(diagnostics_of(c.program) == c.expected);
    INFO(c.fix_why);
    std::string fixed;
    try {
      fixed = fix_with(c.program, c.fix);
    } catch (const std::exception& e) {
      FAIL_CHECK(e.what());
      continue;
    }
    CHECK(diagnostics_of(fixed) == "");
  }
}

}  // namespace
}  // namespace orch
