// orchc's artifact cache (tools/orchc/artifact_cache.h), through orchc as users run it: a hit
// writes exactly the bytes a fresh compile writes and prints the same diagnostics; any change to
// what the compile read is a miss; a damaged entry is a miss; --no-cache bypasses it; the folder
// stays under its size limit. A hit is told from a miss by the kernel cache: a compile that
// runs writes kernel images there, a hit does not touch it.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tools/orchc/artifact_cache.h"
#include "tools/tests/test_util.h"

namespace orch::tools_test {
namespace {

namespace fs = std::filesystem;

struct Compile {
  int exit_code = -1;
  std::string out, err;
};

// A folder of its own per test case: the .orch and kernel files, the two caches, the outputs.
struct Workspace {
  fs::path dir;
  explicit Workspace(const std::string& name) : dir(fs::path(temp_dir()) / ("cache-" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  fs::path kernels() const { return dir / "kernels"; }
  fs::path artifacts() const { return dir / "artifacts"; }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // orchc ARGS with this workspace's caches (and `env`, "NAME=value ..."), from this folder.
  // `seconds` > 0: killed after that long (exit 124), so a hang fails the test.
  Compile orchc(const std::string& args, const std::string& env = "", int seconds = 0) const {
    const std::string out = (dir / "stdout").string(), err = (dir / "stderr").string();
    const std::string cmd = "cd '" + dir.string() + "' && env ORCH_CACHE_DIR='" + kernels().string() +
                            "' ORCH_ARTIFACT_CACHE_DIR='" + artifacts().string() + "' " + env + " " +
                            (seconds > 0 ? "timeout -k 5 " + std::to_string(seconds) + " " : std::string()) + "'" +
                            orchc_path() + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    Compile c;
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    c.out = read_all(out);
    c.err = read_all(err);
    return c;
  }
  // Whether a compile since the kernel cache was last emptied compiled anything.
  bool compiled_kernels() const { return fs::exists(kernels()); }
  void forget_kernels() const { fs::remove_all(kernels()); }
  size_t entries() const {
    size_t n = 0;
    if (fs::exists(artifacts()))
      for (const auto& e : fs::recursive_directory_iterator(artifacts()))
        n += e.is_regular_file() && e.path().extension() == ".oac";
    return n;
  }
};

// A pipeline whose kernel comes from a file that includes a header, and compiles with a warning.
const char* kPipeline = R"(pipeline cached
target sm_90
param n: u32 = 256
buffer x: f32[n]
kernel scale(n: u32, x: inout f32[]) from "k.cu"
graph main {
  scale<<<ceil_div(n, 128), 128>>>(n, x)
}
)";
// k.cu includes inc/factor.cuh, which includes "common.cuh": looked for first beside it
// (inc/common.cuh, absent), then in the include folder (the .cu's folder), where it is.
const char* kKernel = R"(#include "inc/factor.cuh"
extern "C" __global__ void scale(unsigned n, float* x) {
  int unused;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= kFactor;
}
)";
const char* kHeader = "#pragma once\n#include \"common.cuh\"\nconstexpr float kFactor = kBase;\n";
const char* kCommon = "#pragma once\nconstexpr float kBase = 2.0f;\n";

void write_pipeline(const Workspace& w) {
  w.write("p.orch", kPipeline);
  w.write("k.cu", kKernel);
  w.write("inc/factor.cuh", kHeader);
  w.write("common.cuh", kCommon);
}

// Compiles p.orch twice (a miss, then a hit) and once with --no-cache; all three artifacts and
// the first two reports must be the same.
void check_hit(const Workspace& w, const std::string& extra = "") {
  Compile miss = w.orchc("p.orch -o a.bin " + extra);
  REQUIRE_MESSAGE(miss.exit_code == 0, miss.err);
  CHECK(w.compiled_kernels());
  w.forget_kernels();
  Compile hit = w.orchc("p.orch -o b.bin " + extra);
  REQUIRE_MESSAGE(hit.exit_code == 0, hit.err);
  CHECK_FALSE(w.compiled_kernels());  // answered by the artifact cache
  CHECK(hit.err == miss.err);
  CHECK(hit.out == miss.out);
  Compile fresh = w.orchc("--no-cache p.orch -o c.bin " + extra);
  REQUIRE_MESSAGE(fresh.exit_code == 0, fresh.err);
  const std::string a = read_all((w.dir / "a.bin").string());
  CHECK_FALSE(a.empty());
  CHECK(read_all((w.dir / "b.bin").string()) == a);
  CHECK(read_all((w.dir / "c.bin").string()) == a);
}

TEST_CASE("artifact cache: a hit writes what a fresh compile writes and replays its warnings") {
  Workspace w("hit");
  write_pipeline(w);
  check_hit(w);
  CHECK(w.entries() == 1);
  // The warning came from NVRTC on the miss and from the entry on the hit.
  CHECK(read_all((w.dir / "stderr").string()).find("warning[W0901]") != std::string::npos);
}

TEST_CASE("artifact cache: machine-readable reports are replayed on stdout") {
  Workspace w("json");
  write_pipeline(w);
  check_hit(w, "--diagnostics-format json");
  CHECK(read_all((w.dir / "stdout").string()).find("W0901") != std::string::npos);
}

TEST_CASE("artifact cache: any change to what the compile read or was told is a miss") {
  Workspace w("changes");
  write_pipeline(w);
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  auto expect_miss = [&](const std::string& what, const std::string& args = "p.orch -o a.bin") {
    CAPTURE(what);
    w.forget_kernels();
    Compile c = w.orchc(args);
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK(w.compiled_kernels());
    // And the result is what a fresh compile gives now.
    REQUIRE(w.orchc("--no-cache " + args.substr(0, args.find(" -o ")) + " -o fresh.bin").exit_code == 0);
    CHECK(read_all((w.dir / args.substr(args.find(" -o ") + 4)).string()) == read_all((w.dir / "fresh.bin").string()));
    // The same again is a hit.
    w.forget_kernels();
    REQUIRE(w.orchc(args).exit_code == 0);
    CHECK_FALSE(w.compiled_kernels());
  };
  w.write("p.orch", std::string(kPipeline) + "// a comment\n");
  expect_miss("the .orch file");
  w.write("k.cu", std::string(kKernel) + "// a comment\n");
  expect_miss("the kernel file");
  w.write("inc/factor.cuh", std::string(kHeader) + "// a comment\n");
  expect_miss("a header the kernel includes");
  w.write("common.cuh", "#pragma once\nconstexpr float kBase = 3.0f;\n");
  expect_miss("a header that header includes");
  w.write("inc/common.cuh", "#pragma once\nconstexpr float kBase = 4.0f;\n");
  expect_miss("a new header that the include now finds first");
  fs::remove(w.dir / "inc/common.cuh");
  expect_miss("that header gone again");
  expect_miss("an option", "p.orch --arch sm_80,sm_90 -o a.bin");
  expect_miss("the speed passes off", "p.orch --no-pdl -o a.bin");
  expect_miss("another unroll factor", "p.orch --unroll 2 -o a.bin");
  // A target profile of its own, found by name in --targets-dir.
  w.write("targets/sm_90.yaml", read_all(targets_dir() + "/sm_90.yaml"));
  expect_miss("a targets folder", "--targets-dir targets p.orch -o a.bin");
  std::string profile = read_all((w.dir / "targets/sm_90.yaml").string());
  w.write("targets/sm_90.yaml", profile + "\n# changed\n");
  expect_miss("the target profile", "--targets-dir targets p.orch -o a.bin");
}

// What a compile reads but cannot name (issue 21): a header included through a macro, or past
// the depth the fingerprint follows. Such a compile is never answered from a cache: the
// artifact cache stores nothing for it and the kernel cache is not used, so a changed header
// always gives the new pipeline.bin.
TEST_CASE("artifact cache: a header reached through #include MACRO or 40 includes deep is never stale") {
  Workspace w("unnamed");
  w.write("p.orch", kPipeline);
  w.write("k.cu", "#define FACTOR_HEADER \"inc/factor.cuh\"\n#include FACTOR_HEADER\n" +
                      std::string(kKernel).substr(std::string(kKernel).find('\n') + 1));
  w.write("inc/factor.cuh", "#pragma once\nconstexpr float kFactor = 2.0f;\n");
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK(w.entries() == 0);  // nothing stored
  const std::string before = read_all((w.dir / "a.bin").string());
  w.write("inc/factor.cuh", "#pragma once\nconstexpr float kFactor = 3.0f;\n");
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK_FALSE(w.compiled_kernels());  // the kernel cache is not used either
  REQUIRE(w.orchc("--no-cache p.orch -o fresh.bin").exit_code == 0);
  CHECK(read_all((w.dir / "a.bin").string()) == read_all((w.dir / "fresh.bin").string()));
  CHECK(read_all((w.dir / "a.bin").string()) != before);

  // A chain of 40 headers, the factor in the last.
  Workspace deep("deep");
  deep.write("p.orch", kPipeline);
  deep.write("k.cu", "#include \"h0.cuh\"\n" + std::string(kKernel).substr(std::string(kKernel).find('\n') + 1));
  for (int i = 0; i < 40; ++i)
    deep.write("h" + std::to_string(i) + ".cuh", "#pragma once\n#include \"h" + std::to_string(i + 1) + ".cuh\"\n");
  deep.write("h40.cuh", "#pragma once\nconstexpr float kFactor = 2.0f;\n");
  REQUIRE(deep.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK(deep.entries() == 0);
  const std::string first = read_all((deep.dir / "a.bin").string());
  deep.write("h40.cuh", "#pragma once\nconstexpr float kFactor = 5.0f;\n");
  REQUIRE(deep.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK(read_all((deep.dir / "a.bin").string()) != first);
}

// A cache entry that is a FIFO (or any file but a regular one) is a miss, not a hang.
TEST_CASE("artifact cache: kernel-cache entries that are FIFOs are misses, not hangs") {
  Workspace w("fifo");
  write_pipeline(w);
  REQUIRE(w.orchc("--no-cache p.orch -o fresh.bin").exit_code == 0);
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  size_t fifos = 0;
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(w.kernels()))
    if (e.is_regular_file()) entries.push_back(e.path());
  for (const fs::path& e : entries) {
    fs::remove(e);
    fifos += ::mkfifo(e.c_str(), 0600) == 0;
  }
  REQUIRE(fifos > 0);
  fs::remove_all(w.artifacts());
  // Bounded: a hang fails the test instead of stalling it.
  Compile c = w.orchc("p.orch -o b.bin", "", 120);
  CHECK_MESSAGE(c.exit_code == 0, c.err);
  CHECK(read_all((w.dir / "b.bin").string()) == read_all((w.dir / "fresh.bin").string()));
}

// The property behind the cases above, on random edits (issue 21): after any change to any file
// the compile read, the next compile is not answered by the old entry (it compiles, or stores
// an entry under a new key) and writes what a compile without caches writes.
TEST_CASE("artifact cache: property: a random edit of any file the compile read is never answered stale") {
  Workspace w("property");
  write_pipeline(w);
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  const std::vector<std::string> inputs = {"p.orch", "k.cu", "inc/factor.cuh", "common.cuh"};
  std::mt19937 rng(20261128u);
  for (int round = 0; round < 12; ++round) {
    const std::string& file = inputs[rng() % inputs.size()];
    std::string text = read_all((w.dir / file).string());
    // A comment, a blank, or (in a header) a changed value: some change the artifact, some not.
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) text += "// edit " + std::to_string(rng()) + "\n";
    else if (kind == 1) text += "\n";
    else if (file == "common.cuh") text = "#pragma once\nconstexpr float kBase = " + std::to_string(rng() % 9 + 1) + ".0f;\n";
    else text += "// value " + std::to_string(rng() % 5) + "\n";
    CAPTURE(round);
    CAPTURE(file);
    CAPTURE(kind);
    w.write(file, text);
    const size_t before = w.entries();
    w.forget_kernels();
    Compile c = w.orchc("p.orch -o a.bin");
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK((w.compiled_kernels() || w.entries() > before));  // not the old entry
    REQUIRE(w.orchc("--no-cache p.orch -o fresh.bin").exit_code == 0);
    CHECK(read_all((w.dir / "a.bin").string()) == read_all((w.dir / "fresh.bin").string()));
  }
}

TEST_CASE("artifact cache: a damaged or truncated entry is a miss, and is replaced") {
  Workspace w("damaged");
  write_pipeline(w);
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  REQUIRE(w.entries() == 1);
  fs::path entry;
  for (const auto& e : fs::recursive_directory_iterator(w.artifacts()))
    if (e.path().extension() == ".oac") entry = e.path();
  const std::string good = read_all(entry.string());
  for (size_t at : {size_t{3}, good.size() / 2, good.size() - 40, good.size() - 1}) {
    CAPTURE(at);
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << bad;
    w.forget_kernels();
    Compile c = w.orchc("p.orch -o a.bin");
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK(w.compiled_kernels());
    CHECK(read_all(entry.string()) == good);  // stored afresh, the same bytes
  }
  std::ofstream(entry, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() / 3);
  w.forget_kernels();
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK(w.compiled_kernels());
}

TEST_CASE("artifact cache: entries decode only under their key and only intact") {
  const std::string artifact = read_all(compiled_saxpy(nullptr));
  REQUIRE_FALSE(artifact.empty());
  const std::vector<orchc::FileRecord> records = {{FileFact::Contents, "a.orch", "0123"},
                                                  {FileFact::RegularFile, "x/y.h", "0"}};
  const std::string bytes = orchc::encode_entry("k1", records, "report\n", artifact);
  auto back = orchc::decode_entry("k1", bytes);
  REQUIRE(back);
  CHECK(back->records == records);
  CHECK(back->report == "report\n");
  CHECK(back->artifact == artifact);
  CHECK_FALSE(orchc::decode_entry("k2", bytes));
  // An artifact whose own checksum fails is refused even under an intact entry checksum.
  std::string broken = artifact;
  broken[broken.size() - 1] ^= 1;
  CHECK_FALSE(orchc::decode_entry("k1", orchc::encode_entry("k1", records, "", broken)));
  for (size_t n = 0; n < bytes.size(); n += 97) CHECK_FALSE(orchc::decode_entry("k1", bytes.substr(0, n)));
}

TEST_CASE("artifact cache: --no-cache neither reads nor writes it; views and --check bypass it") {
  Workspace w("bypass");
  write_pipeline(w);
  REQUIRE(w.orchc("--no-cache p.orch -o a.bin").exit_code == 0);
  CHECK_FALSE(fs::exists(w.artifacts()));
  REQUIRE(w.orchc("--check p.orch").exit_code == 0);
  REQUIRE(w.orchc("--emit ir p.orch").exit_code == 0);
  CHECK_FALSE(fs::exists(w.artifacts()));
  REQUIRE(w.orchc("--print-passes p.orch -o a.bin").exit_code == 0);
  CHECK_FALSE(fs::exists(w.artifacts()));
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  CHECK(w.entries() == 1);
  // With an entry stored, --no-cache still compiles.
  w.forget_kernels();
  REQUIRE(w.orchc("--no-cache p.orch -o a.bin").exit_code == 0);
  CHECK(fs::exists(w.artifacts()));
}

// A profile of kPipeline (orch-run --profile), its one node the launch of `scale` at p.orch:7:3.
std::string profile_of(const std::string& pipeline, uint64_t median_ns) {
  return R"({"format": "orch-profile", "version": 1,
  "device": {"name": "NVIDIA H200", "sms": 132, "compute_capability": 90},
  "pipeline": {"name": ")" + pipeline + R"(", "sources": ["p.orch"]},
  "nodes": [
    {"file": "p.orch", "line": 7, "column": 3, "kernel": "scale", "launches": 10, "median_ns": )" +
         std::to_string(median_ns) + R"(, "min_ns": 900,
     "grid": [2, 1, 1], "block": [128, 1, 1], "registers": 16}
  ]
})";
}

TEST_CASE("artifact cache: keyed on the profile's bytes: another or an edited profile is a miss, the same a hit") {
  Workspace w("profile");
  write_pipeline(w);
  w.write("prof.json", profile_of("cached", 1000));
  auto compile = [&](const std::string& args) {
    w.forget_kernels();
    Compile c = w.orchc(args);
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    return w.compiled_kernels();  // true: compiled (a miss); false: answered by the cache
  };
  CHECK(compile("p.orch --profile prof.json -o a.bin"));
  CHECK_FALSE(compile("p.orch --profile prof.json -o b.bin"));
  CHECK(read_all((w.dir / "a.bin").string()) == read_all((w.dir / "b.bin").string()));
  // Without the profile: another compile.
  CHECK(compile("p.orch -o c.bin"));
  CHECK_FALSE(compile("p.orch -o c.bin"));
  // One measured time changed: a miss, then a hit.
  w.write("prof.json", profile_of("cached", 1001));
  CHECK(compile("p.orch --profile prof.json -o a.bin"));
  CHECK_FALSE(compile("p.orch --profile prof.json -o a.bin"));
  // The same bytes under another name: its own entry (the report names the file).
  w.write("other.json", profile_of("cached", 1001));
  CHECK(compile("p.orch --profile other.json -o a.bin"));
  // Edited back: the first entry again.
  w.write("prof.json", profile_of("cached", 1000));
  CHECK_FALSE(compile("p.orch --profile prof.json -o a.bin"));
  // Another pipeline's profile: compiled with the warning, which a hit replays.
  w.write("prof.json", profile_of("elsewhere", 1000));
  w.forget_kernels();
  Compile warned = w.orchc("p.orch --profile prof.json -o a.bin");
  REQUIRE_MESSAGE(warned.exit_code == 0, warned.err);
  CHECK(warned.err.find("prof.json:3:24: warning[W0006]: this profile was measured on pipeline `elsewhere`, not "
                        "`cached`") != std::string::npos);
  CHECK(w.compiled_kernels());
  w.forget_kernels();
  Compile replayed = w.orchc("p.orch --profile prof.json -o a.bin");
  CHECK(replayed.err == warned.err);
  CHECK_FALSE(w.compiled_kernels());
  // An invalid profile, or none at that path: an error, nothing stored, no entry answers it.
  const size_t entries = w.entries();
  w.write("prof.json", "{\"format\": \"orch-profile\", \"version\": 7}");
  Compile bad = w.orchc("p.orch --profile prof.json -o a.bin");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("prof.json:1:39: error[E0006]: invalid profile (orchc --profile): `version` is 7; this orchc reads "
                     "version 1") != std::string::npos);
  fs::remove(w.dir / "prof.json");
  Compile missing = w.orchc("p.orch --profile prof.json -o a.bin");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("error[E0004]: cannot read the profile `prof.json`") != std::string::npos);
  CHECK(w.entries() == entries);
  // --check validates it too, and --check with a good one is clean.
  w.write("prof.json", "[]");
  Compile checked = w.orchc("--check --no-kernels p.orch --profile prof.json");
  CHECK(checked.exit_code == 1);
  CHECK(checked.err.find("prof.json:1:1: error[E0006]: invalid profile (orchc --profile): the profile is an array; "
                         "expected a JSON object") != std::string::npos);
  w.write("prof.json", profile_of("cached", 1000));
  Compile clean = w.orchc("--check p.orch --profile prof.json");
  CHECK_MESSAGE(clean.exit_code == 0, clean.err);
}

TEST_CASE("artifact cache: a hit writes only where a compile may, never over an input") {
  Workspace w("outputs");
  write_pipeline(w);
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  const std::string kernel = read_all((w.dir / "k.cu").string());
  w.forget_kernels();
  Compile onto_input = w.orchc("p.orch -o k.cu");
  CHECK(onto_input.exit_code == 2);
  CHECK(onto_input.err.find("refusing to write") != std::string::npos);
  CHECK(read_all((w.dir / "k.cu").string()) == kernel);
  fs::create_directories(w.dir / "folder.bin");
  CHECK(w.orchc("p.orch -o folder.bin").exit_code == 2);
  CHECK_FALSE(w.compiled_kernels());
}

TEST_CASE("artifact cache: the folder is kept under its size limit, least recently used first") {
  Workspace w("limit");
  write_pipeline(w);
  w.write("q.orch", std::string(kPipeline).replace(9, 6, "other"));  // "pipeline other"
  REQUIRE(w.orchc("p.orch -o a.bin").exit_code == 0);
  REQUIRE(w.orchc("q.orch -o b.bin").exit_code == 0);
  REQUIRE(w.entries() == 2);
  uintmax_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(w.artifacts()))
    if (e.path().extension() == ".oac") total += e.file_size();
  fs::remove_all(w.artifacts());
  // Room for about one and a half: storing the second evicts the first.
  const std::string limit = "ORCH_ARTIFACT_CACHE_SIZE=" + std::to_string(total * 3 / 4);
  REQUIRE(w.orchc("p.orch -o a.bin", limit).exit_code == 0);
  REQUIRE(w.entries() == 1);
  for (const auto& e : fs::recursive_directory_iterator(w.artifacts()))
    if (e.path().extension() == ".oac")
      fs::last_write_time(e.path(), fs::file_time_type::clock::now() - std::chrono::hours(1));
  REQUIRE(w.orchc("q.orch -o b.bin", limit).exit_code == 0);
  CHECK(w.entries() == 1);
  w.forget_kernels();
  REQUIRE(w.orchc("q.orch -o b.bin", limit).exit_code == 0);
  CHECK_FALSE(w.compiled_kernels());  // the newer one stayed
  REQUIRE(w.orchc("p.orch -o a.bin", limit).exit_code == 0);
  CHECK(w.compiled_kernels());  // the older one went
}

}  // namespace
}  // namespace orch::tools_test
