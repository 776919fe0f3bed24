// The checker's rules, one diagnostic code at a time. For every code from E0101 on there is a
// small pipeline that breaks the rule, next to the full text `orchc --check` prints for it
// (file:line:col, code, message, the source line, the caret line and every note), and the
// closest pipeline that obeys the rule, written as edits of the failing one, which must check
// clean. After the per-code cases: several independent errors are all reported, one mistake is
// reported once (no cascades), param-dependent checks are recorded for bind time, and
// docs/diagnostics.md has an entry for every code.
//
// E0001-E0005 (syntax, input) have their own tests (grammar/parse_test.cpp,
// support/diagnostics_test.cpp and tests/stress_test.cpp, which also has E0806: it needs 150,000 statements); E0899 (the lowering's ordering verifier, an
// internal error no checked program should reach) and E09xx/W09xx (kernel compilation) belong
// to lowering/.
//
// Cases marked `may_fail` describe behaviour the checker should have and does not yet; each
// says what is wrong. They run, and report, without failing the suite.
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
std::unique_ptr<Checked> check(const std::string& program, const std::string& target = "",
                               const std::string& path = "t.orch") {
  auto c = std::make_unique<Checked>();
  CheckOptions options;
  options.target_override = target;
  options.targets_dir = ORCH_TEST_TARGETS_DIR;
  c->result = check_text(path, program, c->sources, options, c->diags);
  return c;
}

std::string diagnostics_of(const std::string& program, const std::string& target = "") {
  return check(program, target)->text();
}

// `program` with each edit (from, to) applied in order. Each `from` must occur exactly once,
// so that a fix can never silently apply nowhere (or in two places).
std::string fix(std::string program,
                std::initializer_list<std::pair<const char*, const char*>> edits) {
  for (const auto& [from, to] : edits) {
    size_t at = program.find(from);
    if (at == std::string::npos || program.find(from, at + 1) != std::string::npos)
      throw std::logic_error(std::string("edit must match exactly once: ") + from);
    program.replace(at, std::string(from).size(), to);
  }
  return program;
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

}  // namespace

// ---- E01xx: names and types ------------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0101: a buffer that is never declared") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
  copy x -> x_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:13: error[E0101]: buffer `x_host` is not declared
  copy x -> x_host
            ^~~~~~
1 error generated.
)txt");
  // Closest valid: declare `x_host`.
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32[n]\n", "buffer x: f32[n]\nbuffer x_host: f32[n] host\n"}})) == "");
}

TEST_CASE("E0101: a misspelled param in an expression") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(m, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:20: error[E0101]: `m` is not declared
  scale<<<ceil_div(m, 256), 256>>>(n, 2.0, x)
                   ^
1 error generated.
)txt");
  // Closest valid: use the declared param `n`.
  CHECK(diagnostics_of(fix(program, {{"ceil_div(m,", "ceil_div(n,"}})) == "");
}

TEST_CASE("E0101: a misspelled kernel") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scael<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0101]: kernel `scael` is not declared
  scael<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
  ^~~~~
1 error generated.
)txt");
  // Closest valid: spell the kernel's name as declared.
  CHECK(diagnostics_of(fix(program, {{"scael<<<", "scale<<<"}})) == "");
}

TEST_CASE("E0101: a called graph that is never declared") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
graph prologue { fill x = 0 }
graph main {
  call prolog
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:8: error[E0101]: graph `prolog` is not declared
  call prolog
       ^~~~~~
1 error generated.
)txt");
  // Closest valid: call the declared graph.
  CHECK(diagnostics_of(fix(program, {{"call prolog\n", "call prologue\n"}})) == "");
}

TEST_CASE("E0101: a comm that is never declared") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allreduce sum g on wrld
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:22: error[E0101]: comm `wrld` is not declared
  allreduce sum g on wrld
                     ^~~~
1 error generated.
)txt");
  // Closest valid: name the declared comm.
  CHECK(diagnostics_of(fix(program, {{"on wrld", "on world"}})) == "");
}

TEST_CASE("E0102: a buffer with the name of a param") {
  const std::string program = R"orch(pipeline p
param n: u32 = 16
buffer n: f32[16]
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:8: error[E0102]: `n` is already declared as a param
buffer n: f32[16]
       ^
t.orch:2:7: note: previous declaration of `n` is here
param n: u32 = 16
      ^
1 error generated.
)txt");
  // Closest valid: give the buffer a name of its own.
  CHECK(diagnostics_of(fix(program, {{"buffer n: f32[16]", "buffer x: f32[n]"}})) == "");
}

TEST_CASE("E0102: redeclaring the built-in `rank`") {
  const std::string program = R"orch(pipeline p
comm world
param rank: u32 = 0
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:7: error[E0102]: `rank` is a built-in name and cannot be redeclared
param rank: u32 = 0
      ^~~~
1 error generated.
)txt");
  // Closest valid: pick another name; `rank` comes from the comm.
  CHECK(diagnostics_of(fix(program, {{"param rank: u32 = 0\n", "param root: u32 = 0\n"}})) == "");
}

TEST_CASE("E0102: two kernel parameters with one name") {
  const std::string program = R"orch(pipeline p
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:25: error[E0102]: kernel `add` has two parameters named `x`
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
                        ^
t.orch:2:12: note: first one is here
kernel add(x: in f32[], x: inout f32[]) source """extern "C" __global__ void add(const float* a, float* b) {}"""
           ^
1 error generated.
)txt");
  // Closest valid: name the parameters apart.
  CHECK(diagnostics_of(fix(program, {{"add(x: in f32[], x: inout f32[])", "add(a: in f32[], b: inout f32[])"}})) == "");
}

TEST_CASE("E0102: a family index that hides a param") {
  const std::string program = R"orch(pipeline p
param e: u32 = 0
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 8] device { work<<<1, 128>>>(x) }
graph main { launch experts[e] tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:15: error[E0102]: family index `e` hides a declaration of the same name
graph experts[e: 8] device { work<<<1, 128>>>(x) }
              ^
1 error generated.
)txt");
  // Closest valid: index the family with a fresh name.
  CHECK(diagnostics_of(fix(program, {{"experts[e: 8]", "experts[i: 8]"}})) == "");
}

TEST_CASE("E0103: too few arguments") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0103]: kernel `scale` takes 3 arguments, but 2 were given
  scale<<<ceil_div(n, 256), 256>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:4:1: note: `scale` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: pass one argument per parameter.
  CHECK(diagnostics_of(fix(program, {{"(n, x)\n", "(n, 2.0, x)\n"}})) == "");
}

TEST_CASE("E0104: a buffer of the wrong element type") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: i32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:44: error[E0104]: `x` holds i32, but parameter `x` of `scale` takes f32
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: pass a buffer of the parameter's element type.
  CHECK(diagnostics_of(fix(program, {{"buffer x: i32[n]", "buffer x: f32[n]"}})) == "");
}

TEST_CASE("E0104: a device scalar where an array is expected") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:44: error[E0104]: `x` is a device scalar, but parameter `x` of `scale` takes an array (inout f32[])
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: pass an array buffer.
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32\n", "buffer x: f32[n]\n"}})) == "");
}

TEST_CASE("E0104: a floating-point value for an integer parameter") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(1024.0, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:21: error[E0104]: parameter `n` of `scale` is u32, but the argument is a floating-point value
  scale<<<4, 256>>>(1024.0, 2.0, x)
                    ^~~~~~
t.orch:4:14: note: `n` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
             ^~~~~~
1 error generated.
)txt");
  // Closest valid: pass an integer.
  CHECK(diagnostics_of(fix(program, {{"(1024.0,", "(1024,"}})) == "");
}

TEST_CASE("E0104: a constant that does not fit the parameter") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(-1, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:21: error[E0104]: argument does not fit parameter `n` of `scale`: -1 does not fit u32
  scale<<<4, 256>>>(-1, 2.0, x)
                    ^~
t.orch:4:14: note: `n` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
             ^~~~~~
1 error generated.
)txt");
  // Closest valid: pass a value in the parameter's range.
  CHECK(diagnostics_of(fix(program, {{"(-1,", "(1024,"}})) == "");
}

TEST_CASE("E0104: a param as the source of a copy") {
  const std::string program = R"orch(pipeline p
param n: u32 = 16
buffer x: u32[16]
graph main {
  copy n -> x
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:8: error[E0104]: the copy's source must be a buffer, but `n` is not one
  copy n -> x
       ^
t.orch:2:7: note: `n` is declared here
param n: u32 = 16
      ^
1 error generated.
)txt");
  // Closest valid: fill the buffer with the param's value.
  CHECK(diagnostics_of(fix(program, {{"  copy n -> x\n", "  fill x = n\n"}})) == "");
}

TEST_CASE("E0104: a floating-point value assigned to an integer scalar") {
  const std::string program = R"orch(pipeline p
buffer iters: u32
graph main {
  iters = 1.5
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:11: error[E0104]: cannot assign a floating-point value to `iters` (u32)
  iters = 1.5
          ^~~
1 error generated.
)txt");
  // Closest valid: assign an integer.
  CHECK(diagnostics_of(fix(program, {{"iters = 1.5", "iters = 1"}})) == "");
}

TEST_CASE("E0105: a param for an `inout` array") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, n)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:44: error[E0105]: `n` is a param, passed by value; parameter `x` of `scale` is `inout f32[]`, so it needs a buffer
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, n)
                                           ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
                             ^~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: pass a buffer.
  CHECK(diagnostics_of(fix(program, {{"(n, 2.0, n)", "(n, 2.0, x)"}})) == "");
}

TEST_CASE("E0105: an expression for an `in` scalar") {
  const std::string program = R"orch(pipeline p
param n: u32 = 16
buffer limit: u32
kernel clamp(limit: in u32) source """extern "C" __global__ void clamp(const unsigned* limit) {}"""
graph main {
  clamp<<<1, 32>>>(n + 1)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:20: error[E0105]: parameter `limit` of `clamp` is `in u32`, so its argument must be a buffer
  clamp<<<1, 32>>>(n + 1)
                   ^~~~~
t.orch:4:14: note: `limit` is declared here
kernel clamp(limit: in u32) source """extern "C" __global__ void clamp(const unsigned* limit) {}"""
             ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: compute the value into a device scalar and pass that.
  CHECK(diagnostics_of(fix(program, {{"  clamp<<<1, 32>>>(n + 1)\n", "  limit = n + 1\n  clamp<<<1, 32>>>(limit)\n"}})) == "");
}

TEST_CASE("E0106: an unknown buffer element type") {
  const std::string program = R"orch(pipeline p
buffer x: float[16]
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:11: error[E0106]: unknown type `float`
buffer x: float[16]
          ^~~~~
1 error generated.
)txt");
  // Closest valid: use one of the element types.
  CHECK(diagnostics_of(fix(program, {{"float[16]", "f32[16]"}})) == "");
}

TEST_CASE("E0106: an unknown param type") {
  const std::string program = R"orch(pipeline p
param n: uint = 16
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:10: error[E0106]: unknown type `uint`
param n: uint = 16
         ^~~~
1 error generated.
)txt");
  // Closest valid: use one of the scalar types.
  CHECK(diagnostics_of(fix(program, {{"uint", "u32"}})) == "");
}

TEST_CASE("E0107: assigning to a param") {
  const std::string program = R"orch(pipeline p
param n: u32 = 16
graph main {
  n += 1
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:3: error[E0107]: cannot assign to `n`: it is a param, set by the host; a graph assigns only device scalars (buffers without a size)
  n += 1
  ^
t.orch:2:7: note: `n` is declared here
param n: u32 = 16
      ^
1 error generated.
)txt");
  // Closest valid: make it a device scalar.
  CHECK(diagnostics_of(fix(program, {{"param n: u32 = 16", "buffer n: u32"}})) == "");
}

TEST_CASE("E0107: assigning to an array buffer") {
  const std::string program = R"orch(pipeline p
buffer count: u32[4]
graph main {
  count = 0
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:3: error[E0107]: cannot assign to `count`: it is an array buffer; a graph assigns only device scalars (buffers without a size); write arrays with a kernel or `fill`
  count = 0
  ^~~~~
t.orch:2:8: note: `count` is declared here
buffer count: u32[4]
       ^~~~~
1 error generated.
)txt");
  // Closest valid: `fill` the array.
  CHECK(diagnostics_of(fix(program, {{"  count = 0\n", "  fill count = 0\n"}})) == "");
}

TEST_CASE("E0108: a device scalar as a value argument") {
  const std::string program = R"orch(pipeline p
buffer count: u32
buffer x: f32[1024]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256>>>(count, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:21: error[E0108]: `count` is a device scalar, read on the GPU, but this value is computed on the host; pass it to an `in` parameter
  scale<<<4, 256>>>(count, 2.0, x)
                    ^~~~~
1 error generated.
)txt");
  // Closest valid: take the scalar through an `in` parameter, so the kernel reads it on the GPU.
  CHECK(diagnostics_of(fix(program, {{"scale(n: u32,", "scale(n: in u32,"},
                                     {"void scale(unsigned n,", "void scale(const unsigned* n,"}})) == "");
}

TEST_CASE("E0108: a device scalar in a launch shape") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer blocks: u32
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<blocks, 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:11: error[E0108]: `blocks` is a device scalar, read on the GPU, but this value is computed on the host
  scale<<<blocks, 256>>>(n, 2.0, x)
          ^~~~~~
1 error generated.
)txt");
  // Closest valid: compute the shape from params.
  CHECK(diagnostics_of(fix(program, {{"<<<blocks, 256>>>", "<<<ceil_div(n, 256), 256>>>"}})) == "");
}

TEST_CASE("E0109: an unknown function") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil(n / 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:11: error[E0109]: unknown function `ceil`; expressions may call min, max and ceil_div
  scale<<<ceil(n / 256), 256>>>(n, 2.0, x)
          ^~~~
1 error generated.
)txt");
  // Closest valid: use `ceil_div`.
  CHECK(diagnostics_of(fix(program, {{"ceil(n / 256)", "ceil_div(n, 256)"}})) == "");
}

TEST_CASE("E0109: a constant division by zero") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 0, 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:13: error[E0109]: division by zero: the divisor of `/` is 0
  scale<<<n / 0, 256>>>(n, 2.0, x)
            ^
1 error generated.
)txt");
  // Closest valid: divide by something else.
  CHECK(diagnostics_of(fix(program, {{"n / 0", "n / 256"}})) == "");
}

TEST_CASE("E0109: an overflow in a constant expression, at its operator") {
  // Literals take the type their use expects (u32 here) and are evaluated in it: no wrap.
  const std::string program = R"orch(pipeline p
param m: u32 = 65536 << 16
param s: u32 = 1 << 40
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:22: error[E0109]: overflow: 65536 << 16 does not fit u32
param m: u32 = 65536 << 16
                     ^~
t.orch:3:18: error[E0109]: shift count: 1 << 40 (the count must be 0 to 31 for u32)
param s: u32 = 1 << 40
                 ^~
2 errors generated.
)txt");
  // Closest valid: a type that holds the value.
  CHECK(diagnostics_of(fix(program, {{"m: u32", "m: u64"}, {"s: u32", "s: u64"}})) == "");
}

TEST_CASE("E0109: a literal that its operand's type cannot hold") {
  const std::string program = R"orch(pipeline p
param n: u8 = 200
buffer x: f32[n * 300]
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:19: error[E0109]: overflow: 300 does not fit u8
buffer x: f32[n * 300]
                  ^~~
1 error generated.
)txt");
  // Closest valid: a wider param.
  CHECK(diagnostics_of(fix(program, {{"n: u8", "n: u16"}})) == "");
}

TEST_CASE("E0109: a floating-point launch shape") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 256.0, 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:11: error[E0109]: the grid must be an integer, not a floating-point value
  scale<<<n / 256.0, 256>>>(n, 2.0, x)
          ^~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use integer arithmetic.
  CHECK(diagnostics_of(fix(program, {{"n / 256.0", "n / 256"}})) == "");
}

TEST_CASE("E0109: `call` of something that is not a graph") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  call scale
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:8: error[E0109]: `scale` is not a graph
  call scale
       ^~~~~
1 error generated.
)txt");
  // Closest valid: launch the kernel.
  CHECK(diagnostics_of(fix(program, {{"  call scale\n", "  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n"}})) == "");
}

TEST_CASE("E0109: an array buffer in a fill value") {
  const std::string program = R"orch(pipeline p
buffer a: u32[4]
buffer b: u32[4]
graph main {
  fill a = b
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:12: error[E0109]: `b` is an array buffer; expressions read params and device scalars (buffers without a size)
  fill a = b
           ^
1 error generated.
)txt");
  // Closest valid: copy the buffer.
  CHECK(diagnostics_of(fix(program, {{"fill a = b", "copy b -> a"}})) == "");
}

TEST_CASE("E0110: a kernel with no code") {
  const std::string program = R"orch(pipeline p
kernel scale(n: u32, a: f32, x: inout f32[])
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:8: error[E0110]: kernel `scale` has no code; add `from "file.cu"` or `source """..."""`
kernel scale(n: u32, a: f32, x: inout f32[])
       ^~~~~
1 error generated.
)txt");
  // Closest valid: give it code: `source` or `from` a file.
  CHECK(diagnostics_of(fix(program, {{"x: inout f32[])\n", "x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float a, float* x) {}\"\"\"\n"}})) == "");
}

TEST_CASE("E0110: an array parameter with no access mode") {
  const std::string program = R"orch(pipeline p
kernel scale(n: u32, a: f32, x: f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:30: error[E0110]: array parameter `x` needs an access mode (`in`, `out` or `inout`): the compiler orders statements by what they read and write
kernel scale(n: u32, a: f32, x: f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
                             ^~~~~~~~
1 error generated.
)txt");
  // Closest valid: say how the kernel uses the array.
  CHECK(diagnostics_of(fix(program, {{"x: f32[])", "x: inout f32[])"}})) == "");
}

TEST_CASE("E0110: an access mode on a `cond` parameter") {
  const std::string program = R"orch(pipeline p
kernel step(k: inout cond) source """extern "C" __global__ void step(cudaGraphConditionalHandle k) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:13: error[E0110]: parameter `k` is a `cond` and takes no access mode
kernel step(k: inout cond) source """extern "C" __global__ void step(cudaGraphConditionalHandle k) {}"""
            ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: drop the access mode.
  CHECK(diagnostics_of(fix(program, {{"k: inout cond", "k: cond"}})) == "");
}

TEST_CASE("E0110: two sources") {
  const std::string program = R"orch(pipeline p
kernel zero(x: out f32[]) source """extern "C" __global__ void zero(float* x) {}""" source """extern "C" __global__ void zero(float* x) { x[0] = 0; }"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:85: error[E0110]: kernel `zero` has more than one source or entry
kernel zero(x: out f32[]) source """extern "C" __global__ void zero(float* x) {}""" source """extern "C" __global__ void zero(float* x) { x[0] = 0; }"""
                                                                                    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: keep one source.
  CHECK(diagnostics_of(fix(program, {{" source \"\"\"extern \"C\" __global__ void zero(float* x) {}\"\"\"", ""}})) == "");
}

TEST_CASE("E0111: an unknown target") {
  const std::string program = R"orch(pipeline p
target sm_42
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:8: error[E0111]: unknown target 'sm_42'; known targets: sm_100, sm_80, sm_90
target sm_42
       ^~~~~
1 error generated.
)txt");
  // Closest valid: name a target profile that exists.
  CHECK(diagnostics_of(fix(program, {{"sm_42", "sm_90"}})) == "");
}

TEST_CASE("E0112: no `graph main`") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
graph mian { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:1:10: error[E0112]: pipeline `p` has no `graph main`, the graph the application launches
pipeline p
         ^
1 error generated.
)txt");
  // Closest valid: name the host-launched graph `main`.
  CHECK(diagnostics_of(fix(program, {{"graph mian", "graph main"}})) == "");
}

TEST_CASE("E0112: `graph main` declared `device`") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main device { work<<<1, 16>>>(x) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:1: error[E0112]: `graph main` is launched from the host; it cannot be a device graph or a family
graph main device { work<<<1, 16>>>(x) }
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: drop `device`.
  CHECK(diagnostics_of(fix(program, {{"graph main device", "graph main"}})) == "");
}

TEST_CASE("E0113: `cond` outside `while kernel`") {
  const std::string program = R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph main {
  fill c = 10
  step<<<1, 32>>>(c, cond)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:22: error[E0113]: `cond` is the condition of an enclosing `while kernel`, and there is none here
  step<<<1, 32>>>(c, cond)
                     ^~~~
1 error generated.
)txt");
  // Closest valid: put the kernel in a `while kernel` body.
  CHECK(diagnostics_of(fix(program, {{"  step<<<1, 32>>>(c, cond)\n", "  while kernel {\n    step<<<1, 32>>>(c, cond)\n  }\n"}})) == "");
}

TEST_CASE("E0113: `self` in a host-launched graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
kernel again(x: inout f32[], self: graph) launches self tail <= 1 source """extern "C" __global__ void again(float* x, cudaGraphExec_t self) {}"""
graph main {
  again<<<1, 32>>>(x, self)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:23: error[E0113]: `self` is the device graph being executed, but `main` is launched from the host
  again<<<1, 32>>>(x, self)
                      ^~~~
1 error generated.
)txt");
  // Closest valid: relaunch a device graph instead.
  CHECK(diagnostics_of(fix(program, {{"graph main {\n  again<<<1, 32>>>(x, self)\n}", "graph loop device {\n  again<<<1, 32>>>(x, self)\n}\ngraph main {\n  launch loop tail\n}"}})) == "");
}

TEST_CASE("E0114: `rank` without a comm") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel shard(n: u32, rank: u32, x: out f32[]) source """extern "C" __global__ void shard(unsigned n, unsigned rank, float* x) {}"""
graph main {
  shard<<<4, 256>>>(n, rank, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:24: error[E0114]: `rank` comes from the bound communicator, but this pipeline declares no `comm`
  shard<<<4, 256>>>(n, rank, x)
                       ^~~~
1 error generated.
)txt");
  // Closest valid: declare the comm the ranks belong to.
  CHECK(diagnostics_of(fix(program, {{"param n: u32 = 1024\n", "param n: u32 = 1024\ncomm world\n"}})) == "");
}

TEST_CASE("E0115: a buffer sized by a device scalar") {
  const std::string program = R"orch(pipeline p
buffer n: u32
buffer x: f32[n]
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0115]: `n` is a device scalar; this must be known on the host
buffer x: f32[n]
              ^
1 error generated.
)txt");
  // Closest valid: size it by a param.
  CHECK(diagnostics_of(fix(program, {{"buffer n: u32", "param n: u32 = 1024"}})) == "");
}

TEST_CASE("E0115: a buffer with no elements under the default values") {
  const std::string program = R"orch(pipeline p
param n: u32 = 4
buffer x: f32[n - 4]
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0115]: buffer `x` has 0 elements (with the default values n = 4); a buffer needs at least one
buffer x: f32[n - 4]
              ^~~~~
1 error generated.
)txt");
  // Closest valid: pick defaults that give every buffer an element.
  CHECK(diagnostics_of(fix(program, {{"param n: u32 = 4", "param n: u32 = 8"}})) == "");
}

TEST_CASE("E0115: a param default that does not fit its type") {
  const std::string program = R"orch(pipeline p
param mode: u8 = 300
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:18: error[E0115]: default of param `mode` does not fit its type: 300 does not fit u8
param mode: u8 = 300
                 ^~~
1 error generated.
)txt");
  // Closest valid: widen the type or shrink the default.
  CHECK(diagnostics_of(fix(program, {{"u8 = 300", "u16 = 300"}})) == "");
}

TEST_CASE("E0115: a literal default is evaluated in its param's type") {
  // ~0 is u32's largest value, and u64 takes literals up to 2^64 - 1; i64 does not.
  const std::string program = R"orch(pipeline p
param mask: u32 = ~0
param all: u64 = 18446744073709551615
param low: i64 = -9223372036854775808
param bad: i64 = 18446744073709551615
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:18: error[E0115]: default of param `bad` does not fit its type: 18446744073709551615 does not fit i64
param bad: i64 = 18446744073709551615
                 ^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: the unsigned type holds it.
  auto c = check(fix(program, {{"bad: i64", "bad: u64"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  CHECK(p.params[0].default_evaluated == ir::Value::of_uint(ir::ScalarType::U32, 4294967295u));
  CHECK(p.params[1].default_evaluated == ir::Value::of_uint(ir::ScalarType::U64, ~uint64_t(0)));
  CHECK(p.params[2].default_evaluated == ir::Value::of_int(ir::ScalarType::I64, INT64_MIN));
}

TEST_CASE("E0115: a launch budget that is a param") {
  const std::string program = R"orch(pipeline p
param fanout: u32 = 8
kernel route(g: graph) launches g fire_and_forget <= fanout source """extern "C" __global__ void route(cudaGraphExec_t g) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:54: error[E0115]: this must be a constant, but `fanout` is a param
kernel route(g: graph) launches g fire_and_forget <= fanout source """extern "C" __global__ void route(cudaGraphExec_t g) {}"""
                                                     ^~~~~~
1 error generated.
)txt");
  // Closest valid: write the bound as a constant.
  CHECK(diagnostics_of(fix(program, {{"<= fanout", "<= 8"}})) == "");
}

TEST_CASE("E0115: an empty graph family") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 0] device { work<<<1, 128>>>(x) }
graph main { launch experts[0] tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:18: error[E0115]: graph family `experts` must have 1 to 65536 members, not 0
graph experts[e: 0] device { work<<<1, 128>>>(x) }
                 ^
1 error generated.
)txt");
  // Closest valid: give the family at least one member.
  CHECK(diagnostics_of(fix(program, {{"[e: 0]", "[e: 4]"}})) == "");
}

TEST_CASE("E0116: a buffer whose size in bytes does not fit u64") {
  const std::string program = R"orch(pipeline p
buffer big: f64[1 << 62]
param n: u64 = 1 << 62
buffer dyn: f64[n]
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:17: error[E0116]: buffer `big` has 4611686018427387904 f64 elements: its size in bytes does not fit u64 (at most 2305843009213693951 elements)
buffer big: f64[1 << 62]
                ^~~~~~~
t.orch:4:17: error[E0116]: buffer `dyn` has 4611686018427387904 f64 elements (with the default values n = 4611686018427387904): its size in bytes does not fit u64 (at most 2305843009213693951 elements)
buffer dyn: f64[n]
                ^
2 errors generated.
)txt");
  // Closest valid: sizes whose bytes fit; a u64 count is checked again when bound.
  auto c = check(fix(program, {{"f64[1 << 62]", "f64[1 << 20]"}, {"= 1 << 62", "= 1 << 20"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  std::string checks;
  for (const ir::BindCheck& b : c->result.program->bind_checks)
    checks += to_string(b.code) + std::string(" ") + ir::to_string(b.condition, *c->result.program) + "\n";
  CHECK(checks == "E0116 n <= 2305843009213693951\n");
  // A u32 count cannot exceed it: no check is recorded.
  c = check(fix(program, {{"f64[1 << 62]", "f64[1 << 20]"}, {"n: u64 = 1 << 62", "n: u32 = 1 << 20"}}));
  CHECK(c->text() == "");
  CHECK(c->result.program->bind_checks.empty());
}

TEST_CASE("W0118: `keep` on a buffer the memory plan never moves, and an attribute given twice") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer h: f32[n] host keep
buffer flag: u32 keep
buffer x: f32[n] keep keep
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:23: warning[W0118]: `keep` has no effect on a `host` buffer: the memory plan never lets host buffers share memory
buffer h: f32[n] host keep
                      ^~~~
t.orch:4:18: warning[W0118]: `keep` has no effect on a device scalar: the memory plan never lets device scalars share memory
buffer flag: u32 keep
                 ^~~~
t.orch:5:23: warning[W0118]: this attribute of buffer `x` is given twice; once is enough
buffer x: f32[n] keep keep
                      ^~~~
3 warnings generated.
)txt");
  // Closest clean: `keep` once, where it means something; the flag reaches the program.
  auto c = check(fix(program, {{"host keep", "host"}, {"u32 keep", "u32"}, {"keep keep", "keep"}}));
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  CHECK(c->result.program->buffers[2].keep);
  CHECK_FALSE(c->result.program->buffers[0].keep);
}

TEST_CASE("E0117: a kernel's cost clause names what it counts, over its value parameters") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[])
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
    source """extern "C" __global__ void scale(unsigned n, float a, float* x) { x[threadIdx.x] *= a; }"""
graph main {
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:16: error[E0117]: `bytes` counts bytes and takes no precision; the precision goes on `flops`, e.g. `flops[f64] 2 * n`
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
               ^~~
t.orch:5:25: error[E0117]: `len` is not a parameter of kernel `scale`; a cost is written over the kernel's value parameters
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                        ^~~
t.orch:5:30: error[E0117]: `speed` is not a cost; a kernel's cost is `bytes` and `flops` (e.g. `cost bytes 12 * n, flops 2 * n`)
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                             ^~~~~
t.orch:5:45: error[E0117]: `flops[u32]`: the precision of FLOPs is f16, f32 or f64
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                            ^~~
t.orch:5:50: error[E0117]: `x` is not a value parameter; a cost is written over the values a launch passes, such as `n: u32`
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                                 ^
t.orch:4:30: note: `x` is declared here
kernel scale(n: u32, a: f32, x: inout f32[])
                             ^~~~~~~~~~~~~~
t.orch:5:52: error[E0117]: `<` in a cost: a cost is arithmetic (+ - * / % << >> min max ceil_div)
    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2
                                                   ^
6 errors generated.
)txt");
  // Each item once.
  CHECK(check(fix(program, {{"bytes[f64] 8 * len, speed 3, flops[u32] x < 2", "bytes 8 * n, bytes 4 * n"}}))->text() ==
        R"txt(t.orch:5:23: error[E0117]: kernel `scale` declares its `bytes` cost twice
    cost bytes 8 * n, bytes 4 * n
                      ^~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: bytes and FLOPs over the value parameters; each launch gets its own, with its
  // arguments in place of the parameters.
  const std::string good = fix(program, {{"bytes[f64] 8 * len, speed 3, flops[u32] x < 2", "bytes 8 * n, flops[f64] n"},
                                         {"  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n",
                                          "  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, x)\n  scale<<<1, 256>>>(n / 4, 2.0, x)\n"}});
  auto c = check(good);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  CHECK(p.kernels[0].has_cost);
  CHECK(p.kernels[0].cost_precision == ir::ScalarType::F64);
  const auto& nodes = p.graphs[p.main_graph].body.nodes;
  REQUIRE(nodes.size() == 2);
  const ir::KernelNode& first = nodes[0].as<ir::KernelNode>();
  const ir::KernelNode& second = nodes[1].as<ir::KernelNode>();
  REQUIRE(first.cost_bytes);
  REQUIRE(second.cost_flops);
  CHECK(ir::to_string(*first.cost_bytes, p) == "8 * n");
  CHECK(ir::to_string(*second.cost_bytes, p) == "8 * (n / 4)");
  CHECK(ir::to_string(*second.cost_flops, p) == "n / 4");
  // No cost: nothing on the launches.
  auto none = check(fix(program, {{"    cost bytes[f64] 8 * len, speed 3, flops[u32] x < 2\n", ""}}));
  REQUIRE(none->text() == "");
  CHECK_FALSE(none->result.program->graphs[none->result.program->main_graph].body.nodes[0].as<ir::KernelNode>().cost_bytes);
}

}  // TEST_SUITE("rules")
// ---- E02xx: launch shapes --------------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0201: a block of 2048 threads") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 2048>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:14: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block
  scale<<<4, 2048>>>(n, 2.0, x)
             ^~~~
1 error generated.
)txt");
  // Closest valid: use at most 1024 threads per block.
  CHECK(diagnostics_of(fix(program, {{"<<<4, 2048>>>", "<<<8, 1024>>>"}})) == "");
}

TEST_CASE("E0201: a block of 2048 threads under the param's default") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1 << 20
param threads: u32 = 2048
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:33: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block (with the default values threads = 2048)
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
                                ^~~~~~~
1 error generated.
)txt");
  // Closest valid: give the param a default that fits; the bound is checked again when the application binds it.
  CHECK(diagnostics_of(fix(program, {{"threads: u32 = 2048", "threads: u32 = 256"}})) == "");
}

TEST_CASE("E0202: a block dimension over its own limit") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<1, dim3(1, 1, 65)>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:25: error[E0202]: block of `scale` has 65 threads in z; sm_90 allows at most 64
  scale<<<1, dim3(1, 1, 65)>>>(n, 2.0, x)
                        ^~
1 error generated.
)txt");
  // Closest valid: keep z at most 64.
  CHECK(diagnostics_of(fix(program, {{"dim3(1, 1, 65)", "dim3(1, 1, 64)"}})) == "");
}

TEST_CASE("E0203: a grid dimension over its limit") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<dim3(1, 65536), 32>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:19: error[E0203]: grid of `scale` has 65536 blocks in y; sm_90 allows at most 65535
  scale<<<dim3(1, 65536), 32>>>(n, 2.0, x)
                  ^~~~~
1 error generated.
)txt");
  // Closest valid: put the large dimension in x.
  CHECK(diagnostics_of(fix(program, {{"dim3(1, 65536)", "dim3(65536, 1)"}})) == "");
}

TEST_CASE("E0203: a grid that overflows its type with the defaults, at the operator") {
  const std::string program = R"orch(pipeline p
param n: u32 = 65536
param d: u32 = 0
buffer x: f32[1024]
kernel scale(n: u32, a: f32, x: inout f32[]) source """extern "C" __global__ void scale(unsigned n, float a, float* x) {}"""
graph main {
  scale<<<n * n, 256>>>(n, 2.0, x)
  scale<<<1024 / d, 256>>>(d, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:13: error[E0203]: overflow: 65536 * 65536 does not fit u32 (with the default values n = 65536)
  scale<<<n * n, 256>>>(n, 2.0, x)
            ^
t.orch:8:16: error[E0203]: division by zero: 1024 / 0 (with the default values d = 0)
  scale<<<1024 / d, 256>>>(d, 2.0, x)
               ^
2 errors generated.
)txt");
  // Closest valid: defaults that give a grid.
  CHECK(diagnostics_of(fix(program, {{"n: u32 = 65536", "n: u32 = 1024"}, {"d: u32 = 0", "d: u32 = 4"}})) == "");
}

TEST_CASE("E0204: too much dynamic shared memory") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 256, 262144>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:19: error[E0204]: launch of `scale` asks for 262144 bytes of dynamic shared memory; sm_90 allows at most 232448 per block
  scale<<<4, 256, 262144>>>(n, 2.0, x)
                  ^~~~~~
1 error generated.
)txt");
  // Closest valid: ask for at most the target's opt-in limit.
  CHECK(diagnostics_of(fix(program, {{"262144", "232448"}})) == "");
}

TEST_CASE("E0205: an empty grid") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<n / 2048, 256>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:11: error[E0205]: grid of `scale` is empty (0) (with the default values n = 1024)
  scale<<<n / 2048, 256>>>(n, 2.0, x)
          ^~~~~~~~
1 error generated.
)txt");
  // Closest valid: round the grid up.
  CHECK(diagnostics_of(fix(program, {{"n / 2048", "ceil_div(n, 2048)"}})) == "");
}

TEST_CASE("E0205: an empty block dimension") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, dim3(0, 256)>>>(n, 2.0, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:19: error[E0205]: block of `scale` is empty (0)
  scale<<<4, dim3(0, 256)>>>(n, 2.0, x)
                  ^
1 error generated.
)txt");
  // Closest valid: give every dimension at least 1.
  CHECK(diagnostics_of(fix(program, {{"dim3(0, 256)", "dim3(1, 256)"}})) == "");
}

}  // TEST_SUITE("rules")
// ---- E03xx: copies and fills -----------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0301: a copy between element types") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
buffer x_host: f16[n] host
graph main {
  copy x -> x_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0301]: copy from `x` (f32) to `x_host` (f16): element types differ
  copy x -> x_host
  ^~~~~~~~~~~~~~~~
t.orch:3:1: note: `x` is declared here
buffer x: f32[n]
^~~~~~~~~~~~~~~~
t.orch:4:1: note: `x_host` is declared here
buffer x_host: f16[n] host
^~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: copy between buffers of one element type.
  CHECK(diagnostics_of(fix(program, {{"x_host: f16[n]", "x_host: f32[n]"}})) == "");
}

TEST_CASE("E0302: a copy into a smaller buffer") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer head: f32[256]
graph main {
  copy x -> head
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0302]: copy from `x` (1024 elements) to `head` (256 elements): the destination is smaller
  copy x -> head
  ^~~~~~~~~~~~~~
t.orch:3:1: note: `head` is declared here
buffer head: f32[256]
^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: make the destination at least as large.
  CHECK(diagnostics_of(fix(program, {{"head: f32[256]", "head: f32[1024]"}})) == "");
}

TEST_CASE("E0302: a copy into a smaller buffer under the default values") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
param m: u32 = 256
buffer x: f32[n]
buffer y: f32[m]
graph main {
  copy x -> y
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0302]: copy from `x` (1024 elements) to `y` (256 elements): the destination is smaller (with the default values n = 1024, m = 256)
  copy x -> y
  ^~~~~~~~~~~
t.orch:5:1: note: `y` is declared here
buffer y: f32[m]
^~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: pick defaults that fit; `n <= m` is checked again at bind time.
  CHECK(diagnostics_of(fix(program, {{"m: u32 = 256", "m: u32 = 1024"}})) == "");
}

TEST_CASE("E0303: a fill value out of the element type's range") {
  const std::string program = R"orch(pipeline p
buffer mask: u8[256]
graph main {
  fill mask = 256
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:15: error[E0303]: cannot fill `mask` (u8) with 256: 256 does not fit u8
  fill mask = 256
              ^~~
1 error generated.
)txt");
  // Closest valid: fill with a value the type holds.
  CHECK(diagnostics_of(fix(program, {{"fill mask = 256", "fill mask = 255"}})) == "");
}

TEST_CASE("E0303: a floating-point fill of an integer buffer") {
  const std::string program = R"orch(pipeline p
buffer counts: i32[64]
graph main {
  fill counts = 0.5
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:17: error[E0303]: cannot fill `counts` (i32) with 0.5: 0.5 is not an integer, and i32 holds integers
  fill counts = 0.5
                ^~~
1 error generated.
)txt");
  // Closest valid: fill with an integer.
  CHECK(diagnostics_of(fix(program, {{"0.5", "0"}})) == "");
}

TEST_CASE("E0304: a copy from a buffer to itself") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
graph main {
  copy x -> x
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0304]: copy from `x` to itself
  copy x -> x
  ^~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: name the destination.
  CHECK(diagnostics_of(fix(program, {{"copy x -> x", "copy x -> y"}})) == "");
}

}  // TEST_SUITE("rules")
// ---- E04xx: conditionals ---------------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0401: an allreduce inside an `if`") {
  const std::string program = R"orch(pipeline p
param n: u32 = 4096
comm world
buffer g: f32[n]
buffer bad: u32
graph main {
  if bad == 0 {
    allreduce sum g on world
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:5: error[E0401]: `allreduce` inside a conditional body: ranks could take different branches and hang, and NCCL cannot run in a graph with conditional nodes
    allreduce sum g on world
    ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  if bad == 0 {
  ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run the collective unconditionally on every rank; decide afterwards.
  CHECK(diagnostics_of(fix(program, {{"  if bad == 0 {\n    allreduce sum g on world\n  }\n", "  allreduce sum g on world\n  if bad != 0 {\n    fill g = 0\n  }\n"}})) == "");
}

TEST_CASE("E0401: a broadcast inside a `while`") {
  const std::string program = R"orch(pipeline p
comm world
buffer w: f32[1024]
buffer iters: u32
graph main {
  fill iters = 0
  while iters < 10 {
    broadcast w on world
    iters += 1
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:5: error[E0401]: `broadcast` inside a conditional body: ranks could take different branches and hang, and NCCL cannot run in a graph with conditional nodes
    broadcast w on world
    ^~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  while iters < 10 {
  ^~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: move the collective out of the loop.
  CHECK(diagnostics_of(fix(program, {{"    broadcast w on world\n", ""},
                                     {"  fill iters = 0\n", "  broadcast w on world\n  fill iters = 0\n"}})) == "");
}

TEST_CASE("E0402: a device graph launch inside an `if`") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main {
  if ready != 0 {
    launch child tail
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:5: error[E0402]: `launch child` inside a conditional body: an executable graph that holds both conditional nodes and device graph launches hangs, and a conditional body cannot be split into separate graphs
    launch child tail
    ^~~~~~~~~~~~~~~~~
t.orch:7:3: note: the conditional is here
  if ready != 0 {
  ^~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch unconditionally, and let the launched graph's kernels test `ready`.
  CHECK(diagnostics_of(fix(program, {{"  if ready != 0 {\n    launch child tail\n  }\n", "  launch child tail\n"}})) == "");
}

TEST_CASE("E0403: a case value that appears twice") {
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 0 { fill w = 1 }
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:10: error[E0403]: case 0 appears twice
    case 0 { fill w = 1 }
         ^
t.orch:6:5: note: first case 0 is here
    case 0 { fill w = 0 }
    ^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: give each case its own value.
  CHECK(diagnostics_of(fix(program, {{"case 0 { fill w = 1 }", "case 1 { fill w = 1 }"}})) == "");
}

TEST_CASE("E0403: a case value that is not an integer") {
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0.5 { fill w = 0 }
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:10: error[E0403]: a case value must be an integer constant
    case 0.5 { fill w = 0 }
         ^~~
1 error generated.
)txt");
  // Closest valid: use integer constants.
  CHECK(diagnostics_of(fix(program, {{"case 0.5", "case 0"}})) == "");
}

TEST_CASE("E0404: more switch bodies than the target allows") {
  const TestProfile profile({{"max_switch_cases", "2"}});
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 1 { fill w = 1 }
    default { fill w = 2 }
  }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0404]: switch has 3 bodies; test_profile profile allows at most 2
  switch mode {
  ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use fewer bodies (here the target profile allows 2).
  CHECK(diagnostics_of(fix(program, {{"    default { fill w = 2 }\n", ""}}), profile.path()) == "");
}

TEST_CASE("E0405: a `while kernel` body that never sets the condition") {
  const std::string program = R"orch(pipeline p
buffer counter: i32
kernel step(counter: inout i32, c: cond) source """extern "C" __global__ void step(int* counter, cudaGraphConditionalHandle c) {}"""
kernel tick(counter: inout i32) source """extern "C" __global__ void tick(int* counter) {}"""
graph main {
  fill counter = 100
  while kernel {
    tick<<<1, 32>>>(counter)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0405]: no kernel in this `while kernel` body takes `cond`, so nothing sets the loop's condition
  while kernel {
  ^~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch a kernel that takes `cond` and sets it.
  CHECK(diagnostics_of(fix(program, {{"tick<<<1, 32>>>(counter)", "step<<<1, 32>>>(counter, cond)"}})) == "");
}

TEST_CASE("E0406: an array buffer as a condition") {
  const std::string program = R"orch(pipeline p
buffer flags: u32[4]
buffer w: f32[1024]
graph main {
  if flags != 0 { fill w = 0 }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:6: error[E0406]: `flags` is an array buffer; expressions read params and device scalars (buffers without a size)
  if flags != 0 { fill w = 0 }
     ^~~~~
1 error generated.
)txt");
  // Closest valid: test a device scalar.
  CHECK(diagnostics_of(fix(program, {{"buffer flags: u32[4]", "buffer flags: u32"}})) == "");
}

TEST_CASE("E0406: a floating-point switch subject") {
  const std::string program = R"orch(pipeline p
buffer mode: f32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:10: error[E0406]: a switch subject must be an integer
  switch mode {
         ^~~~
1 error generated.
)txt");
  // Closest valid: switch on an integer scalar.
  CHECK(diagnostics_of(fix(program, {{"buffer mode: f32", "buffer mode: u32"}})) == "");
}

TEST_CASE("E0407: a switch on a target without SWITCH nodes") {
  const TestProfile profile({{"supports_switch", "false"}});
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case 0 { fill w = 0 }
    case 1 { fill w = 1 }
  }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0407]: target test_profile does not support SWITCH conditional nodes
  switch mode {
  ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: write the cases as `if`/`else` (here the profile has no SWITCH).
  CHECK(diagnostics_of(fix(program, {{"  switch mode {\n    case 0 { fill w = 0 }\n    case 1 { fill w = 1 }\n  }\n", "  if mode == 0 { fill w = 0 } else { if mode == 1 { fill w = 1 } }\n"}}), profile.path()) == "");
}

TEST_CASE("E0407: IF/ELSE on a target without IF/ELSE nodes") {
  const TestProfile profile({{"supports_if_else", "false"}});
  const std::string program = R"orch(pipeline p
buffer flag: u32
buffer w: f32[1024]
graph main {
  if flag != 0 { fill w = 0 } else { fill w = 1 }
}
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:5:3: error[E0407]: target test_profile does not support IF/ELSE conditional nodes
  if flag != 0 { fill w = 0 } else { fill w = 1 }
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use two `if`s (here the profile has IF but not IF/ELSE).
  CHECK(diagnostics_of(fix(program, {{"if flag != 0 { fill w = 0 } else { fill w = 1 }", "if flag != 0 { fill w = 0 }\n  if flag == 0 { fill w = 1 }"}}), profile.path()) == "");
}

}  // TEST_SUITE("rules")
// ---- E05xx: device-launch graphs -------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0501: an `if` in a device graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device {
  if ready != 0 { work<<<1, 1024>>>(x) }
}
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0501]: a device graph cannot hold an `if`; graphs launched from the device hold only kernels, copies, fills and child graphs
  if ready != 0 { work<<<1, 1024>>>(x) }
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `child` is a device graph
graph child device {
^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: test the condition inside the kernel.
  CHECK(diagnostics_of(fix(program, {{"if ready != 0 { work<<<1, 1024>>>(x) }", "work<<<1, 1024>>>(x)"}})) == "");
}

TEST_CASE("E0501: a `while` loop in a device graph") {
  const std::string program = R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph worker device {
  fill c = 10
  while kernel {
    step<<<1, 32>>>(c, cond)
  }
}
graph main {
  launch worker tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0501]: a device graph cannot hold a `while` loop; graphs launched from the device hold only kernels, copies, fills and child graphs
  while kernel {
  ^~~~~~~~~~~~~~
t.orch:4:1: note: `worker` is a device graph
graph worker device {
^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run the loop in a host-launched graph.
  CHECK(diagnostics_of(fix(program, {{"graph worker device {", "graph worker {"},
                                     {"  launch worker tail\n", "  call worker\n"}})) == "");
}

TEST_CASE("E0502: an empty device graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
graph child device { }
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:1: error[E0502]: device graph `child` is empty; a graph launched from the device needs at least one kernel, copy or fill
graph child device { }
^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: give it work.
  CHECK(diagnostics_of(fix(program, {{"graph child device { }", "graph child device { fill x = 0 }"}})) == "");
}

TEST_CASE("E0504: launching a graph not declared `device`") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child { work<<<1, 1024>>>(x) }
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:21: error[E0504]: `child` is not a device graph; only graphs declared `device` can be launched
graph main { launch child tail }
                    ^~~~~
t.orch:4:7: note: `child` is declared here
graph child { work<<<1, 1024>>>(x) }
      ^~~~~
1 error generated.
)txt");
  // Closest valid: declare it `device`.
  CHECK(diagnostics_of(fix(program, {{"graph child {", "graph child device {"}})) == "");
}

TEST_CASE("E0504: a family where one graph is expected") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel spawn(g: graph) launches g tail <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main {
  spawn<<<1, 32>>>(experts)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:20: error[E0504]: parameter `g` of `spawn` takes one graph, but `experts` is a family of 4 graphs
  spawn<<<1, 32>>>(experts)
                   ^~~~~~~
t.orch:4:14: note: `g` is declared here
kernel spawn(g: graph) launches g tail <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
             ^~~~~~~~
1 error generated.
)txt");
  // Closest valid: declare the parameter as a family of the same size.
  CHECK(diagnostics_of(fix(program, {{"spawn(g: graph)", "spawn(g: graph[4])"}})) == "");
}

TEST_CASE("E0504: a family member out of range") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main {
  launch experts[4] tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:18: error[E0504]: `experts` has members 0 to 3; 4 is not one
  launch experts[4] tail
                 ^
1 error generated.
)txt");
  // Closest valid: launch a member that exists.
  CHECK(diagnostics_of(fix(program, {{"experts[4] tail", "experts[3] tail"}})) == "");
}

TEST_CASE("E0505: a device graph on a target without device graph launch") {
  const TestProfile profile({{"supports_device_launch", "false"}});
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program, profile.path()) == R"txt(t.orch:4:7: error[E0505]: target test_profile does not support graphs launched from the device
graph child device { work<<<1, 1024>>>(x) }
      ^~~~~
1 error generated.
)txt");
  // Closest valid: run the work in the host graph (here the profile has no device launch).
  CHECK(diagnostics_of(fix(program, {{"graph child device { work<<<1, 1024>>>(x) }\ngraph main { launch child tail }", "graph main { work<<<1, 1024>>>(x) }"}}), profile.path()) == "");
}

}  // TEST_SUITE("rules")
// ---- E06xx: launch budgets and ordering ------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0601: one kernel's budget over 120") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[200]) launches g fire_and_forget <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: 200] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:36: error[E0601]: kernel `fan` may make 200 fire-and-forget launches, but one graph execution allows at most 120
kernel fan(g: graph[200]) launches g fire_and_forget <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                   ^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch at most 120 graphs fire-and-forget per execution.
  CHECK(diagnostics_of(fix(program, {{"<= 200", "<= 120"}})) == "");
}

TEST_CASE("E0601: budgets that add up to more than 120") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[100]) launches g fire_and_forget <= 100 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph cx[i: 100] device { work<<<1, 1024>>>(x) }
graph cy[i: 100] device { work<<<1, 1024>>>(y) }
graph main {
  fan<<<1, 256>>>(cx)
  fan<<<1, 256>>>(cy)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0601]: one execution of `main` may make 200 fire-and-forget launches; sm_90 allows at most 120
  fan<<<1, 256>>>(cy)
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: fire-and-forget launches are also made here
  fan<<<1, 256>>>(cx)
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: keep the sum within 120.
  CHECK(diagnostics_of(fix(program, {{"<= 100", "<= 60"}})) == "");
}

TEST_CASE("E0602: one kernel's tail budget over 255") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[300]) launches g tail <= 300 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: 300] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:36: error[E0602]: kernel `fan` may leave 300 tail launches pending, but one graph execution allows at most 255
kernel fan(g: graph[300]) launches g tail <= 300 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                   ^~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: leave at most 255 tail launches pending.
  CHECK(diagnostics_of(fix(program, {{"<= 300", "<= 255"}})) == "");
}

TEST_CASE("E0602: tail budgets that add up to more than 255") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[200]) launches g tail <= 200 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph cx[i: 200] device { work<<<1, 1024>>>(x) }
graph cy[i: 200] device { work<<<1, 1024>>>(y) }
graph main {
  fan<<<1, 256>>>(cx)
  fan<<<1, 256>>>(cy)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0602]: one execution of `main` may leave 400 tail launches pending; sm_90 allows at most 255
  fan<<<1, 256>>>(cy)
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: tail launches are also made here
  fan<<<1, 256>>>(cx)
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: keep the sum within 255.
  CHECK(diagnostics_of(fix(program, {{"tail <= 200", "tail <= 100"}})) == "");
}

TEST_CASE("E0603: two pending self tail launches") {
  const std::string program = R"orch(pipeline p
buffer work: f32[1024]
kernel again(work: inout f32[], self: graph) launches self tail <= 2 source """extern "C" __global__ void again(float* w, cudaGraphExec_t self) {}"""
graph rounds device {
  again<<<132, 256>>>(work, self)
}
graph main { launch rounds tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0603]: one execution of `rounds` may leave 2 self tail launches pending; at most 1 is allowed
  again<<<132, 256>>>(work, self)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: relaunch yourself at most once per execution.
  CHECK(diagnostics_of(fix(program, {{"self tail <= 2", "self tail <= 1"}})) == "");
}

TEST_CASE("E0604: a launch inside a `while` loop") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer iters: u32
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 1024>>>(x) }
graph main {
  fill iters = 0
  while iters < 4 {
    launch child tail
    iters += 1
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:9:5: error[E0604]: `launch child` inside a `while` loop: the loop has no trip bound, so neither have the launches one graph execution makes
    launch child tail
    ^~~~~~~~~~~~~~~~~
t.orch:8:3: note: the loop is here
  while iters < 4 {
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch outside the loop (a device graph can relaunch itself with `self`).
  CHECK(diagnostics_of(fix(program, {{"  while iters < 4 {\n    launch child tail\n    iters += 1\n  }\n", "  launch child tail\n"}})) == "");
}

TEST_CASE("E0605: a graph parameter without a budget") {
  const std::string program = R"orch(pipeline p
kernel spawn(g: graph) source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:14: error[E0605]: graph parameter `g` of kernel `spawn` has no launch budget; declare one, e.g. `launches g tail <= 1`
kernel spawn(g: graph) source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
             ^~~~~~~~
1 error generated.
)txt");
  // Closest valid: declare how many launches it makes.
  CHECK(diagnostics_of(fix(program, {{"spawn(g: graph)", "spawn(g: graph) launches g tail <= 1"}})) == "");
}

TEST_CASE("E0605: a budget for a parameter that is not a graph") {
  const std::string program = R"orch(pipeline p
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:54: error[E0605]: launch budget names `n`, which is not a `graph` parameter
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
                                                     ^
t.orch:2:24: note: `n` is declared here
kernel spawn(g: graph, n: u32) launches g tail <= 1, n fire_and_forget <= 4 source """extern "C" __global__ void spawn(cudaGraphExec_t g, unsigned n) {}"""
                       ^~~~~~
1 error generated.
)txt");
  // Closest valid: budget only `graph` parameters.
  CHECK(diagnostics_of(fix(program, {{", n fire_and_forget <= 4", ""}})) == "");
}

TEST_CASE("E0606: reading what fire-and-forget work writes") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { y[threadIdx.x] = 1.0f; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 1024>>>(y) }
graph main {
  spawn<<<1, 32>>>(child)
  copy y -> y_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:9:3: error[E0606]: this statement reads `y`, which `child` writes; `child` is launched fire_and_forget, so nothing orders its work before this statement
  copy y -> y_host
  ^~~~~~~~~~~~~~~~
t.orch:8:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: move the reader into the launched graph, after the work it needs.
  CHECK(diagnostics_of(fix(program, {{"spawn<<<1, 32>>>(child)\n  copy y -> y_host\n", "spawn<<<1, 32>>>(child)\n"},
                                     {"graph child device { work<<<1, 1024>>>(y) }", "graph child device {\n  work<<<1, 1024>>>(y)\n  copy y -> y_host\n}"}})) == "");
}

TEST_CASE("E0607: using what a tail-launched graph writes") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { y[threadIdx.x] = 1.0f; }"""
graph child device { work<<<1, 1024>>>(y) }
graph main {
  launch child tail
  copy y -> y_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:3: error[E0607]: this statement reads `y`, which `child` writes, but `child` is tail-launched: it runs after this whole graph, not before this statement
  copy y -> y_host
  ^~~~~~~~~~~~~~~~
t.orch:7:3: note: `child` is tail-launched here
  launch child tail
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: do the work that needs the result in the tail-launched graph.
  CHECK(diagnostics_of(fix(program, {{"launch child tail\n  copy y -> y_host\n", "launch child tail\n"},
                                     {"graph child device { work<<<1, 1024>>>(y) }", "graph child device {\n  work<<<1, 1024>>>(y)\n  copy y -> y_host\n}"}})) == "");
}

// The device-launch model (check_launches.cpp): environments, tail order, sibling launches, and
// one pending launch per executable graph.
TEST_CASE("E0606: a statement writes what fire-and-forget work reads") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
buffer x_host: f32[1024] host
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { look<<<1, 1024>>>(x, y) }
graph main {
  spawn<<<1, 32>>>(child)
  fill x = 0
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0606]: this statement writes `x`, which `child` reads; `child` is launched fire_and_forget, so nothing orders its work before this statement
  fill x = 0
  ^~~~~~~~~~
t.orch:9:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: a later statement may read what the launched graph only reads.
  CHECK(diagnostics_of(fix(program, {{"  fill x = 0\n", "  copy x -> x_host\n"}})) == "");
}

TEST_CASE("E0606: what a launched graph launches counts as its work") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer z: f32[1024]
buffer x_host: f32[1024] host
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph inner device { work<<<1, 1024>>>(x) }
graph outer device { launch inner fire_and_forget }
graph main {
  launch outer fire_and_forget
  copy x -> x_host
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0606]: this statement reads `x`, which `outer` writes; `outer` is launched fire_and_forget, so nothing orders its work before this statement
  copy x -> x_host
  ^~~~~~~~~~~~~~~~
t.orch:9:3: note: `outer` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  launch outer fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: the nested launch works on another buffer.
  CHECK(diagnostics_of(fix(program, {{"graph inner device { work<<<1, 1024>>>(x) }", "graph inner device { work<<<1, 1024>>>(z) }"}})) == "");
}

TEST_CASE("a launch is ordered after what the graphs it launches use, at any depth") {
  // main writes x, then launches `outer`, which launches `inner`, which reads x. The launching
  // statement carries what everything it launches touches (compute_footprints, to a fixpoint),
  // so the DAG orders it after the write; one level deep would miss `inner`.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
graph inner device { look<<<1, 32>>>(x) }
graph outer device { launch inner tail }
graph main {
  fill x = 1
  fill y = 2
  launch outer tail
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  const ir::Program& p = *c->result.program;
  const ir::Region& body = p.graphs[p.main_graph].body;
  REQUIRE(body.nodes.size() == 3);
  std::vector<std::pair<int, int>> edges;
  for (const ir::Edge& e : body.edges) edges.push_back({e.from, e.to});
  CHECK(edges == std::vector<std::pair<int, int>>{{0, 2}});
}

TEST_CASE("E0606: two fire-and-forget launches of one kernel that write one buffer") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel two(a: graph, b: graph) launches a fire_and_forget <= 1, b fire_and_forget <= 1 source """extern "C" __global__ void two(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph first device { work<<<1, 1024>>>(x) }
graph second device { work<<<1, 1024>>>(x) }
graph main { two<<<1, 32>>>(first, second) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:14: error[E0606]: `two` launches `first` fire_and_forget and `second` fire_and_forget: `second` writes `x`, which `first` writes, and nothing orders one before the other
graph main { two<<<1, 32>>>(first, second) }
             ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: tail-launch the second; it runs after the first has finished.
  CHECK(diagnostics_of(fix(program, {{"b fire_and_forget <= 1", "b tail <= 1"}})) == "");
}

TEST_CASE("E0606: two fire-and-forget launch statements that write one buffer") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph first device { work<<<1, 1024>>>(x) }
graph second device { work<<<1, 1024>>>(x) }
graph main {
  launch first fire_and_forget
  launch second fire_and_forget
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:3: error[E0606]: `second`, launched fire_and_forget here, writes `x`, which `first` writes; `first` is launched fire_and_forget, so nothing orders its work before `second`'s
  launch second fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:7:3: note: `first` is launched fire_and_forget here
  launch first fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: tail-launch the second, as with one kernel.
  CHECK(diagnostics_of(fix(program, {{"launch second fire_and_forget", "launch second tail"}})) == "");
}

TEST_CASE("members of one family may share buffers when launched together") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[4]) launches g fire_and_forget <= 4 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main {
  fan<<<1, 32>>>(part)
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("E0607: a fire-and-forget launch after a tail launch that writes what it reads") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch produce tail
  launch consume fire_and_forget
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0607]: `consume`, launched fire_and_forget here, reads `x`, which `produce` writes, but `produce` is tail-launched: it runs after this whole graph, not before `consume`
  launch consume fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `produce` is tail-launched here
  launch produce tail
  ^~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch the producer fire-and-forget and the consumer as a tail launch: a tail
  // launch waits for all fire-and-forget work.
  CHECK(diagnostics_of(fix(program, {{"  launch produce tail\n  launch consume fire_and_forget\n", "  launch produce fire_and_forget\n  launch consume tail\n"}})) == "");
}

TEST_CASE("a tail launch after fire-and-forget launches of one kernel, and tail launches in order, are ordered") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
buffer z: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel both(a: graph, b: graph) launches a fire_and_forget <= 1, b tail <= 1 source """extern "C" __global__ void both(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph again device { look<<<1, 1024>>>(y, z) }
graph main {
  both<<<1, 32>>>(produce, consume)
  launch again tail
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("E0608: one graph launched twice fire-and-forget") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 256>>>(x) }
graph main {
  launch child fire_and_forget
  launch child fire_and_forget
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:6:3: note: `child` is also launched here
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: a family has one executable graph per member.
  CHECK(diagnostics_of(fix(program, {{"graph child device", "graph child[i: 2] device"}, {"  launch child fire_and_forget\n  launch child fire_and_forget\n", "  launch child[0] fire_and_forget\n  launch child[1] fire_and_forget\n"}})) == "");
}

TEST_CASE("E0608: a budget of two launches of one graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph) launches g tail <= 2 source """extern "C" __global__ void fan(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 256>>>(x) }
graph main { fan<<<1, 32>>>(child) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:14: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
graph main { fan<<<1, 32>>>(child) }
             ^~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch it once per execution.
  CHECK(diagnostics_of(fix(program, {{"tail <= 2", "tail <= 1"}})) == "");
}

TEST_CASE("E0608: a graph that launches itself fire-and-forget") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph again device {
  work<<<1, 256>>>(x)
  launch again fire_and_forget
}
graph main { launch again tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0608]: `again` launches itself fire_and_forget while it is running; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is running (cudaErrorInvalidValue)
  launch again fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: relaunch itself as a tail launch (a loop; see E0603).
  CHECK(diagnostics_of(fix(program, {{"launch again fire_and_forget", "launch again tail"}})) == "");
}

TEST_CASE("E0608: two members of a family that launch the same graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device { work<<<1, 256>>>(y) }
graph part[i: 2] device {
  work<<<1, 256>>>(x)
  launch child fire_and_forget
}
graph main {
  launch part[0] tail
  launch part[1] tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:3: error[E0608]: `child` may be launched 2 times in one execution of `main`; an executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is pending or running (cudaErrorInvalidValue)
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:3: note: launched here by each of the 2 members of `part` that run
  launch child fire_and_forget
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: each member launches its own member of a family.
  CHECK(diagnostics_of(fix(program, {{"graph child device", "graph child[c: 2] device"}, {"launch child fire_and_forget", "launch child[i] fire_and_forget"}})) == "");
}

TEST_CASE("E0608: a family budget larger than the family") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[4]) launches g fire_and_forget <= 8 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main { fan<<<1, 32>>>(part) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:34: error[E0608]: kernel `fan` may make 8 launches from `g`, a family of 4 graphs, so it would launch some member twice; an executable graph runs one launch at a time
kernel fan(g: graph[4]) launches g fire_and_forget <= 8 source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
                                 ^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch each member at most once.
  CHECK(diagnostics_of(fix(program, {{"fire_and_forget <= 8", "fire_and_forget <= 4"}})) == "");
}

TEST_CASE("E0609: a graph that relaunches itself and tail-launches another") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel step(x: inout f32[], again: graph, done: graph) launches again tail <= 1, done tail <= 1 source """extern "C" __global__ void step(float* x, cudaGraphExec_t again, cudaGraphExec_t done) {}"""
graph finish device { look<<<1, 1024>>>(x, y) }
graph rounds device { step<<<1, 256>>>(x, self, finish) }
graph main { launch rounds tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:23: error[E0609]: `rounds` relaunches itself and also tail-launches `finish`: each round runs before the tail launches of the rounds before it, so several launches of `finish` could be pending at once
graph rounds device { step<<<1, 256>>>(x, self, finish) }
                      ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: tail-launch `finish` after `rounds` from the graph that launches the loop: it
  // runs when the last round has finished.
  CHECK(diagnostics_of(fix(program, {{"kernel step(x: inout f32[], again: graph, done: graph) launches again tail <= 1, done tail <= 1 source \"\"\"extern \"C\" __global__ void step(float* x, cudaGraphExec_t again, cudaGraphExec_t done) {}\"\"\"", "kernel step(x: inout f32[], again: graph) launches again tail <= 1 source \"\"\"extern \"C\" __global__ void step(float* x, cudaGraphExec_t again) {}\"\"\""}, {"step<<<1, 256>>>(x, self, finish)", "step<<<1, 256>>>(x, self)"}, {"graph main { launch rounds tail }", "graph main {\n  launch rounds tail\n  launch finish tail\n}"}})) == "");
}

TEST_CASE("E0610: a tail launch after a sibling launch") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch produce sibling
  launch consume tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0610]: `consume` is tail-launched here and reads `x`, which `produce` writes; `produce` is launched as a sibling, which runs in the parent graph's execution, so the tail launch does not wait for it
  launch consume tail
  ^~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `produce` is launched as a sibling here; launched fire_and_forget, it would finish before the tail launch starts
  launch produce sibling
  ^~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch it fire-and-forget: the tail launch waits for that.
  CHECK(diagnostics_of(fix(program, {{"launch produce sibling", "launch produce fire_and_forget"}})) == "");
}

TEST_CASE("E0610: a tail launch after one whose sibling launch writes what it reads") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
graph produce device { work<<<1, 1024>>>(x) }
graph first device { launch produce sibling }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main {
  launch first tail
  launch consume tail
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:3: error[E0610]: `consume` is tail-launched here and reads `x`, which work that `first` launches as a sibling writes; tail launches wait for `first` but not for its sibling launches
  launch consume tail
  ^~~~~~~~~~~~~~~~~~~
t.orch:10:3: note: `first` is tail-launched here
  launch first tail
  ^~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: the nested launch is fire-and-forget, part of `first`'s execution.
  CHECK(diagnostics_of(fix(program, {{"launch produce sibling", "launch produce fire_and_forget"}})) == "");
}

TEST_CASE("E0611: one kernel tail-launches two graphs that use one buffer") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel look(x: in f32[], y: out f32[]) source """extern "C" __global__ void look(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }"""
kernel both(a: graph, b: graph) launches a tail <= 1, b tail <= 1 source """extern "C" __global__ void both(cudaGraphExec_t a, cudaGraphExec_t b) {}"""
graph produce device { work<<<1, 1024>>>(x) }
graph consume device { look<<<1, 1024>>>(x, y) }
graph main { both<<<1, 32>>>(produce, consume) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:9:14: error[E0611]: `both` tail-launches `produce` and `consume`, and `consume` reads `x`, which `produce` writes: they run in the order the kernel launches them, which orch cannot see
graph main { both<<<1, 32>>>(produce, consume) }
             ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: two `launch` statements, which run in program order.
  CHECK(diagnostics_of(fix(program, {{"graph main { both<<<1, 32>>>(produce, consume) }", "graph main {\n  launch produce tail\n  launch consume tail\n}"}})) == "");
}

TEST_CASE("E0504: a family member index past the end for one member") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph stage[j: 4] device {
  work<<<1, 256>>>(x)
  launch stage[j + 1] tail
}
graph main { launch stage[0] tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:16: error[E0504]: `stage` has members 0 to 3; `j + 1` is 4 in member 3 of `stage`
  launch stage[j + 1] tail
               ^~~~~
1 error generated.
)txt");
  // Closest valid: an index that names a member for every member.
  CHECK(diagnostics_of(fix(program, {{"launch stage[j + 1] tail", "launch last[j] tail"}, {"graph main", "graph last[k: 4] device { work<<<1, 256>>>(x) }\ngraph main"}})) == "");
}

TEST_CASE("E0504: a family member index from a param") {
  const std::string program = R"orch(pipeline p
param which: u32 = 4
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph part[i: 4] device { work<<<1, 256>>>(x) }
graph main { launch part[which] tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:26: error[E0504]: `part` has members 0 to 3; `which` is 4 (with the default values which = 4)
graph main { launch part[which] tail }
                         ^~~~~
1 error generated.
)txt");
  // Closest valid: a default that names a member (checked again at bind time).
  CHECK(diagnostics_of(fix(program, {{"param which: u32 = 4", "param which: u32 = 3"}})) == "");
}

TEST_CASE("`self` in a graph that is only called means the graph it is called from") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel again(x: inout f32[], g: graph) launches g tail <= 1 source """extern "C" __global__ void again(float* x, cudaGraphExec_t g) {}"""
graph step { again<<<1, 256>>>(x, self) }
graph rounds device { call step }
graph main { launch rounds tail }
)orch";
  CHECK(diagnostics_of(program) == "");
}

}  // TEST_SUITE("rules")
// ---- E07xx: collectives ----------------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0701: an allreduce between element types") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer total: f64[1024]
graph main {
  allreduce sum g -> total on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0701]: `allreduce` from `g` (f32) to `total` (f64): element types differ
  allreduce sum g -> total on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: reduce into a buffer of the same element type.
  CHECK(diagnostics_of(fix(program, {{"total: f64[1024]", "total: f32[1024]"}})) == "");
}

TEST_CASE("E0701: an element type NCCL does not have") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: i16[1024]
graph main {
  allreduce sum g on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0701]: NCCL has no i16 type for `allreduce`
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use a type NCCL reduces.
  CHECK(diagnostics_of(fix(program, {{"g: i16[1024]", "g: i32[1024]"}})) == "");
}

TEST_CASE("E0702: an allreduce between buffer sizes") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer total: f32[512]
graph main {
  allreduce sum g -> total on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0702]: `allreduce` from `g` (1024 elements) to `total` (512 elements): sizes differ
  allreduce sum g -> total on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: give both buffers the same count.
  CHECK(diagnostics_of(fix(program, {{"total: f32[512]", "total: f32[1024]"}})) == "");
}

TEST_CASE("E0702: an allgather in place") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allgather g -> g on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0702]: `allgather` needs separate source and destination buffers
  allgather g -> g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: gather into a separate buffer (its size is checked against world_size at bind time).
  CHECK(diagnostics_of(fix(program, {{"buffer g: f32[1024]\n", "buffer g: f32[1024]\nbuffer all: f32[4096]\n"},
                                     {"allgather g -> g", "allgather g -> all"}})) == "");
}

TEST_CASE("E0702: collective arguments no world size allows are refused when checked") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
buffer all: f32[1000]
buffer b: f32[64]
graph main {
  allgather g -> all on world
  broadcast b from world_size on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0702]: this needs `allgather` destination `all` holds world_size times `g`, which holds for no world size from 1 to 65536 (`1000 == 1024 * world_size`)
  allgather g -> all on world
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:20: error[E0702]: this needs `broadcast` root is a rank of the communicator, which holds for no world size from 1 to 65536 (`world_size >= 0 && world_size < world_size`)
  broadcast b from world_size on world
                   ^~~~~~~~~~
2 errors generated.
)txt");
  // Closest valid: sizes and a root some world size allows (checked again at bind time).
  CHECK(diagnostics_of(fix(program, {{"all: f32[1000]", "all: f32[4096]"}, {"from world_size", "from 0"}})) == "");
}

TEST_CASE("E0703: an allreduce in a device graph") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph child device {
  work<<<1, 1024>>>(g)
  allreduce sum g on world
}
graph main { launch child tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0703]: `allreduce` cannot run in a device graph: NCCL work is launched from the host's graph
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `child` is a device graph
graph child device {
^~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run the work and the collective in the host-launched graph.
  CHECK(diagnostics_of(fix(program, {{"graph child device {", "graph child {"},
                                     {"  allreduce sum g on world\n}\ngraph main { launch child tail }", "}\ngraph main {\n  call child\n  allreduce sum g on world\n}"}})) == "");
}

TEST_CASE("E0704: an unknown reduction") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024]
graph main {
  allreduce mean g on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:13: error[E0704]: unknown reduction `mean`; use sum, prod, min, max or avg
  allreduce mean g on world
            ^~~~
1 error generated.
)txt");
  // Closest valid: use sum, prod, min, max or avg.
  CHECK(diagnostics_of(fix(program, {{"allreduce mean", "allreduce avg"}})) == "");
}

TEST_CASE("E0705: a collective on host memory") {
  const std::string program = R"orch(pipeline p
comm world
buffer g: f32[1024] host
graph main {
  allreduce sum g on world
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0705]: `allreduce` on `g`, a host buffer; collectives work on device memory
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:3:1: note: `g` is declared here
buffer g: f32[1024] host
^~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use device memory.
  CHECK(diagnostics_of(fix(program, {{"g: f32[1024] host", "g: f32[1024]"}})) == "");
}

}  // TEST_SUITE("rules")
// ---- E08xx: structure ------------------------------------------------------------------------
TEST_SUITE("rules") {
TEST_CASE("E0801: a graph that calls itself") {
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
graph main {
  fill x = 0
  call main
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0801]: `call main` makes a cycle: main -> main
  call main
  ^~~~~~~~~
1 error generated.
)txt");
  // Closest valid: use `while` (or a device graph's `self` relaunch) to repeat.
  CHECK(diagnostics_of(fix(program, {{"  call main\n", ""}})) == "");
}

// main -> g1 -> ... -> g`last`, the last graph filling x.
std::string call_chain(int last) {
  std::string program = "pipeline p\nbuffer x: f32[16]\ngraph main { call g1 }\n";
  for (int i = 1; i < last; ++i)
    program += "graph g" + std::to_string(i) + " { call g" + std::to_string(i + 1) + " }\n";
  return program + "graph g" + std::to_string(last) + " { fill x = 0 }\n";
}

TEST_CASE("E0804: calls nested more than 64 deep") {
  // main -> g1 -> ... -> g65 is 65 levels of `call`; g1's own chain, built first, is 64.
  const std::string program = call_chain(65);
  CHECK(diagnostics_of(program) == R"txt(t.orch:67:13: error[E0804]: `call g65` nests calls 65 deep (main -> g1 -> g2 -> ... (60 more) -> g63 -> g64 -> g65); orch inlines at most 64 levels of `call`
graph g64 { call g65 }
            ^~~~~~~~
t.orch:66:13: note: called from here
graph g63 { call g64 }
            ^~~~~~~~
t.orch:65:13: note: called from here
graph g62 { call g63 }
            ^~~~~~~~
t.orch:64:13: note: called from here
graph g61 { call g62 }
            ^~~~~~~~
t.orch:63:13: note: called from here
graph g60 { call g61 }
            ^~~~~~~~
t.orch:62:13: note: called from here
graph g59 { call g60 }
            ^~~~~~~~
t.orch:61:13: note: called from here
graph g58 { call g59 }
            ^~~~~~~~
t.orch:60:13: note: called from here
graph g57 { call g58 }
            ^~~~~~~~
t.orch:3:14: note: called from here (56 more in between are not shown)
graph main { call g1 }
             ^~~~~~~
1 error generated.
)txt");
  // Closest valid: 64 levels.
  CHECK(diagnostics_of(fix(program, {{"graph main { call g1 }", "graph main { call g2 }"}})) == "");
}

// `graphs` graphs, each nesting the next `call` (or, in the last, a fill) in `depth` `if`s.
std::string nested_calls(int graphs, int depth) {
  std::string program = "pipeline p\nbuffer x: f32[16]\nbuffer flag: u32\n";
  for (int g = 0; g < graphs; ++g) {
    program += g == 0 ? "graph main {\n" : "graph g" + std::to_string(g) + " {\n";
    for (int i = 0; i < depth; ++i) program += "if flag == " + std::to_string(i) + " {\n";
    program += g + 1 < graphs ? "call g" + std::to_string(g + 1) + "\n" : "fill x = 0\n";
    for (int i = 0; i <= depth; ++i) program += "}\n";
  }
  return program;
}

TEST_CASE("E0804: statements nested too deeply through calls") {
  // Each graph nests 100 `if`s, within the parser's 200 but past a pipeline's 64 (E0412, once
  // per chain); through two calls, main's `call g1` would reach 302 levels, which neither the
  // checker nor any pass after it recurses into.
  const auto c = check(nested_calls(3, 100));
  CHECK(c->codes() == "E0412 E0804 E0412 E0412");
  CHECK(c->text().find(R"txt(t.orch:105:1: error[E0804]: `call g1` nests statements 302 levels deep (conditionals and calls, through every graph it calls); orch allows at most 256
call g1
^~~~~~~
)txt") != std::string::npos);
  // One call fewer (201 levels) is inlined, and is only E0412 (g1 on its own and inside main
  // are one chain each).
  CHECK(check(nested_calls(2, 100))->codes() == "E0412 E0412");
  // Valid: 3 x 21 conditionals and 2 calls.
  CHECK(diagnostics_of(nested_calls(3, 21)) == "");
}

// g1 calls g2 twice, ..., g`levels - 1` calls g`levels` twice: 2^levels statements inlined.
std::string call_fan(int levels) {
  std::string program = "pipeline p\nbuffer x: f32[16]\n";
  for (int i = 1; i < levels; ++i) {
    std::string next = "g" + std::to_string(i + 1);
    program += "graph g" + std::to_string(i) + " {\n  call " + next + "\n  call " + next + "\n}\n";
  }
  return program + "graph g" + std::to_string(levels) + " { fill x = 0 }\ngraph main { call g1 }\n";
}

TEST_CASE("E0804: the nesting limit through calls is exactly 256") {
  // main calls g1 at depth 0; g1 nests its call of g2 in 127 `if`s, g2 nests its fill in
  // `depth` `if`s: the fill is at 127 + 1 + depth + 1 levels, counting the call. Conditionals
  // past 64 are E0412 already (one report per chain: g1's, g2's), so only a pipeline with that
  // error gets this deep: the limit keeps the checker's recursion bounded, not the pipeline.
  auto program = [](int depth) {
    std::string text = "pipeline p\nbuffer x: f32[16]\nbuffer flag: u32\ngraph main { call g1 }\ngraph g1 {\n";
    for (int i = 0; i < 127; ++i) text += "if flag == 1 {\n";
    text += "call g2\n" + std::string(127, '}') + "\n}\ngraph g2 {\n";
    for (int i = 0; i < depth; ++i) text += "if flag == 2 {\n";
    return text + "fill x = 0\n" + std::string(depth, '}') + "\n}\n";
  };
  CHECK(check(program(127))->codes() == "E0412 E0412");
  const auto c = check(program(128));
  CHECK(c->codes() == "E0804 E0412 E0412");
  CHECK(c->text().find(R"txt(t.orch:4:14: error[E0804]: `call g1` nests statements 257 levels deep (conditionals and calls, through every graph it calls); orch allows at most 256
graph main { call g1 }
             ^~~~~~~
)txt") == 0);
}

TEST_CASE("E0805: the inlining budget is exactly 50,000 statements") {
  // A 1,000-statement helper called 50 times is 50,000; one statement more through another
  // call is over.
  const std::string helper = "graph helper {\n" + [] {
    std::string body;
    for (int i = 0; i < 1000; ++i) body += "  fill x = 0\n";
    return body;
  }() + "}\n";
  std::string calls;
  for (int i = 0; i < 50; ++i) calls += "  call helper\n";
  const std::string program =
      "pipeline p\nbuffer x: f32[16]\ngraph tiny { fill x = 1 }\n" + helper + "graph main {\n" + calls + "}\n";
  CHECK(diagnostics_of(program) == "");
  CHECK(check(program + "graph more { call tiny }\n")->codes() == "E0805");
}

TEST_CASE("E0805: calls that inline too many statements") {
  // Each graph is checked on its own as well as where it is called, so g1, checked first,
  // meets the limit: its first `call g2` inlines 3 * 2^14 - 2 = 49150 statements, the second
  // would pass 50000.
  const std::string program = call_fan(16);
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0805]: `call g2` would inline 49150 statements (`g2` with every graph it calls, once per `call`) on top of the 49150 already inlined; orch inlines at most 50000 statements in one pipeline (each graph is also checked on its own)
  call g2
  ^~~~~~~
1 error generated.
)txt");
  // Closest valid: three levels fewer, about 37,000 statements inlined in all.
  CHECK(diagnostics_of(call_fan(13)) == "");
}

}  // TEST_SUITE("rules")

TEST_SUITE("rules: call") {

TEST_CASE("an error in a called graph is reported once, with the calls that lead to it") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  call outer
  call inner
}
graph outer {
  fill x = 0
  call inner
}
graph inner {
  work<<<1, 2048>>>(x)
}
)orch";
  // Found first inside main -> outer -> inner; the same statement met again (main's own
  // `call inner`, outer and inner checked on their own) is not reported again.
  CHECK(diagnostics_of(program) == R"txt(t.orch:13:13: error[E0201]: block of `work` has 2048 threads; sm_90 allows at most 1024 per block
  work<<<1, 2048>>>(x)
            ^~~~
t.orch:10:3: note: called from here
  call inner
  ^~~~~~~~~~
t.orch:5:3: note: called from here
  call outer
  ^~~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"2048", "1024"}})) == "");
}

TEST_CASE("a rule broken only by inlined statements names the call sites") {
  // The race is between two statements of `helper`, visible once `helper` is inlined after a
  // fire-and-forget launch in main.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 1024>>>(x) }
graph helper {
  work<<<1, 1024>>>(x)
}
graph main {
  spawn<<<1, 32>>>(child)
  call helper
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:3: error[E0606]: this statement writes `x`, which `child` writes; `child` is launched fire_and_forget, so nothing orders its work before this statement
  work<<<1, 1024>>>(x)
  ^~~~~~~~~~~~~~~~~~~~
t.orch:10:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
t.orch:11:3: note: called from here
  call helper
  ^~~~~~~~~~~
1 error generated.
)txt");
}

TEST_CASE("an ordering error ten calls deep shows 8 of the calls") {
  // check_launches.cpp reports about inlined statements with their call sites, capped like
  // every context: the 7 innermost and the outermost, which counts the rest.
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
graph child device { look<<<1, 32>>>(x) }
graph main { call h1 }
)orch";
  for (int i = 1; i < 10; ++i)
    program += "graph h" + std::to_string(i) + " { call h" + std::to_string(i + 1) + " }\n";
  program += "graph h10 {\n  launch child tail\n  fill x = 0\n}\n";
  std::string expected = R"txt(t.orch:17:3: error[E0607]: this statement writes `x`, which `child` reads, but `child` is tail-launched: it runs after this whole graph, not before this statement
  fill x = 0
  ^~~~~~~~~~
t.orch:16:3: note: `child` is tail-launched here
  launch child tail
  ^~~~~~~~~~~~~~~~~
)txt";
  for (int i = 9; i >= 3; --i) {
    const std::string call = "graph h" + std::to_string(i) + " { call h" + std::to_string(i + 1) + " }";
    expected += "t.orch:" + std::to_string(i + 5) + ":12: note: called from here\n" + call + "\n" +
                std::string(11, ' ') + "^" + std::string(call.size() - 14, '~') + "\n";
  }
  expected += R"txt(t.orch:5:14: note: called from here (2 more in between are not shown)
graph main { call h1 }
             ^~~~~~~
1 error generated.
)txt";
  CHECK(diagnostics_of(program) == expected);
  CHECK(diagnostics_of(fix(program, {{"  fill x = 0\n", ""}})) == "");
}

TEST_CASE("121 fire-and-forget launches: one error, 8 notes") {
  // Of 121 different device graphs, so that each is launched once (E0608 counts launches of
  // one graph).
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
)orch";
  for (int i = 0; i < 121; ++i) program += "graph c" + std::to_string(i) + " device { look<<<1, 32>>>(x) }\n";
  program += "graph main {\n";
  for (int i = 0; i < 121; ++i) program += "  spawn<<<1, 32>>>(c" + std::to_string(i) + ")\n";
  program += "}\n";
  // "  spawn<<<1, 32>>>(cN)" and its underline.
  auto statement = [](int i) {
    const std::string text = "  spawn<<<1, 32>>>(c" + std::to_string(i) + ")";
    return text + "\n  ^" + std::string(text.size() - 3, '~') + "\n";
  };
  std::string expected =
      "t.orch:247:3: error[E0601]: one execution of `main` may make 121 fire-and-forget launches; "
      "sm_90 allows at most 120\n" + statement(120);
  for (int line = 127; line < 135; ++line)
    expected += "t.orch:" + std::to_string(line) + ":3: note: fire-and-forget launches are also made here" +
                (line == 134 ? ", and at 112 more places" : "") + "\n" + statement(line - 127);
  expected += "1 error generated.\n";
  CHECK(diagnostics_of(program) == expected);
  // 120 are allowed.
  CHECK(diagnostics_of(fix(program, {{"graph main {\n  spawn<<<1, 32>>>(c0)\n", "graph main {\n"}})) == "");
}

TEST_CASE("121 launches of one graph: E0608 with 8 notes") {
  // One device graph launched 121 times is also over the budget (E0601); each error lists at
  // most 8 other places.
  std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel look(x: in f32[]) source """extern "C" __global__ void look(const float* x) {}"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { look<<<1, 32>>>(x) }
graph main {
)orch";
  for (int i = 0; i < 121; ++i) program += "  spawn<<<1, 32>>>(child)\n";
  program += "}\n";
  const std::string statement = "\n  spawn<<<1, 32>>>(child)\n  ^~~~~~~~~~~~~~~~~~~~~~~\n";
  std::string e0608 =
      "t.orch:127:3: error[E0608]: `child` may be launched 121 times in one execution of `main`; an "
      "executable graph runs one launch at a time, and CUDA refuses to launch it while a launch is "
      "pending or running (cudaErrorInvalidValue)" + statement;
  for (int line = 7; line < 15; ++line)
    e0608 += "t.orch:" + std::to_string(line) + ":3: note: `child` is also launched here" +
             (line == 14 ? ", and at 112 more places" : "") + statement;
  const auto c = check(program);
  CHECK(c->codes() == "E0601 E0608");
  CHECK(c->text().find(e0608) != std::string::npos);
  // Twice is already once too many.
  const std::string twice = program.substr(0, program.find("graph main {\n")) +
                            "graph main {\n  spawn<<<1, 32>>>(child)\n  spawn<<<1, 32>>>(child)\n}\n";
  CHECK(check(twice)->codes() == "E0608");
}

}  // TEST_SUITE("rules: call")

// ---- cases that need files on disk ----------------------------------------------------------

TEST_SUITE("rules") {

TEST_CASE("E0110: a `from` file that cannot be read") {
  test::TempDir dir("rules_from");
  const std::string path = dir.file("t.orch");
  const std::string program = R"orch(pipeline p
kernel sweep(x: inout f32[]) from "sweep.cu"
graph main { }
)orch";
  CHECK(check(program, "", path)->text() ==
        path + ":2:35: error[E0110]: cannot read kernel source `sweep.cu` (looked for " +
            dir.path() + "/sweep.cu): No such file or directory\n"
            "kernel sweep(x: inout f32[]) from \"sweep.cu\"\n"
            "                                  ^~~~~~~~~~\n"
            "1 error generated.\n");
  // Closest valid: the file exists beside the pipeline.
  test::write_file(dir.file("sweep.cu"),
                   "extern \"C\" __global__ void sweep(float* x) { x[threadIdx.x] = 0; }\n");
  CHECK(check(program, "", path)->text() == "");
}

TEST_CASE("E0111: a --target profile that does not exist") {
  test::TempDir dir("rules_target");
  const std::string missing = dir.file("missing.yaml");
  const std::string program = "pipeline p\ngraph main { }\n";
  CHECK(diagnostics_of(program, missing) ==
        "<unknown>: error[E0111]: target profile " + missing + ": no such file\n"
        "1 error generated.\n");
  // Closest valid: a profile that exists.
  TestProfile profile({});
  CHECK(diagnostics_of(program, profile.path()) == "");
}

}  // TEST_SUITE("rules")

// ---- issue 8: loops, switches, nesting, dynamic parallelism, retired E0503 --------------------
// Each rule with a case on both sides of its boundary (a mutation of the rule must fail one).
TEST_SUITE("rules") {

TEST_CASE("E0410: a `while` loop whose body never writes the scalar its condition reads") {
  const std::string program = R"orch(pipeline p
param max_iters: u32 = 100
buffer x: f32[1024]
buffer iters: u32
kernel step(x: inout f32[]) source """extern "C" __global__ void step(float* x) { x[threadIdx.x] *= 0.5f; }"""
graph main {
  fill iters = 0
  while iters < max_iters {
    step<<<1, 1024>>>(x)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:8:3: error[E0410]: this `while` loop never ends once it starts: nothing in its body writes `iters`, which its condition reads
  while iters < max_iters {
  ^~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:8:9: note: the condition `iters < max_iters` can change only if the body writes `iters`: with a scalar update, a `fill`, a `copy`, or a kernel that takes it as `out` or `inout`
  while iters < max_iters {
        ^~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: count the iterations in the body.
  CHECK(diagnostics_of(fix(program, {{"step<<<1, 1024>>>(x)\n", "step<<<1, 1024>>>(x)\n    iters += 1\n"}})) == "");
}

TEST_CASE("E0410: a `while` loop whose condition reads only params") {
  const std::string program = R"orch(pipeline p
param n: u32 = 4
buffer x: f32[1024]
kernel step(x: inout f32[]) source """extern "C" __global__ void step(float* x) { x[threadIdx.x] *= 0.5f; }"""
graph main {
  while n > 0 {
    step<<<1, 1024>>>(x)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:6:3: error[E0410]: this `while` loop never ends once it starts: its condition reads no device scalar, so nothing the loop does can change it
  while n > 0 {
  ^~~~~~~~~~~~~
t.orch:6:9: note: `n > 0` reads only params and constants, which stay fixed while the graph runs; loop on a device scalar the body updates, or use `if`
  while n > 0 {
        ^~~~~
1 error generated.
)txt");
  // Closest valid: run the body once when n > 0.
  CHECK(diagnostics_of(fix(program, {{"while n > 0", "if n > 0"}})) == "");
}

// What can change a loop's condition, one way each, and what cannot.
TEST_CASE("E0410: every way a body can write the condition's scalar, and reads that do not count") {
  const std::string head = R"orch(pipeline p
buffer x: f32[1024]
buffer left: i32
buffer other: i32
buffer flag: i32
buffer left_host: i32 host
buffer src: i32
kernel dec(left: inout i32) source """extern "C" __global__ void dec(int* left) { --*left; }"""
kernel set(left: out i32) source """extern "C" __global__ void set(int* left) { *left = 0; }"""
kernel peek(left: in i32, x: inout f32[]) source """extern "C" __global__ void peek(const int* left, float* x) { x[0] = *left; }"""
graph main {
  fill left = 3
)orch";
  auto loop = [&](const std::string& cond, const std::string& body) {
    return diagnostics_of(head + "  while " + cond + " {\n" + body + "\n  }\n}\n");
  };
  CHECK(loop("left > 0", "    left -= 1") == "");
  CHECK(loop("left > 0", "    fill left = 0") == "");
  CHECK(loop("left > 0", "    copy src -> left") == "");
  CHECK(loop("left > 0", "    dec<<<1, 1>>>(left)") == "");
  CHECK(loop("left > 0", "    set<<<1, 1>>>(left)") == "");
  CHECK(loop("left > 0", "    if flag != 0 { left -= 1 }") == "");            // a nested body
  CHECK(loop("left > 0 && other == 0", "    other += 1") == "");            // one of several
  CHECK(loop("left_host > 0", "    peek<<<1, 1>>>(left, x)") == "");        // the host may write it
  // Reading the scalar, writing another one or an array changes nothing.
  CHECK(loop("left > 0", "    peek<<<1, 1>>>(left, x)").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0", "    other += left").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0", "    copy left -> src").find("error[E0410]") != std::string::npos);
  CHECK(loop("left > 0 && other == 0", "    flag += 1").find("nothing in its body writes `left` or `other`") != std::string::npos);
  // An inner loop must itself change its condition: the outer body's update comes too late.
  CHECK(loop("left > 0", "    while other < 2 { flag += 1 }\n    left -= 1").find("t.orch:14:5: error[E0410]") != std::string::npos);
  // A loop in a graph `call`ed twice is reported once.
  const std::string twice = R"orch(pipeline p
buffer left: i32
buffer x: f32[4]
graph spin { while left > 0 { fill x = 0 } }
graph main {
  call spin
  call spin
}
)orch";
  auto c = check(twice);
  CHECK(c->codes() == "E0410");
}

TEST_CASE("E0411: a `switch` with no bodies") {
  const std::string program = R"orch(pipeline p
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode { }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:3: error[E0411]: this `switch` has no `case` and no `default`; a CUDA SWITCH node needs at least one body
  switch mode { }
  ^~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: one body, a case or a default.
  CHECK(diagnostics_of(fix(program, {{"switch mode { }", "switch mode { case 0 { fill w = 0 } }"}})) == "");
  CHECK(diagnostics_of(fix(program, {{"switch mode { }", "switch mode { default { fill w = 0 } }"}})) == "");
}

namespace {
// `depth` nested `if`s around a fill.
std::string nested_ifs(int depth) {
  std::string s = "pipeline p\nbuffer c: u32\nbuffer w: f32[16]\ngraph main {\n";
  for (int i = 0; i < depth; ++i) s += "if c != " + std::to_string(i) + " {\n";
  s += "fill w = 0\n";
  for (int i = 0; i < depth; ++i) s += "}\n";
  return s + "}\n";
}
}  // namespace

TEST_CASE("E0412: conditionals nested deeper than a pipeline holds") {
  CHECK(diagnostics_of(nested_ifs(65)) == R"txt(t.orch:69:1: error[E0412]: this conditional is nested 65 deep; a pipeline holds conditional bodies at most 64 deep
if c != 64 {
^~~~~~~~~~~~
t.orch:5:1: note: the outermost one is here
if c != 0 {
^~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: 64 levels, the most pipeline.bin holds (artifact::kMaxGraphDepth).
  CHECK(diagnostics_of(nested_ifs(64)) == "");
  // Deeper still: one report for the chain.
  CHECK(check(nested_ifs(80))->codes() == "E0412");
  // Nesting through `call` counts: 40 levels around a call of a graph with 30 more.
  std::string inner = nested_ifs(30);
  std::string through_call = "pipeline p\nbuffer c: u32\nbuffer w: f32[16]\ngraph inner {\n" +
                             inner.substr(inner.find("graph main {\n") + 13) + "graph main {\n";
  for (int i = 0; i < 40; ++i) through_call += "if c != " + std::to_string(i) + " {\n";
  through_call += "call inner\n";
  for (int i = 0; i < 40; ++i) through_call += "}\n";
  through_call += "}\n";
  CHECK(check(through_call)->codes() == "E0412");
}

TEST_CASE("E0503 is retired: a device graph copies between two host buffers") {
  // Pinned device-mapped host memory on both sides is what CUDA allows in a device graph's
  // memcpy node (doc comment of cudaGraphInstantiate).
  CHECK(diagnostics_of(R"orch(pipeline p
buffer a_host: f32[1024] host
buffer b_host: f32[1024] host
graph child device {
  copy a_host -> b_host
}
graph main { launch child tail }
)orch") == "");
}

TEST_CASE("E0506: a kernel that launches kernels in a device graph") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel parent(x: inout f32[]) source """
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
}
"""
graph helper device { parent<<<1, 32>>>(x) }
graph main { launch helper tail }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:9:23: error[E0506]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism), which a graph launched from the device cannot hold
graph helper device { parent<<<1, 32>>>(x) }
                      ^~~~~~~~~~~~~~~~~~~~
t.orch:6:30: note: `parent` launches a kernel here
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
                             ^~~
t.orch:9:1: note: `helper` is a device graph
graph helper device { parent<<<1, 32>>>(x) }
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: run it in the host-launched graph.
  CHECK(diagnostics_of(fix(program, {{"graph helper device { parent<<<1, 32>>>(x) }\ngraph main { launch helper tail }", "graph main { parent<<<1, 32>>>(x) }"}})) == "");
}

TEST_CASE("E0507: a kernel that launches kernels in a conditional body") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer ready: u32
kernel parent(x: inout f32[]) source """
extern "C" __global__ void child(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void parent(float* x) {
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
}
"""
graph main {
  if ready != 0 {
    parent<<<1, 32>>>(x)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:12:5: error[E0507]: kernel `parent` launches kernels from the device (CUDA dynamic parallelism), which a conditional body cannot hold
    parent<<<1, 32>>>(x)
    ^~~~~~~~~~~~~~~~~~~~
t.orch:7:30: note: `parent` launches a kernel here
  if (threadIdx.x == 0) child<<<1, 1024>>>(x);
                             ^~~
t.orch:11:3: note: the conditional is here
  if ready != 0 {
  ^~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: launch unconditionally and let the kernel test `ready`.
  CHECK(diagnostics_of(fix(program, {{"  if ready != 0 {\n    parent<<<1, 32>>>(x)\n  }\n", "  parent<<<1, 32>>>(x)\n"}})) == "");
}

TEST_CASE("E0506/E0507 see launches in the kernel's own body only, never in comments, strings or other kernels") {
  auto in_device_graph = [](const std::string& code) {
    return check("pipeline p\nbuffer x: f32[4]\nkernel k(x: inout f32[]) source \"\"\"\n" + code +
                 "\n\"\"\"\ngraph g device { k<<<1, 1>>>(x) }\ngraph main { launch g tail }\n")
        ->codes();
  };
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { /* k<<<1, 1>>>(x); */ x[0] = 1; })cu") == "");
  CHECK(in_device_graph("extern \"C\" __global__ void k(float* x) {\n  // k<<<1, 1>>>(x);\n  x[0] = 1;\n}") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { const char* s = "k<<<1,1>>>"; x[0] = s[0]; })cu") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { x[0] = 1; }
void host_side(float* x) { k<<<1, 1>>>(x); })cu") == "");
  CHECK(in_device_graph(R"cu(__global__ void other(float* x) { }
extern "C" __global__ void k(float* x);
extern "C" __global__ void k(float* x) { x[0] = 1; }
__global__ void more(float* x) { other<<<1, 1>>>(x); })cu") == "");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) { x[0] = 1'000; })cu") == "");
  // And certain launches: `<<<` and the device runtime's launch call, in the body.
  CHECK(in_device_graph(R"cu(extern "C" __global__ void c(float* x) { }
extern "C" __global__ void k(float* x) { c<<<1, 1>>>(x); })cu") == "E0506");
  CHECK(in_device_graph(R"cu(extern "C" __global__ void k(float* x) {
  void* b = cudaGetParameterBuffer(8, 8); cudaLaunchDevice((void*)k, b, dim3(1), dim3(1), 0, 0); })cu") == "E0506");
}

TEST_CASE("E0606: a statement that writes what fire-and-forget work reads (write after read)") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer out: f32[1024]
kernel use(y: in f32[], out: out f32[]) source """extern "C" __global__ void use(const float* y, float* out) { }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
kernel produce(y: out f32[]) source """extern "C" __global__ void produce(float* y) { }"""
graph child device { use<<<1, 1024>>>(y, out) }
graph main {
  spawn<<<1, 32>>>(child)
  produce<<<1, 1024>>>(y)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0606]: this statement writes `y`, which `child` reads; `child` is launched fire_and_forget, so nothing orders its work before this statement
  produce<<<1, 1024>>>(y)
  ^~~~~~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: `child` is launched fire_and_forget here; work that needs its results belongs in a graph it tail-launches, which runs after it
  spawn<<<1, 32>>>(child)
  ^~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt");
  // Closest valid: write it before the launch.
  CHECK(diagnostics_of(fix(program, {{"  spawn<<<1, 32>>>(child)\n  produce<<<1, 1024>>>(y)\n", "  produce<<<1, 1024>>>(y)\n  spawn<<<1, 32>>>(child)\n"}})) == "");
}

TEST_CASE("E0606: what a launched graph touches includes the graphs it launches, transitively") {
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
kernel chain(g: graph) launches g tail <= 1 source """extern "C" __global__ void chain(cudaGraphExec_t g) {}"""
graph leaf device { work<<<1, 1024>>>(y) }
graph middle device { chain<<<1, 1>>>(leaf) }
graph top device { chain<<<1, 1>>>(middle) }
graph main {
  spawn<<<1, 32>>>(top)
  copy y -> y_host
}
)orch";
  CHECK(check(program)->text().find("t.orch:12:3: error[E0606]: this statement reads `y`, which `top` writes;") == 0);
  // One level less deep, and the same: the footprint is not one level only.
  CHECK(check(fix(program, {{"spawn<<<1, 32>>>(top)", "spawn<<<1, 32>>>(middle)"}}))->codes() == "E0606");
  // A graph that reaches no writer of `y` is no race.
  CHECK(diagnostics_of(fix(program, {{"graph leaf device { work<<<1, 1024>>>(y) }", "graph leaf device { work<<<1, 1024>>>(y_host) }"},
                                     {"  copy y -> y_host\n", "  fill y = 0\n"}})) == "");
}

// Limits hit exactly and by one: the boundary of each comparison.
TEST_CASE("boundaries: one kernel's budget at and past the limit, a copy into one element less") {
  const std::string budget = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel fan(g: graph[TABLE]) launches g MODE <= LIMIT source """extern "C" __global__ void fan(const cudaGraphExec_t* g) {}"""
graph child[i: MEMBERS] device { work<<<1, 1024>>>(x) }
graph main { fan<<<1, 256>>>(child) }
)orch";
  // A family, so that each executable graph is launched once (E0608) and only the budget counts.
  auto with = [&](const char* mode, const char* limit) {
    return check(fix(budget, {{"MODE", mode}, {"LIMIT", limit}, {"TABLE", limit}, {"MEMBERS", limit}}))->codes();
  };
  CHECK(with("fire_and_forget", "120") == "");
  CHECK(with("fire_and_forget", "121") == "E0601");
  CHECK(with("sibling", "121") == "E0601");
  CHECK(with("tail", "255") == "");
  CHECK(with("tail", "256") == "E0602");
  const std::string copy = "pipeline p\nbuffer x: f32[1024]\nbuffer y: f32[SIZE]\ngraph main { copy x -> y }\n";
  CHECK(check(fix(copy, {{"SIZE", "1024"}}))->codes() == "");
  CHECK(check(fix(copy, {{"SIZE", "1023"}}))->codes() == "E0302");
  CHECK(check(fix(copy, {{"SIZE", "1025"}}))->codes() == "");
}

TEST_CASE("target profiles may not raise CUDA's device launch limits") {
  const std::string program = "pipeline p\ngraph main { }\n";
  for (const auto& [key, at_limit, over] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"max_fire_and_forget_launches", "120", "121"},
           {"max_tail_launches", "255", "256"},
           {"max_self_tail_launches", "1", "2"}}) {
    CAPTURE(key);
    CHECK(diagnostics_of(program, TestProfile({{key, at_limit}}).path()) == "");
    const TestProfile over_profile({{key, over}});
    CHECK(diagnostics_of(program, over_profile.path()) ==
          "<unknown>: error[E0111]: target profile " + over_profile.path() + ": key '" + key +
              "' is " + over + ", above CUDA's limit of " + at_limit + " per graph execution\n"
              "1 error generated.\n");
  }
}

TEST_CASE("E0115: a graph family at and past 65536 members, the most pipeline.bin holds") {
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph experts[e: 65537] device { work<<<1, 128>>>(x) }
graph main { launch experts[0] tail }
)orch";
  CHECK(check(program)->codes() == "E0115");
  CHECK(diagnostics_of(fix(program, {{"65537", "65536"}})) == "");
}

}  // TEST_SUITE("rules")

// ---- many errors in one file, and no cascades -------------------------------------------------

TEST_SUITE("rules: recovery") {

TEST_CASE("independent errors in one file are all reported") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
buffer mask: u8[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<4, 2048>>>(n, 2.0, x)
  fill mask = 256
  copy x -> x_host
  scale<<<ceil_div(n, 256), 256>>>(n, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:11:14: error[E0201]: block of `scale` has 2048 threads; sm_90 allows at most 1024 per block
  scale<<<4, 2048>>>(n, 2.0, x)
             ^~~~
t.orch:12:15: error[E0303]: cannot fill `mask` (u8) with 256: 256 does not fit u8
  fill mask = 256
              ^~~
t.orch:13:13: error[E0101]: buffer `x_host` is not declared
  copy x -> x_host
            ^~~~~~
t.orch:14:3: error[E0103]: kernel `scale` takes 3 arguments, but 2 were given
  scale<<<ceil_div(n, 256), 256>>>(n, x)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `scale` is declared here
kernel scale(n: u32, a: f32, x: inout f32[]) source """
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
4 errors generated.
)txt");
  // All four fixed, it checks clean.
  CHECK(diagnostics_of(fix(program, {{"<<<4, 2048>>>", "<<<4, 256>>>"},
                                     {"fill mask = 256", "fill mask = 255"},
                                     {"buffer mask: u8[n]\n", "buffer mask: u8[n]\nbuffer x_host: f32[n] host\n"},
                                     {"(n, x)\n", "(n, 2.0, x)\n"}})) == "");
}

TEST_CASE("an undeclared buffer used three times gives three E0101 and nothing else") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  fill z = 0
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, z)
  copy x -> z
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:8: error[E0101]: buffer `z` is not declared
  fill z = 0
       ^
t.orch:11:44: error[E0101]: buffer `z` is not declared
  scale<<<ceil_div(n, 256), 256>>>(n, 2.0, z)
                                           ^
t.orch:12:13: error[E0101]: buffer `z` is not declared
  copy x -> z
            ^
3 errors generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32[n]\n", "buffer x: f32[n]\nbuffer z: f32[n]\n"}})) == "");
}

TEST_CASE("a misspelled kernel gives one error, not errors about its arguments or shape") {
  // The arguments and the block would be wrong for `scale` too; nothing is said about them
  // while the kernel is unknown.
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
buffer x: f32[n]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scael<<<ceil_div(n, 256), 256>>>(x, 1.5)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:10:3: error[E0101]: kernel `scael` is not declared
  scael<<<ceil_div(n, 256), 256>>>(x, 1.5)
  ^~~~~
1 error generated.
)txt");
}

TEST_CASE("an unknown buffer element type is reported once, not at every use") {
  // Was: the buffer's type falls back to u8, so each use reports a type mismatch (E0104,
  // E0301, E0303) that the user did not make.
  const std::string program = R"orch(pipeline p
buffer x: float[1024]
buffer y: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<1, 1024>>>(x)
  copy x -> y
  fill x = 1.5
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:11: error[E0106]: unknown type `float`
buffer x: float[1024]
          ^~~~~
1 error generated.
)txt");
}

TEST_CASE("an unknown kernel parameter type is reported once, not at every launch") {
  // Was: the parameter's type falls back to u8, so every launch gets an E0104.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout float[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<1, 1024>>>(x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:22: error[E0106]: unknown type `float`
kernel work(x: inout float[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
                     ^~~~~
1 error generated.
)txt");
}

TEST_CASE("a buffer whose size names an undeclared param does not cause size errors") {
  // Was: the size falls back to 1 element, so a copy into the buffer reports E0302.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
buffer y: f32[nn]
graph main {
  copy x -> y
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0101]: `nn` is not declared
buffer y: f32[nn]
              ^~
1 error generated.
)txt");
}

TEST_CASE("a graph family parameter of size 0 does not cause E0504 at its launches") {
  // Was: after E0115 the parameter counts as a family of 0 graphs, so every argument is
  // reported as the wrong family size.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
kernel route(experts: graph[0]) launches experts fire_and_forget <= 4 source """extern "C" __global__ void route(cudaGraphExec_t* experts) {}"""
graph experts[e: 4] device { work<<<1, 256>>>(x) }
graph main { route<<<1, 32>>>(experts) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:29: error[E0115]: a graph family has at least one member
kernel route(experts: graph[0]) launches experts fire_and_forget <= 4 source """extern "C" __global__ void route(cudaGraphExec_t* experts) {}"""
                            ^
1 error generated.
)txt");
}

TEST_CASE("an unknown target is reported once, not with limits of an unnamed profile") {
  // Was: after E0111 the checks run against a default profile with an empty name:
  // "block of `work` has 2048 threads;  allows at most 1024 per block".
  const std::string program = R"orch(pipeline p
target sm_42
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<4, 2048>>>(x) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:2:8: error[E0111]: unknown target 'sm_42'; known targets: sm_100, sm_80, sm_90
target sm_42
       ^~~~~
1 error generated.
)txt");
}

TEST_CASE("a cycle of calls is reported once") {
  // Was: the cycle is found again while building each graph on it and each graph that
  // calls into it: three E0801 for one cycle.
  const std::string program = R"orch(pipeline p
buffer x: f32[16]
graph ping { call pong }
graph pong {
  fill x = 0
  call ping
}
graph main { call ping }
)orch";
  CHECK(check(program)->codes() == "E0801");
  CHECK(diagnostics_of(fix(program, {{"  call ping\n", ""}})) == "");
}

TEST_CASE("a wrong argument for a `cond` parameter does not also report E0405") {
  // Was: the kernel in the `while kernel` body does take a `cond`; only its argument is
  // wrong, yet the loop is also reported as setting no condition.
  const std::string program = R"orch(pipeline p
buffer c: i32
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
graph main {
  fill c = 10
  while kernel {
    step<<<1, 32>>>(c, c)
  }
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:24: error[E0104]: parameter `k` of `step` is a `cond`; pass `cond`, the condition of the enclosing `while kernel`
    step<<<1, 32>>>(c, c)
                       ^
t.orch:3:27: note: `k` is declared here
kernel step(c: inout i32, k: cond) source """extern "C" __global__ void step(int* c, cudaGraphConditionalHandle k) {}"""
                          ^~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"(c, c)", "(c, cond)"}})) == "");
}

}  // TEST_SUITE("rules: recovery")

// ---- problems found in review, fixed: kept as regression tests ---------------------------------

TEST_SUITE("rules: regressions") {

TEST_CASE("world_size may size a buffer in a pipeline with a comm") {
  // Was: buffers are checked before comms are declared, so `world_size` in a size is
  // E0114 "declares no `comm`" although the pipeline has one. An allgather destination
  // cannot be sized for the communicator.
  const std::string program = R"orch(pipeline p
param n: u32 = 1024
comm world
buffer shard: f32[n]
buffer all: f32[n * world_size]
graph main {
  allgather shard -> all on world
}
)orch";
  CHECK(diagnostics_of(program) == "");
}

TEST_CASE("rank in a buffer size is E0115, not E0114, when there is a comm") {
  // Was: as above, E0114 claims there is no comm; the real problem is that buffers are
  // sized once for every rank.
  const std::string program = R"orch(pipeline p
comm world
buffer x: f32[rank + 1]
graph main { fill x = 0 }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:15: error[E0115]: `rank` is not known when buffers are sized
buffer x: f32[rank + 1]
              ^~~~
1 error generated.
)txt");
}

TEST_CASE("rank in a param default is E0115, not E0114, when there is a comm") {
  const std::string program = R"orch(pipeline p
comm world
param first: u32 = rank
graph main { }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:20: error[E0115]: `rank` is not known at compile time
param first: u32 = rank
                   ^~~~
1 error generated.
)txt");
}

TEST_CASE("an array buffer in a scalar update is E0109, as in a fill, not E0406") {
  // Was: the value of `total = counts` is reported as "condition is not a scalar" (E0406),
  // but it is not a condition.
  const std::string program = R"orch(pipeline p
buffer total: u32
buffer counts: u32[4]
graph main {
  total = counts
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:11: error[E0109]: `counts` is an array buffer; expressions read params and device scalars (buffers without a size)
  total = counts
          ^~~~~~
1 error generated.
)txt");
}

TEST_CASE("a block given as dim3 is underlined whole in E0201") {
  // Was: the caret marks only the first dimension (`32`), as if x alone were too large.
  const std::string program = R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<1, dim3(32, 32, 2)>>>(x) }
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:24: error[E0201]: block of `work` has 2048 threads; sm_90 allows at most 1024 per block
graph main { work<<<1, dim3(32, 32, 2)>>>(x) }
                       ^~~~~~~~~~~~~~~
1 error generated.
)txt");
}

TEST_CASE("a case value that is a param is an invalid case (E0403)") {
  // Was: reported as E0115, whose summary is about sizes, defaults and families; E0403
  // is the code for an invalid switch case.
  const std::string program = R"orch(pipeline p
param fast: u32 = 1
buffer mode: u32
buffer w: f32[1024]
graph main {
  switch mode {
    case fast { fill w = 0 }
  }
}
)orch";
  CHECK(check(program)->codes() == "E0403");
}

TEST_CASE("E0108 gives no kernel-parameter hint where there is no kernel parameter") {
  // Was: a device scalar in a launch shape or a fill value gets the hint "pass it to an
  // `in` parameter", which only applies to kernel arguments.
  const std::string program = R"orch(pipeline p
buffer blocks: u32
buffer level: f32
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main {
  work<<<blocks, 256>>>(x)
  fill x = level
}
)orch";
  const std::string text = diagnostics_of(program);
  CHECK(check(program)->codes() == "E0108 E0108");
  CHECK(text.find("`in` parameter") == std::string::npos);
}

TEST_CASE("the E0606 note does not suggest the change that E0607 rejects") {
  // Was: the note says "a tail launch would run after this graph instead", but making the
  // launch a tail launch only turns E0606 into E0607 for the same statement: the reader has to
  // move into a graph that runs after the work (see the E0606 case above).
  const std::string program = R"orch(pipeline p
buffer y: f32[1024]
buffer y_host: f32[1024] host
kernel work(y: out f32[]) source """extern "C" __global__ void work(float* y) { y[threadIdx.x] = 1.0f; }"""
kernel spawn(g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void spawn(cudaGraphExec_t g) {}"""
graph child device { work<<<1, 1024>>>(y) }
graph main {
  spawn<<<1, 32>>>(child)
  copy y -> y_host
}
)orch";
  REQUIRE(check(program)->codes() == "E0606");
  // Doing what the note says gives E0607 for the same statement...
  REQUIRE(check(fix(program, {{"fire_and_forget <= 1", "tail <= 1"}}))->codes() == "E0607");
  // ...so the note should not say it.
  CHECK(diagnostics_of(program).find("a tail launch would run after this graph instead") ==
        std::string::npos);
}

TEST_CASE("a param-dependent fill value is checked again at bind time") {
  // Was: `fill mask = level` is checked with level's default (16 fits u8) but records no
  // bind check, so binding level = 300 truncates the fill silently. Launch shapes, copy sizes
  // and collective sizes all record one.
  const std::string program = R"orch(pipeline p
param level: u32 = 16
buffer mask: u8[256]
graph main {
  fill mask = level
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  std::string codes;
  for (const ir::BindCheck& b : c->result.program->bind_checks) codes += to_string(b.code);
  CHECK(codes == "E0303");
}

}  // TEST_SUITE("rules: regressions")

// ---- param-dependent checks ------------------------------------------------------------------

TEST_SUITE("rules: bind checks") {

TEST_CASE("param-dependent shapes and sizes pass with their defaults and are recorded for bind time") {
  const std::string program = R"orch(pipeline p
param n: u32 = 1 << 20
param threads: u32 = 256
param m: u32 = 1 << 20
comm world
buffer x: f32[n]
buffer y: f32[m]
buffer z: f32[n]
buffer all: f32[n * 4]
kernel scale(n: u32, a: f32, x: inout f32[]) source """
extern "C" __global__ void scale(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a;
}
"""
graph main {
  scale<<<ceil_div(n, threads), threads>>>(n, 2.0, x)
  copy x -> y
  copy x -> z
  allgather x -> all on world
}
)orch";
  auto c = check(program);
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  std::string checks;
  for (const ir::BindCheck& b : p.bind_checks)
    checks += to_string(b.code) + std::string(" ") + std::to_string(b.loc.begin.line) + ":" +
              std::to_string(b.loc.begin.col) + " " + ir::to_string(b.condition, p) + "\n";
  // The block (threads, and the x dimension), the grid, the copy between buffers sized by
  // different params, the allgather against world_size. An empty dimension has a check of its
  // own (E0205), so a binding that empties the grid is not reported as too many blocks. `copy x -> z` has equal sizes by
  // construction and needs no check.
  CHECK(checks ==
        "E0201 16:33 threads * 1 * 1 <= 1024\n"
        "E0202 16:33 threads <= 1024\n"
        "E0205 16:33 threads >= 1\n"
        "E0203 16:11 ceil_div(n, threads) <= 2147483647\n"
        "E0205 16:11 ceil_div(n, threads) >= 1\n"
        "E0302 17:3 n <= m\n"
        "E0702 19:3 n * 4 == n * world_size\n");
}

TEST_CASE("constant shapes record no bind check") {
  auto c = check(R"orch(pipeline p
buffer x: f32[1024]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<4, 256>>>(x) }
)orch");
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  CHECK(c->result.program->bind_checks.empty());
}

TEST_CASE("the bind checks of an empty shape and a shape too large have their own codes and messages") {
  auto c = check(R"orch(pipeline p
param n: u32 = 1024
param smem: i32 = 0
buffer x: f32[n]
kernel work(x: inout f32[]) source """extern "C" __global__ void work(float* x) { x[threadIdx.x] += 1.0f; }"""
graph main { work<<<ceil_div(n, 256), 256, smem>>>(x) }
)orch");
  REQUIRE(c->text() == "");
  REQUIRE(c->result.program);
  std::string checks;
  for (const ir::BindCheck& b : c->result.program->bind_checks) checks += to_string(b.code) + std::string(": ") + b.message + "\n";
  CHECK(checks ==
        "E0203: grid of `work` has too many blocks in x; sm_90 allows at most 2147483647\n"
        "E0205: grid of `work` is empty in x (no blocks)\n"
        "E0204: launch of `work` asks for too many bytes of dynamic shared memory; sm_90 allows at most 232448 "
        "per block\n"
        "E0204: launch of `work` asks for a negative number of bytes of dynamic shared memory\n");
}

}  // TEST_SUITE("rules: bind checks")

// ---- docs ------------------------------------------------------------------------------------

TEST_SUITE("rules: docs") {

TEST_CASE("docs/diagnostics.md has a `## CODE` entry for every diagnostic code") {
  const std::string docs = test::read_file(std::string(ORCH_DOCS_DIR) + "/diagnostics.md");
  std::set<std::string> headings;
  std::istringstream lines(docs);
  std::string line;
  const std::regex heading(R"(^## ([EW][0-9]{4})\b.*)");
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_match(line, m, heading)) headings.insert(m[1]);
  const std::vector<std::string> codes = all_diagnostic_codes();
  REQUIRE(!codes.empty());
  for (const std::string& code : codes) {
    CAPTURE(code);
    CHECK(headings.count(code) == 1);
  }
  // And no entry for a code that does not exist (a typo, or a retired code kept by mistake).
  const std::set<std::string> known(codes.begin(), codes.end());
  for (const std::string& h : headings) {
    CAPTURE(h);
    CHECK(known.count(h) == 1);
  }
}

}  // TEST_SUITE("rules: docs")

}  // namespace orch
