// orch-run end to end, in-process. The CPU cases need no GPU: every error that can be found
// before touching the GPU is, and without a device the run stops with one clean line. The GPU
// cases (suite "gpu") run examples/embed_saxpy/saxpy.orch and check the dumped result.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <sys/wait.h>

#include "artifact/sample_pipeline.h"
#include "tools/orch_run/values.h"
#include "tools/tests/test_util.h"

using namespace orch::tools_test;

namespace {

std::string saxpy_or_fail() {
  std::string log;
  const std::string bin = compiled_saxpy(&log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  return bin;
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) {
      had = true;
      old = v;
    }
    setenv(n, value, 1);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

std::vector<float> floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace

TEST_CASE("a file that is missing or not a pipeline is one line and exit 1") {
  RunOutput r = orch_run({temp_dir() + "/missing.bin"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: " + temp_dir() + "/missing.bin: cannot open: No such file or directory\n");
  CHECK(r.out.empty());

  const std::string junk = write_temp("junk.bin", "this is not a pipeline");
  r = orch_run({junk});
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("orch-run: " + junk + ": ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("a directory, a FIFO or a device as the pipeline is one line and exit 1, without blocking") {
  RunOutput r = orch_run({temp_dir()});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: " + temp_dir() + ": is a directory, not a file\n");
  // A FIFO nobody writes: opening it for reading would wait forever; it is never opened.
  const std::string fifo = temp_dir() + "/pipeline.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  r = orch_run({fifo});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: " + fifo + ": is a FIFO (named pipe), not a regular file\n");
  r = orch_run({"/dev/zero"});
  CHECK(r.err == "orch-run: /dev/zero: is a character device, not a regular file\n");
  const std::string saxpy = saxpy_or_fail();
  r = orch_run({saxpy, "--fill", "x=file:" + fifo});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --fill x=file:" + fifo + ": is a FIFO (named pipe), not a regular file\n");
  r = orch_run({saxpy, "--fill", "x=file:" + temp_dir()});
  CHECK(r.err == "orch-run: --fill x=file:" + temp_dir() + ": is a directory, not a file\n");
}

TEST_CASE("--list needs no GPU") {
  const std::string sample = write_temp("sample.bin", orch::artifact::sample_artifact());
  RunOutput r = orch_run({sample, "--list"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("  param  mode: i32 (no default") != std::string::npos);
  CHECK(r.out.find("  comm   world\n") != std::string::npos);

  const std::string saxpy = saxpy_or_fail();
  r = orch_run({saxpy, "--list"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "pipeline saxpy\n  param  n: u32 = 1048576\n  param  a: f32 = 2\n"
                 "  buffer x: f32[n]\n  buffer y: f32[n]\n");
}

TEST_CASE("mistakes found in the artifact come before the GPU, with exit 1") {
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "m=3"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --param m: pipeline saxpy has no param `m` (its params: n, a)\n");
  r = orch_run({saxpy, "--param", "n=-4"});
  CHECK(r.err == "orch-run: --param n=-4: `n` is u32; '-4' is below the range of u32\n");
  r = orch_run({saxpy, "--fill", "x=one"});
  CHECK(r.err == "orch-run: --fill x=one: `x` is f32; 'one' is not a number\n");
  r = orch_run({saxpy, "--fill", "x=file:" + temp_dir() + "/absent.bin"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --fill x=file:" + temp_dir() +
                     "/absent.bin: cannot open: No such file or directory\n");
  // A file of the wrong size: refused from its size alone, before it is read or a GPU is looked
  // for (a sparse file of 3 GiB is not read into memory; issue 21).
  const std::string big = temp_dir() + "/sparse.bin";
  {
    std::ofstream f(big, std::ios::binary);
    f.seekp((std::streamoff{3} << 30) - 1);
    f.put('\0');
  }
  r = orch_run({saxpy, "--param", "n=1024", "--fill", "x=file:" + big});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --fill x=file:" + big + ": the file has 3221225472 bytes; `x` is f32[1024] = 4096 bytes\n");
  std::remove(big.c_str());

  // Several ranks: what can be found without a GPU is found first.
  r = orch_run({saxpy, "--ranks", "2"});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --ranks 2: pipeline saxpy has no comm, so its ranks would not work together; run "
                 "it without --ranks\n");
  const std::string sample = write_temp("sample.bin", orch::artifact::sample_artifact());
  {
    ScopedEnv rank("OMPI_COMM_WORLD_RANK", "1"), size("OMPI_COMM_WORLD_SIZE", "2");
    r = orch_run({sample, "--param", "mode=1"});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "orch-run: rank 1: give --nccl-id-file PATH (rank 1 of 2, from OMPI_COMM_WORLD_RANK): rank 0 "
                   "writes the NCCL unique id there for the others; use a fresh path every rank can read\n");
    r = orch_run({sample, "--param", "mode=1", "--nccl-id-file", temp_dir() + "/id", "--device", "1"});
    CHECK(r.err == "orch-run: rank 1: --device cannot be combined with several ranks: each rank uses the GPU of "
                   "its local rank\n");
    r = orch_run({sample, "--param", "mode=1", "--ranks", "3"});
    CHECK(r.err == "orch-run: --ranks 3: the rank processes get ORCH_RANK from orch-run itself; under "
                   "OMPI_COMM_WORLD_RANK leave --ranks out (the launcher starts the ranks)\n");
  }
  {
    ScopedEnv rank("PMI_RANK", "x"), size("PMI_SIZE", "2");
    r = orch_run({sample, "--param", "mode=1"});
    CHECK(r.err == "orch-run: PMI_RANK='x' is not a rank (a whole number >= 0)\n");
  }
}

TEST_CASE("--dump onto a device, a FIFO, a directory or an input, and special input files: refused before the GPU") {
  const std::string saxpy = saxpy_or_fail();
  const std::string fifo = temp_dir() + "/dump.fifo";
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fill = write_temp("x.bin", std::string(16, '\0'));
  struct Case {
    std::string path, why;
  };
  for (const Case& c : {Case{"/dev/null", "it is a character device; the output must be a regular file"},
                        Case{fifo, "it is a FIFO (named pipe); the output must be a regular file"},
                        Case{temp_dir(), "it is a directory; the output must be a regular file"},
                        Case{saxpy, "it is the input " + saxpy},
                        Case{fill, "it is the input " + fill}}) {
    CAPTURE(c.path);
    RunOutput r = orch_run({saxpy, "--param", "n=4", "--fill", "x=file:" + fill, "--dump", "y=" + c.path});
    CHECK(r.exit_code == 1);
    CHECK(r.err == "orch-run: --dump y=" + c.path + ": refusing to write " + c.path + ": " + c.why + "\n");
  }
  struct stat st {};
  CHECK((::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
  CHECK((::stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode)));
  // Reading (the FIFO and directory cases are above): /dev/zero never ends.
  RunOutput r = orch_run({saxpy, "--fill", "x=file:/dev/zero"});
  CHECK(r.err == "orch-run: --fill x=file:/dev/zero: is a character device, not a regular file\n");
  ::unlink(fifo.c_str());
}

TEST_CASE("without a CUDA device: one line, 'orch-run: no CUDA device: ...', exit 1") {
  if (gpu_unavailable_reason().empty()) {
    MESSAGE("this machine has a CUDA device; the GPU cases cover it");
    return;
  }
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "n=4096", "--fill", "x=random", "--fill", "y=0.5",
                          "--repeat", "3", "--dump", "y=" + temp_dir() + "/y.bin"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("orch-run: no CUDA device: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  MESSAGE(r.err);
}

TEST_SUITE("gpu") {

TEST_CASE("saxpy: fills, params, one launch, and the dumped result") {
  const std::string saxpy = saxpy_or_fail();
  const size_t n = 4096;
  const auto x = orch::run::random_bytes(orch::run::ScalarType::F32, n, 3, "input", std::nullopt);
  const std::string x_file = write_temp("x.bin", std::string(x.begin(), x.end()));
  const std::string y_out = temp_dir() + "/y.bin", x_out = temp_dir() + "/x_out.bin";
  RunOutput r = orch_run({saxpy, "--param", "n=4096", "--param", "a=3", "--fill", "x=file:" + x_file,
                          "--fill", "y=0.5", "--warmup", "0", "--repeat", "1", "--dump",
                          "y=" + y_out, "--dump", "x=" + x_out});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("params: n=4096 a=3\n") != std::string::npos);
  CHECK(r.out.find("per launch (CUDA events): median ") != std::string::npos);
  CHECK(read_all(x_out) == std::string(x.begin(), x.end()));
  const auto xs = floats(read_all(x_out)), ys = floats(read_all(y_out));
  REQUIRE(ys.size() == n);
  for (size_t i = 0; i < n; ++i) REQUIRE(ys[i] == doctest::Approx(3.0f * xs[i] + 0.5f).epsilon(1e-6));
}

TEST_CASE("saxpy: repeated launches accumulate, random fills match the seed") {
  const std::string saxpy = saxpy_or_fail();
  const std::string x_out = temp_dir() + "/xr.bin", y_out = temp_dir() + "/yr.bin";
  RunOutput r = orch_run({saxpy, "--param", "n=1000", "--fill", "x=random", "--seed", "5",
                          "--warmup", "2", "--repeat", "20", "--dump", "x=" + x_out, "--dump",
                          "y=" + y_out});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("launches: 20 timed after 2 warm-up\n") != std::string::npos);
  const auto expected = orch::run::random_bytes(orch::run::ScalarType::F32, 1000, 5, "x");
  CHECK(read_all(x_out) == std::string(expected.begin(), expected.end()));
  const auto xs = floats(read_all(x_out)), ys = floats(read_all(y_out));
  for (size_t i = 0; i < xs.size(); ++i)  // y starts at 0; 22 launches of y += 2x
    REQUIRE(ys[i] == doctest::Approx(22 * 2.0f * xs[i]).epsilon(1e-5));
}

TEST_CASE("a file of the wrong size, and a device that does not exist, are errors") {
  const std::string saxpy = saxpy_or_fail();
  const std::string small = write_temp("small.bin", std::string(12, '\0'));
  RunOutput r = orch_run({saxpy, "--param", "n=4", "--fill", "x=file:" + small});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "orch-run: --fill x=file:" + small + ": the file has 12 bytes; `x` is f32[4] = 16 bytes\n");
  r = orch_run({saxpy, "--device", "4096"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("orch-run: no CUDA device 4096: this machine has ", 0) == 0);
}

TEST_CASE("--force-ptx loads the PTX") {
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "n=256", "--force-ptx", "--repeat", "2"});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("PTX") != std::string::npos);
}

TEST_CASE("--nodes times each graph node and names its statement") {
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "n=100000", "--repeat", "5", "--nodes"});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("per node (CUPTI activity records of 5 more launches") != std::string::npos);
  CHECK(r.out.find("       1  saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3\n") != std::string::npos);
  CHECK(r.out.find("1 nodes; their medians sum to ") != std::string::npos);
}

TEST_CASE("--timing prints load, instantiate and the first launch") {
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "n=1000", "--repeat", "2", "--warmup", "0", "--timing"});
  INFO(r.out, r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("timing (host clock, device synchronized around each phase): load ") != std::string::npos);
  CHECK(r.out.find(", instantiate ") != std::string::npos);
  CHECK(r.out.find("(building ") != std::string::npos);
  CHECK(r.out.find(", cudaGraphInstantiate ") != std::string::npos);
  CHECK(r.out.find(", upload ") != std::string::npos);
  CHECK(r.out.find("), first launch ") != std::string::npos);
  CHECK(r.out.find("first launch none") == std::string::npos);  // the first timed launch, with --warmup 0
}

}  // TEST_SUITE("gpu")

// orch-run as a process, for what must end one (--timeout): $ORCH_RUN, else the build's.
namespace {

std::string orch_run_binary() { return orch_run_path(); }

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("--timeout ends a run whose kernel never finishes: one line, exit 3") {
  // The kernel waits for a flag nobody sets; its buffer starts zeroed.
  const std::string src = write_temp("hang.orch", R"(pipeline hang
target sm_90
buffer flag: u32
kernel spin(flag: in u32) source """
extern "C" __global__ void spin(const unsigned* flag) {
  while (*(volatile const unsigned*)flag == 0) __nanosleep(1000);
}
"""
graph main {
  spin<<<1, 1>>>(flag)
}
)");
  std::string log;
  const std::string bin = compiled(src, &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  const std::string err_file = temp_dir() + "/hang.err";
  // coreutils' timeout is the test's own guard: without --timeout working, 124 and no hang.
  const std::string cmd = "timeout -s KILL 120 '" + orch_run_binary() + "' '" + bin +
                          "' --warmup 1 --repeat 1 --timeout 10 >/dev/null 2>'" + err_file + "'";
  const int status = std::system(cmd.c_str());
  const std::string err = read_all(err_file);
  INFO(cmd, "\n", err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(err == "orch-run: timed out after 10 s (--timeout) while the warm-up launches; GPU work that does not "
               "finish cannot be cancelled, so orch-run ends its process, which ends that work\n");
  // The process ended and the GPU is usable again: saxpy runs.
  const std::string saxpy = saxpy_or_fail();
  RunOutput r = orch_run({saxpy, "--param", "n=256", "--repeat", "1", "--timeout", "60"});
  INFO(r.out, r.err);
  CHECK(r.exit_code == 0);
}

}  // TEST_SUITE("gpu")
