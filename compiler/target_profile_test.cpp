// Target profiles: the shipped targets/*.yaml load with their real values, and every way a
// profile can be wrong is an E0111 diagnostic with its exact message, never an exception.
#include "compiler/target_profile.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

#include "tests/test_support.h"

namespace orch {
namespace {

// A complete, valid profile; the bad-profile cases below change one thing in it.
const char* const kGood = R"(# a comment
name: sm_90
arch: sm_90
compute_capability: 90
max_threads_per_block: 1024
max_block_dim: [1024, 1024, 64]
max_grid_dim: [2147483647, 65535, 65535]
max_shared_bytes_per_block: 49152
max_shared_bytes_per_block_optin: 232448
max_sm_count: 132
max_threads_per_sm: 2048
max_blocks_per_sm: 32
max_shared_bytes_per_sm: 233472
reserved_shared_bytes_per_block: 1024
shared_allocation_unit: 128
max_registers_per_block: 65536
max_registers_per_sm: 65536
register_allocation_unit: 256
register_file_partitions: 4
max_cluster_size: 8
max_fire_and_forget_launches: 120
max_tail_launches: 255
max_self_tail_launches: 1
max_switch_cases: 1024
supports_if: true
supports_if_else: true
supports_while: true
supports_switch: true
supports_device_launch: true
programmatic_dependent_launch: true
)";

const char* const kAllKeys[] = {
    "name",
    "arch",
    "compute_capability",
    "max_threads_per_block",
    "max_block_dim",
    "max_grid_dim",
    "max_shared_bytes_per_block",
    "max_shared_bytes_per_block_optin",
    "max_sm_count",
    "max_threads_per_sm",
    "max_blocks_per_sm",
    "max_shared_bytes_per_sm",
    "reserved_shared_bytes_per_block",
    "shared_allocation_unit",
    "max_registers_per_block",
    "max_registers_per_sm",
    "register_allocation_unit",
    "register_file_partitions",
    "max_cluster_size",
    "max_fire_and_forget_launches",
    "max_tail_launches",
    "max_self_tail_launches",
    "max_switch_cases",
    "supports_if",
    "supports_if_else",
    "supports_while",
    "supports_switch",
    "supports_device_launch",
    "programmatic_dependent_launch",
};

// kGood with the line of `key` replaced by `key: value`, or removed when `value` is null.
std::string with(const std::string& key, const char* value) {
  std::istringstream in(kGood);
  std::string line, out;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      found = true;
      if (value) out += key + ": " + value + "\n";
      continue;
    }
    out += line + "\n";
  }
  REQUIRE_MESSAGE(found, "no key " << key << " in kGood");
  return out;
}
std::string without(const std::string& key) { return with(key, nullptr); }

// The messages of every diagnostic, one per line, after checking each is an E0111 error.
std::string messages(const DiagnosticEngine& diags) {
  std::string out;
  for (const Diagnostic& d : diags.all()) {
    CHECK(d.code == "E0111");
    CHECK(d.severity == Severity::Error);
    out += d.message + "\n";
  }
  return out;
}

// Parses `text` as targets/x.yaml and returns the messages; the parse must fail.
std::string bad(const std::string& text) {
  DiagnosticEngine diags;
  auto profile = parse_target_profile(text, "targets/x.yaml", SourceRange{}, diags);
  CHECK_FALSE(profile.has_value());
  CHECK(diags.has_errors());
  return messages(diags);
}

void check_common_limits(const TargetProfile& p) {
  CHECK(p.max_threads_per_block == 1024);
  CHECK(p.max_block_dim[0] == 1024);
  CHECK(p.max_block_dim[1] == 1024);
  CHECK(p.max_block_dim[2] == 64);
  CHECK(p.max_grid_dim[0] == 2147483647);
  CHECK(p.max_grid_dim[1] == 65535);
  CHECK(p.max_grid_dim[2] == 65535);
  CHECK(p.max_shared_bytes_per_block == 49152);
  CHECK(p.max_fire_and_forget_launches == 120);
  CHECK(p.max_tail_launches == 255);
  CHECK(p.max_self_tail_launches == 1);
  CHECK(p.max_switch_cases == 1024);
  CHECK(p.supports_if);
  CHECK(p.supports_if_else);
  CHECK(p.supports_while);
  CHECK(p.supports_switch);
  CHECK(p.supports_device_launch);
}

TargetProfile load_shipped(const std::string& name) {
  DiagnosticEngine diags;
  auto p = load_target_profile(name, {ORCH_TEST_TARGETS_DIR}, SourceRange{}, diags);
  INFO(messages(diags));
  REQUIRE(p.has_value());
  CHECK_FALSE(diags.has_errors());
  return *p;
}

}  // namespace

TEST_SUITE("target_profile") {
  TEST_CASE("target profile sm_80 is the A100") {
    TargetProfile p = load_shipped("sm_80");
    CHECK(p.name == "sm_80");
    CHECK(p.arch == "sm_80");
    CHECK(p.compute_capability == 80);
    CHECK(p.max_shared_bytes_per_block_optin == 166912);  // 163 KiB
    CHECK_FALSE(p.programmatic_dependent_launch);  // Ampere has no griddepcontrol
    check_common_limits(p);
  }

  TEST_CASE("target profile sm_90 is the H100 and H200") {
    TargetProfile p = load_shipped("sm_90");
    CHECK(p.name == "sm_90");
    CHECK(p.arch == "sm_90");
    CHECK(p.compute_capability == 90);
    CHECK(p.max_shared_bytes_per_block_optin == 232448);  // 227 KiB
    CHECK(p.programmatic_dependent_launch);
    check_common_limits(p);
  }

  TEST_CASE("target profile sm_100 is the B200") {
    TargetProfile p = load_shipped("sm_100");
    CHECK(p.name == "sm_100");
    CHECK(p.arch == "sm_100");
    CHECK(p.compute_capability == 100);
    CHECK(p.max_shared_bytes_per_block_optin == 232448);  // 227 KiB
    CHECK(p.programmatic_dependent_launch);
    check_common_limits(p);
  }

  TEST_CASE("target profile every shipped file names itself and says where its values come from") {
    for (const std::string& path : test::files_in(ORCH_TEST_TARGETS_DIR, ".yaml")) {
      CAPTURE(path);
      std::string text = test::read_file(path);
      CHECK(text.find("# Where the values come from") != std::string::npos);
      DiagnosticEngine diags;
      auto p = load_target_profile(path, {}, SourceRange{}, diags);
      INFO(messages(diags));
      REQUIRE(p.has_value());
      CHECK(path == std::string(ORCH_TEST_TARGETS_DIR) + "/" + p->name + ".yaml");
    }
  }

  TEST_CASE("target profile reads every key") {
    // Values that differ from every default in TargetProfile, so a key the reader skipped shows.
    std::string text = R"(name: custom
arch: sm_87
compute_capability: 87
max_threads_per_block: 512
max_block_dim: [512, 256, 32]
max_grid_dim: [4294967296, 1000, 7]
max_shared_bytes_per_block: 1000
max_shared_bytes_per_block_optin: 5000000000
max_sm_count: 3
max_threads_per_sm: 1536
max_blocks_per_sm: 16
max_shared_bytes_per_sm: 100000
reserved_shared_bytes_per_block: 512
shared_allocation_unit: 256
max_registers_per_block: 32768
max_registers_per_sm: 131072
register_allocation_unit: 128
register_file_partitions: 2
max_cluster_size: 16
max_fire_and_forget_launches: 7
max_tail_launches: 9
max_self_tail_launches: 0
max_switch_cases: 16
supports_if: false
supports_if_else: false
supports_while: false
supports_switch: false
supports_device_launch: false
programmatic_dependent_launch: false
)";
    DiagnosticEngine diags;
    auto p = parse_target_profile(text, "custom.yaml", SourceRange{}, diags);
    INFO(messages(diags));
    REQUIRE(p.has_value());
    CHECK(p->name == "custom");
    CHECK(p->arch == "sm_87");
    CHECK(p->compute_capability == 87);
    CHECK(p->max_threads_per_block == 512);
    CHECK(p->max_sm_count == 3);
    CHECK(p->max_threads_per_sm == 1536);
    CHECK(p->max_blocks_per_sm == 16);
    CHECK(p->max_shared_bytes_per_sm == 100000);
    CHECK(p->reserved_shared_bytes_per_block == 512);
    CHECK(p->shared_allocation_unit == 256);
    CHECK(p->max_registers_per_block == 32768);
    CHECK(p->max_registers_per_sm == 131072);
    CHECK(p->register_allocation_unit == 128);
    CHECK(p->register_file_partitions == 2);
    CHECK(p->max_cluster_size == 16);
    CHECK(p->max_block_dim[0] == 512);
    CHECK(p->max_block_dim[1] == 256);
    CHECK(p->max_block_dim[2] == 32);
    CHECK(p->max_grid_dim[0] == 4294967296ull);
    CHECK(p->max_grid_dim[1] == 1000);
    CHECK(p->max_grid_dim[2] == 7);
    CHECK(p->max_shared_bytes_per_block == 1000);
    CHECK(p->max_shared_bytes_per_block_optin == 5000000000ull);
    CHECK(p->max_fire_and_forget_launches == 7);
    CHECK(p->max_tail_launches == 9);
    CHECK(p->max_self_tail_launches == 0);
    CHECK(p->max_switch_cases == 16);
    CHECK_FALSE(p->supports_if);
    CHECK_FALSE(p->supports_if_else);
    CHECK_FALSE(p->supports_while);
    CHECK_FALSE(p->supports_switch);
    CHECK_FALSE(p->supports_device_launch);
    CHECK_FALSE(p->programmatic_dependent_launch);
    // The one key whose value above is its default: read as true where the arch allows it.
    DiagnosticEngine diags90;
    auto q = parse_target_profile(with("programmatic_dependent_launch", "true"), "x.yaml", SourceRange{}, diags90);
    REQUIRE(q.has_value());
    CHECK(q->programmatic_dependent_launch);
    auto r = parse_target_profile(with("programmatic_dependent_launch", "false"), "x.yaml", SourceRange{}, diags90);
    REQUIRE(r.has_value());
    CHECK_FALSE(r->programmatic_dependent_launch);
  }

  TEST_CASE("target profile programmatic dependent launch needs compute capability 9.0") {
    std::string text = with("arch", "sm_89");
    text = std::string(text).replace(text.find("compute_capability: 90"), 22, "compute_capability: 89");
    CHECK(bad(text) ==
          "target profile targets/x.yaml: key 'programmatic_dependent_launch' is true but compute capability 89 "
          "has no programmatic dependent launch (it needs 90 or newer)\n");
    CHECK(bad(with("programmatic_dependent_launch", "maybe")) ==
          "target profile targets/x.yaml: key 'programmatic_dependent_launch' must be true or false\n");
  }

  TEST_CASE("target profile accepts YAML's other spellings of the same data") {
    std::string text = with("max_block_dim", "\n  - 1024\n  - 1024\n  - 64");
    text = "---\n" + text + "...\n";
    text += "# trailing comment\n";
    DiagnosticEngine diags;
    auto p = parse_target_profile(text, "targets/x.yaml", SourceRange{}, diags);
    INFO(messages(diags));
    REQUIRE(p.has_value());
    CHECK(p->max_block_dim[2] == 64);
  }

  TEST_CASE("target profile missing keys are named one by one") {
    for (const char* key : kAllKeys) {
      CAPTURE(key);
      CHECK(bad(without(key)) ==
            std::string("target profile targets/x.yaml: missing required key '") + key + "'\n");
    }
  }

  TEST_CASE("target profile unknown and repeated keys") {
    CHECK(bad(std::string(kGood) + "max_warps: 64\n") ==
          "target profile targets/x.yaml: unknown key 'max_warps'\n");
    CHECK(bad(std::string(kGood) + "max_tail_launches: 255\n") ==
          "target profile targets/x.yaml: key 'max_tail_launches' is given more than once\n");
    CHECK(bad(std::string(kGood) + "[a, b]: 1\n") ==
          "target profile targets/x.yaml: every key must be a plain name\n");
  }

  TEST_CASE("target profile wrong types") {
    CHECK(bad(with("max_threads_per_block", "many")) ==
          "target profile targets/x.yaml: key 'max_threads_per_block' must be an unsigned "
          "integer\n");
    CHECK(bad(with("max_tail_launches", "-1")) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n");
    CHECK(bad(with("max_tail_launches", "2.5")) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n");
    CHECK(bad(with("max_tail_launches", "\"255\"")) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n");
    CHECK(bad(with("max_tail_launches", "[255]")) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n");
    CHECK(bad(with("max_tail_launches", "")) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n");
    CHECK(bad(with("max_self_tail_launches", "4294967296")) ==
          "target profile targets/x.yaml: key 'max_self_tail_launches' must be an unsigned "
          "integer no larger than 4294967295\n");
    CHECK(bad(with("max_shared_bytes_per_block_optin", "18446744073709551616")) ==
          "target profile targets/x.yaml: key 'max_shared_bytes_per_block_optin' must be an "
          "unsigned integer no larger than 18446744073709551615\n");
    CHECK(bad(with("supports_while", "1")) ==
          "target profile targets/x.yaml: key 'supports_while' must be true or false\n");
    CHECK(bad(with("supports_while", "\"true\"")) ==
          "target profile targets/x.yaml: key 'supports_while' must be true or false\n");
    CHECK(bad(with("name", "[a]")) ==
          "target profile targets/x.yaml: key 'name' must be a non-empty string\n");
    CHECK(bad(with("name", "")) ==
          "target profile targets/x.yaml: key 'name' must be a non-empty string\n");
  }

  TEST_CASE("target profile wrong lists") {
    CHECK(bad(with("max_block_dim", "1024")) ==
          "target profile targets/x.yaml: key 'max_block_dim' must be a list of 3 unsigned "
          "integers\n");
    CHECK(bad(with("max_block_dim", "[1024, 1024]")) ==
          "target profile targets/x.yaml: key 'max_block_dim' must be a list of 3 unsigned "
          "integers\n");
    CHECK(bad(with("max_grid_dim", "[1, 2, 3, 4]")) ==
          "target profile targets/x.yaml: key 'max_grid_dim' must be a list of 3 unsigned "
          "integers\n");
    CHECK(bad(with("max_grid_dim", "[1, x, 3]")) ==
          "target profile targets/x.yaml: key 'max_grid_dim' must be a list of 3 unsigned "
          "integers\n");
    CHECK(bad(with("max_block_dim", "[1024, 1024, 4294967296]")) ==
          "target profile targets/x.yaml: key 'max_block_dim' must be a list of 3 unsigned "
          "integers no larger than 4294967295\n");
    CHECK(bad(with("max_grid_dim", "[65535, 0, 65535]")) ==
          "target profile targets/x.yaml: key 'max_grid_dim' must not contain 0\n");
  }

  TEST_CASE("target profile values that cannot be right") {
    CHECK(bad(with("max_threads_per_block", "0")) ==
          "target profile targets/x.yaml: key 'max_threads_per_block' must be greater than 0\n");
    CHECK(bad(with("max_switch_cases", "0")) ==
          "target profile targets/x.yaml: key 'max_switch_cases' must be greater than 0\n");
    CHECK(bad(with("arch", "hopper")) ==
          "target profile targets/x.yaml: key 'arch' must look like 'sm_90' (got 'hopper')\n");
    CHECK(bad(with("compute_capability", "80")) ==
          "target profile targets/x.yaml: key 'compute_capability' is 80 but 'arch' is "
          "'sm_90'\n");
    CHECK(bad(with("max_shared_bytes_per_block_optin", "1024")) ==
          "target profile targets/x.yaml: key 'max_shared_bytes_per_block_optin' is smaller "
          "than 'max_shared_bytes_per_block'\n");
    CHECK(bad(with("max_block_dim", "[2048, 1024, 64]")) ==
          "target profile targets/x.yaml: key 'max_block_dim' has a dimension larger than "
          "'max_threads_per_block'\n");
    // Architecture-specific suffixes are real NVRTC arches.
    DiagnosticEngine diags;
    CHECK(parse_target_profile(with("arch", "sm_90a"), "x.yaml", SourceRange{}, diags));
    CHECK(parse_target_profile(with("arch", "sm_90f"), "x.yaml", SourceRange{}, diags));
    CHECK_FALSE(diags.has_errors());
  }

  TEST_CASE("target profile reports every problem at once") {
    std::string text = with("max_tail_launches", "lots");
    text += "colour: blue\n";
    std::string t2;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("supports_if:", 0) != 0) t2 += line + "\n";
    CHECK(bad(t2) ==
          "target profile targets/x.yaml: key 'max_tail_launches' must be an unsigned integer\n"
          "target profile targets/x.yaml: unknown key 'colour'\n"
          "target profile targets/x.yaml: missing required key 'supports_if'\n");
  }

  TEST_CASE("target profile malformed YAML") {
    CHECK(bad("name: sm_90\nmax_block_dim: [1, 2\n") ==
          "target profile targets/x.yaml: invalid YAML at line 3, column 1: end of sequence "
          "flow not found\n");
    CHECK(bad("name: sm_90\n  arch: sm_90\n") ==
          "target profile targets/x.yaml: invalid YAML at line 2, column 7: illegal map value\n");
    CHECK(bad("name: sm_90\n\tarch: sm_90\n") ==
          "target profile targets/x.yaml: invalid YAML at line 2, column 1: illegal tab when "
          "looking for indentation\n");
    CHECK(bad("name: *nowhere\n") ==
          "target profile targets/x.yaml: invalid YAML at line 1, column 7: the referenced "
          "anchor is not defined\n");
    CHECK(bad("") == "target profile targets/x.yaml: is empty\n");
    CHECK(bad("# only a comment\n") == "target profile targets/x.yaml: is empty\n");
    CHECK(bad("- sm_90\n") ==
          "target profile targets/x.yaml: must be a mapping of keys to values\n");
    CHECK(bad("sm_90\n") == "target profile targets/x.yaml: must be a mapping of keys to values\n");
    CHECK(bad(std::string(kGood) + "---\n" + kGood) ==
          "target profile targets/x.yaml: holds 2 YAML documents; expected one\n");
    // Bytes that are not text at all.
    CHECK(bad(std::string("\x00\xff\xfe{[", 5)).find("target profile targets/x.yaml: ") == 0);
  }

  TEST_CASE("target profile diagnostics point at the target line") {
    SourceManager sources;
    uint32_t file = sources.add("p.orch", "pipeline p\ntarget sm_42\n");
    SourceRange where{file, {2, 8}, {2, 13}};
    DiagnosticEngine diags;
    CHECK_FALSE(load_target_profile("sm_42", {ORCH_TEST_TARGETS_DIR}, where, diags));
    CHECK(test::render_text(diags.all(), sources) ==
          "p.orch:2:8: error[E0111]: unknown target 'sm_42'; known targets: sm_100, sm_80, sm_90\n"
          "target sm_42\n"
          "       ^~~~~\n"
          "1 error generated.\n");
  }

  TEST_CASE("target profile unknown target lists the known ones") {
    test::TempDir extra("targets");
    test::write_file(extra.file("sm_42x.yaml"), kGood);  // found, but under another name
    test::write_file(extra.file("notes.txt"), "not a profile");
    DiagnosticEngine diags;
    CHECK_FALSE(load_target_profile("sm_42", {extra.path(), ORCH_TEST_TARGETS_DIR, "/nonexistent"},
                                    SourceRange{}, diags));
    CHECK(messages(diags) ==
          "unknown target 'sm_42'; known targets: sm_100, sm_42x, sm_80, sm_90\n");

    DiagnosticEngine none;
    CHECK_FALSE(
        load_target_profile("sm_90", {"/nonexistent/a", "/nonexistent/b"}, SourceRange{}, none));
    CHECK(messages(none) ==
          "unknown target 'sm_90'; no target profiles found in /nonexistent/a, /nonexistent/b\n");

    // A name is a name: a path without .yaml does not escape the search dirs.
    DiagnosticEngine path_like;
    CHECK_FALSE(
        load_target_profile("../targets/sm_90", {ORCH_TEST_TARGETS_DIR}, SourceRange{}, path_like));
    CHECK(messages(path_like) ==
          "unknown target '../targets/sm_90'; known targets: sm_100, sm_80, sm_90\n");
  }

  TEST_CASE("target profile search order and names") {
    test::TempDir first("targets_first");
    // Same name as a shipped profile: the earlier directory wins.
    test::write_file(first.file("sm_90.yaml"), with("max_switch_cases", "7"));
    DiagnosticEngine diags;
    auto p =
        load_target_profile("sm_90", {first.path(), ORCH_TEST_TARGETS_DIR}, SourceRange{}, diags);
    REQUIRE(p.has_value());
    CHECK(p->max_switch_cases == 7);

    // A file whose `name` disagrees with its file name is refused when loaded by name...
    test::write_file(first.file("sm_91.yaml"), kGood);
    DiagnosticEngine mismatch;
    CHECK_FALSE(load_target_profile("sm_91", {first.path()}, SourceRange{}, mismatch));
    CHECK(messages(mismatch) == "target profile " + first.file("sm_91.yaml") +
                                    ": key 'name' is 'sm_90' but the file is named 'sm_91.yaml'\n");
    // ...but a path names exactly one file, which may be called anything.
    DiagnosticEngine by_path;
    CHECK(load_target_profile(first.file("sm_91.yaml"), {}, SourceRange{}, by_path));
    CHECK_FALSE(by_path.has_errors());

    // Errors in a profile found by name carry its full path.
    test::write_file(first.file("sm_bad.yaml"), with("name", "sm_bad") + "oops: 1\n");
    DiagnosticEngine broken;
    CHECK_FALSE(load_target_profile("sm_bad", {first.path()}, SourceRange{}, broken));
    CHECK(messages(broken) ==
          "target profile " + first.file("sm_bad.yaml") + ": unknown key 'oops'\n");
  }

  TEST_CASE("target profile paths that are not profiles") {
    test::TempDir dir("targets_paths");
    DiagnosticEngine diags;
    CHECK_FALSE(load_target_profile(dir.file("missing.yaml"), {}, SourceRange{}, diags));
    std::filesystem::create_directory(dir.file("folder.yaml"));
    CHECK_FALSE(load_target_profile(dir.file("folder.yaml"), {}, SourceRange{}, diags));
    CHECK(messages(diags) == "target profile " + dir.file("missing.yaml") + ": no such file\n" +
                                 "target profile " + dir.file("folder.yaml") + ": is not a file\n");
  }

  TEST_CASE("target profile search dirs") {
    const char* saved = std::getenv("ORCH_TARGETS_DIR");
    std::string saved_value = saved ? saved : "";
    setenv("ORCH_TARGETS_DIR", "/from/env", 1);
    std::vector<std::string> dirs = target_search_dirs("/explicit");
    REQUIRE(dirs.size() >= 3);
    CHECK(dirs[0] == "/explicit");
    CHECK(dirs[1] == "/from/env");
    CHECK(dirs.back() == std::string(ORCH_TEST_TARGETS_DIR));  // the source tree comes last

    unsetenv("ORCH_TARGETS_DIR");
    std::vector<std::string> plain = target_search_dirs();
    CHECK(plain.size() == dirs.size() - 2);
    CHECK(plain.back() == std::string(ORCH_TEST_TARGETS_DIR));
    if (saved) setenv("ORCH_TARGETS_DIR", saved_value.c_str(), 1);

    // What `orchc --target sm_90` does with no flags: the source tree's profiles are found.
    DiagnosticEngine d;
    auto p = load_target_profile("sm_90", plain, SourceRange{}, d);
    REQUIRE(p.has_value());
    CHECK(p->compute_capability == 90);
  }

  TEST_CASE("target profile peaks pick the device by the longest match") {
    TargetProfile p = load_shipped("sm_90");
    const DevicePeaks* h200 = find_device_peaks(p, "NVIDIA H200");
    REQUIRE(h200);
    CHECK(h200->match == "H200");
    CHECK(h200->dram_bytes_per_s == 4800000000000ull);
    CHECK(h200->f32_flops_per_s == 66900000000000ull);
    const DevicePeaks* nvl = find_device_peaks(p, "NVIDIA H200 NVL");
    REQUIRE(nvl);
    CHECK(nvl->match == "H200 NVL");
    CHECK(nvl->f64_flops_per_s == 30000000000000ull);
    const DevicePeaks* sxm = find_device_peaks(p, "NVIDIA H100 80GB HBM3");
    REQUIRE(sxm);
    CHECK(sxm->dram_bytes_per_s == 3352000000000ull);
    CHECK(sxm->f64_flops_per_s == 33500000000000ull);
    const DevicePeaks* pcie = find_device_peaks(p, "NVIDIA H100 PCIe");
    REQUIRE(pcie);
    CHECK(pcie->dram_bytes_per_s == 2000000000000ull);
    CHECK(find_device_peaks(p, "NVIDIA GeForce RTX 4090") == nullptr);
    const TargetProfile sm80 = load_shipped("sm_80");
    const DevicePeaks* a100 = find_device_peaks(sm80, "NVIDIA A100-SXM4-80GB");
    REQUIRE(a100);
    CHECK(a100->dram_bytes_per_s == 2039000000000ull);
    CHECK(load_shipped("sm_100").peaks.empty());
    // Every shipped entry: a source, and the CUDA cores' usual order f16 >= f32 >= f64.
    for (const char* name : {"sm_80", "sm_90", "sm_100"})
      for (const DevicePeaks& d : load_shipped(name).peaks) {
        CAPTURE(d.match);
        CHECK_FALSE(d.source.empty());
        CHECK(d.f16_flops_per_s >= d.f32_flops_per_s);
        CHECK(d.f32_flops_per_s >= d.f64_flops_per_s);
        CHECK(d.dram_bytes_per_s >= 1000000000000ull);
      }
  }

  TEST_CASE("target profile peaks are optional and checked") {
    const std::string entry = R"(  - match: "X1"
    dram_bytes_per_s: 1000
    f16_flops_per_s: 4
    f32_flops_per_s: 2
    f64_flops_per_s: 1
    source: "the X1 datasheet"
)";
    DiagnosticEngine diags;
    auto p = parse_target_profile(std::string(kGood) + "peaks:\n" + entry, "x.yaml", SourceRange{}, diags);
    INFO(messages(diags));
    REQUIRE(p.has_value());
    REQUIRE(p->peaks.size() == 1);
    CHECK(p->peaks[0].match == "X1");
    CHECK(p->peaks[0].dram_bytes_per_s == 1000);
    CHECK(p->peaks[0].f16_flops_per_s == 4);
    CHECK(p->peaks[0].f32_flops_per_s == 2);
    CHECK(p->peaks[0].f64_flops_per_s == 1);
    CHECK(p->peaks[0].source == "the X1 datasheet");
    CHECK(find_device_peaks(*p, "ACME X1 Pro") == &p->peaks[0]);
    DiagnosticEngine none;
    auto q = parse_target_profile(kGood, "x.yaml", SourceRange{}, none);
    REQUIRE(q.has_value());
    CHECK(q->peaks.empty());

    CHECK(bad(std::string(kGood) + "peaks: 3\n") == "target profile targets/x.yaml: key 'peaks' must be a list of devices\n");
    CHECK(bad(std::string(kGood) + "peaks:\n  - 3\n") ==
          "target profile targets/x.yaml: key 'peaks[0]' must be a mapping of keys to values\n");
    CHECK(bad(std::string(kGood) + "peaks:\n" + entry + "    colour: red\n") ==
          "target profile targets/x.yaml: key 'peaks[0]' has an unknown key 'colour'\n");
    std::string no_source = entry.substr(0, entry.find("    source"));
    CHECK(bad(std::string(kGood) + "peaks:\n" + no_source) ==
          "target profile targets/x.yaml: key 'peaks[0]' is missing 'source'\n");
    std::string zero = entry;
    zero.replace(zero.find("1000"), 4, "0");
    CHECK(bad(std::string(kGood) + "peaks:\n" + zero) ==
          "target profile targets/x.yaml: key 'peaks[0].dram_bytes_per_s' must be greater than 0\n");
    std::string fractional = entry;
    fractional.replace(fractional.find("1000"), 4, "3.35e12");
    CHECK(bad(std::string(kGood) + "peaks:\n" + fractional) ==
          "target profile targets/x.yaml: key 'peaks[0].dram_bytes_per_s' must be an unsigned integer\n");
    CHECK(bad(std::string(kGood) + "peaks:\n" + entry + entry) ==
          "target profile targets/x.yaml: key 'peaks[1].match' 'X1' is listed twice\n");
    CHECK(bad(std::string(kGood) + "peaks: []\npeaks: []\n") ==
          "target profile targets/x.yaml: key 'peaks' is given more than once\n");
  }

}  // TEST_SUITE

}  // namespace orch
