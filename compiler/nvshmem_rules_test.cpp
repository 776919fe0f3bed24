// The checker's rules for NVSHMEM (issue 23): `symmetric` buffers and `my_pe` / `n_pes`, one
// code at a time in the style of rules_test.cpp (the full text `orchc --check` prints, then the
// closest pipeline that obeys the rule, which must check clean).
#include "compiler/dag.h"
#include "compiler/emit.h"
#include "compiler/rules_test_support.h"

namespace orch {
namespace {

// Two PEs hand a halo over with NVSHMEM: the smallest pipeline that uses every piece.
const char* kHalo = R"orch(pipeline halo
comm world
param n: u32 = 1024
buffer halo: f32[n * n_pes] symmetric
buffer sig: u64 symmetric
kernel put(n: u32, me: u32, pes: u32, halo: inout f32[], sig: inout u64) source """
#include <nvshmem.h>
#include <nvshmemx.h>
extern "C" __global__ void put(unsigned n, unsigned me, unsigned pes, float* halo, unsigned long long* sig) {}
"""
graph main {
  put<<<1, 256>>>(n, my_pe, n_pes, halo, sig)
}
)orch";

}  // namespace

TEST_SUITE("rules: nvshmem") {

TEST_CASE("symmetric buffers, my_pe and n_pes check clean and reach the program") {
  auto c = check(kHalo);
  CHECK(c->text() == "");
  REQUIRE(c->result.program);
  const ir::Program& p = *c->result.program;
  REQUIRE(p.buffers.size() == 2);
  CHECK(p.buffers[0].symmetric);
  CHECK(p.buffers[1].symmetric);
  CHECK_FALSE(p.buffers[0].keep);
  CHECK(p.uses_rank);
}

TEST_CASE("`symmetric` stays usable as a name") {
  CHECK(diagnostics_of(R"orch(pipeline p
param symmetric: u32 = 4
buffer x: f32[symmetric]
graph main { fill x = 0 }
)orch") == "");
}

TEST_CASE("my_pe and n_pes are built-in names") {
  CHECK(diagnostics_of(fix(kHalo, {{"param n: u32 = 1024", "param my_pe: u32 = 1024"}})).find(
            "error[E0102]: `my_pe` is a built-in name and cannot be redeclared") != std::string::npos);
}

TEST_CASE("E0706: a symmetric buffer in host memory") {
  const std::string program = fix(kHalo, {{"buffer sig: u64 symmetric", "buffer sig: u64 host symmetric"}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:5:22: error[E0706]: buffer `sig` cannot be both `symmetric` and `host`: NVSHMEM's symmetric heap is device memory
buffer sig: u64 host symmetric
                     ^~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"u64 host symmetric", "u64 symmetric"}})) == "");
}

TEST_CASE("E0707: a symmetric buffer in a pipeline without a comm, reported once") {
  const std::string program = fix(kHalo, {{"comm world\n", ""}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:3:29: error[E0707]: symmetric buffer `halo` needs a `comm`: orch starts NVSHMEM over the ranks of the pipeline's communicator (PE r is rank r), and this pipeline declares none
buffer halo: f32[n * n_pes] symmetric
                            ^~~~~~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"pipeline halo\n", "pipeline halo\ncomm world\n"}})) == "");
}

TEST_CASE("E0708: a symmetric buffer sized by the PE") {
  const std::string program = fix(kHalo, {{"f32[n * n_pes]", "f32[n * (my_pe + 1)]"}});
  CHECK(diagnostics_of(program) == R"txt(t.orch:4:23: error[E0708]: the size of symmetric buffer `halo` depends on `my_pe`: NVSHMEM allocates a symmetric buffer on every PE at once, the same size on each
buffer halo: f32[n * (my_pe + 1)] symmetric
                      ^~~~~
t.orch:4:35: note: `halo` is symmetric here
buffer halo: f32[n * (my_pe + 1)] symmetric
                                  ^~~~~~~~~
1 error generated.
)txt");
  // `rank` is the same number.
  CHECK(diagnostics_of(fix(kHalo, {{"f32[n * n_pes]", "f32[rank]"}})).find("error[E0708]: the size of symmetric buffer "
                                                                          "`halo` depends on `rank`") != std::string::npos);
  // Closest valid: size it by what every PE shares (params, the PE count).
  CHECK(diagnostics_of(fix(program, {{"f32[n * (my_pe + 1)]", "f32[n * n_pes]"}})) == "");
}

TEST_CASE("E0115, not E0708: a buffer that is not symmetric sized by the PE") {
  CHECK(diagnostics_of(fix(kHalo, {{"buffer sig: u64 symmetric", "buffer sig: u64 symmetric\nbuffer mine: f32[my_pe]"}}))
            .find("error[E0115]: `my_pe` is not known when buffers are sized") != std::string::npos);
}

TEST_CASE("E0709: my_pe in a pipeline without symmetric buffers") {
  const std::string program = R"orch(pipeline p
comm world
param n: u32 = 1024
buffer x: f32[n]
kernel shard(n: u32, r: u32, x: out f32[]) source """extern "C" __global__ void shard(unsigned n, unsigned r, float* x) {}"""
graph main {
  shard<<<4, 256>>>(n, my_pe, x)
}
)orch";
  CHECK(diagnostics_of(program) == R"txt(t.orch:7:24: error[E0709]: `my_pe` is the PE number of NVSHMEM, but this pipeline declares no `symmetric` buffer; use `rank`
  shard<<<4, 256>>>(n, my_pe, x)
                       ^~~~~
1 error generated.
)txt");
  CHECK(diagnostics_of(fix(program, {{"(n, my_pe, x)", "(n, rank, x)"}})) == "");
  CHECK(diagnostics_of(fix(program, {{"buffer x: f32[n]", "buffer x: f32[n] symmetric"}})) == "");
}

TEST_CASE("`keep` on a symmetric buffer changes nothing: W0118") {
  CHECK(diagnostics_of(fix(kHalo, {{"u64 symmetric", "u64 symmetric keep"}}))
            .find("warning[W0118]: `keep` has no effect on a `symmetric` buffer") != std::string::npos);
}

// ---- the statements: put, get, signal, wait, quiet, barrier (E0710-E0714) ------------------------

// Each row: a pipeline that breaks the rule, exactly what `orchc --check` prints, and the closest
// pipeline that obeys it (rules_test_support.h). The base of most: every PE puts to the next and
// waits for its predecessor's put, in a loop every PE runs alike.
const RuleCase kStatements[] = {
    {"E0710: a put into a buffer that is not symmetric",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
buffer t: u32
graph main {
  fill t = 0
  while t < 4 {
    put b -> a on (my_pe + 1) % n_pes signal sig = t + 1
    wait sig >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:11:14: error[E0710]: the destination of `put` is a peer's copy of a symmetric buffer, but `a` is not symmetric
    put b -> a on (my_pe + 1) % n_pes signal sig = t + 1
             ^
t.orch:4:1: note: `a` is declared here
buffer a: f32[n]
^~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "put into the peer's symmetric copy",
     {{"put b -> a on", "put a -> b on"}}},
    {"E0710: a signal word that is not u64",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u32 symmetric
buffer t: u32
graph main {
  fill t = 0
  while t < 4 {
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    wait sig >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:11:46: error[E0710]: the signal word of `put` must be a symmetric `u64` device scalar (`buffer sig: u64 symmetric`); `sig` is a u32 scalar
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
                                             ^~~
t.orch:6:1: note: `sig` is declared here
buffer sig: u32 symmetric
^~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:12:10: error[E0710]: the signal word of `wait` must be a symmetric `u64` device scalar (`buffer sig: u64 symmetric`); `sig` is a u32 scalar
    wait sig >= t + 1
         ^~~
t.orch:6:1: note: `sig` is declared here
buffer sig: u32 symmetric
^~~~~~~~~~~~~~~~~~~~~~~~~
2 errors generated.
)txt",
     "signal words are u64",
     {{"buffer sig: u32 symmetric", "buffer sig: u64 symmetric"}}},
    {"E0710: a put into a smaller buffer",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n / 2] symmetric
buffer sig: u64 symmetric
buffer t: u32
graph main {
  fill t = 0
  while t < 4 {
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    wait sig >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:11:5: error[E0710]: `put` from `a` (256 elements) to `b` (128 elements): the destination is smaller (with the default values n = 256)
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:5:1: note: `b` is declared here
buffer b: f32[n / 2] symmetric
^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "the destination holds the source",
     {{"f32[n / 2] symmetric", "f32[n] symmetric"}}},
    {"E0710: a put between element types",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: i32[n] symmetric
buffer sig: u64 symmetric
buffer t: u32
graph main {
  fill t = 0
  while t < 4 {
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    wait sig >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:11:5: error[E0710]: `put` from `a` (f32) to `b` (i32): element types differ
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:4:1: note: `a` is declared here
buffer a: f32[n]
^~~~~~~~~~~~~~~~
t.orch:5:1: note: `b` is declared here
buffer b: i32[n] symmetric
^~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "the same element type",
     {{"buffer b: i32[n] symmetric", "buffer b: f32[n] symmetric"}}},
    {"E0711: a wait on a word nothing signals",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
buffer t: u32
buffer ready: u64 symmetric
graph main {
  fill t = 0
  while t < 4 {
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    wait ready >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:13:5: error[E0711]: `wait` on `ready`, which nothing in the pipeline signals: it would wait forever
    wait ready >= t + 1
    ^~~~~~~~~~~~~~~~~~~
t.orch:8:1: note: `ready` is declared here; a `signal ready = ... on PEER`, a `put ... signal ready = ...`, or a kernel that takes it as `out` or `inout` signals it
buffer ready: u64 symmetric
^~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "signal the word the wait waits on",
     {{"signal sig = t + 1", "signal ready = t + 1"}}},
    {"E0712: a put under a condition on my_pe",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
buffer t: u32
graph main {
  fill t = 0
  while t < 4 {
    if my_pe == 0 { put a -> b on 1 signal sig = t + 1 }
    wait sig >= (t + 1) * my_pe
    t += 1
  }
}
)orch",
     R"txt(t.orch:11:21: error[E0712]: `put` inside a conditional body that PEs may run differently: a peer could wait for what it never sends
    if my_pe == 0 { put a -> b on 1 signal sig = t + 1 }
                    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:11:8: note: the condition is here; it reads the PE number (`my_pe`, `rank`), which differs between PEs
    if my_pe == 0 { put a -> b on 1 signal sig = t + 1 }
       ^~~~~~~~~~
1 error generated.
)txt",
     "every PE puts, each to the next",
     {{"    if my_pe == 0 { put a -> b on 1 signal sig = t + 1 }", "    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1"}, {"wait sig >= (t + 1) * my_pe", "wait sig >= t + 1"}}},
    {"E0712: a loop whose condition a kernel sets",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
buffer r: f32
buffer t: u32
kernel step(n: u32, a: inout f32[], r: inout f32) source """extern "C" __global__ void step(unsigned n, float* a, float* r) {}"""
graph main {
  fill r = 1
  fill t = 0
  while r > 0.001 {
    step<<<1, 256>>>(n, a, r)
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    wait sig >= t + 1
    t += 1
  }
}
)orch",
     R"txt(t.orch:15:5: error[E0712]: `put` inside a loop that PEs may run differently: a peer could wait for what it never sends
    put a -> b on (my_pe + 1) % n_pes signal sig = t + 1
    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:13:9: note: the condition is here; it reads `r`, which PEs may hold different values of: kernel `step` writes it
  while r > 0.001 {
        ^~~~~~~~~
t.orch:14:5: note: it is set here
    step<<<1, 256>>>(n, a, r)
    ^~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:16:5: error[E0712]: `wait` inside a loop that PEs may run differently: it could wait for a signal its peer never sends
    wait sig >= t + 1
    ^~~~~~~~~~~~~~~~~
t.orch:13:9: note: the condition is here; it reads `r`, which PEs may hold different values of: kernel `step` writes it
  while r > 0.001 {
        ^~~~~~~~~
t.orch:14:5: note: it is set here
    step<<<1, 256>>>(n, a, r)
    ^~~~~~~~~~~~~~~~~~~~~~~~~
2 errors generated.
)txt",
     "loop a number of times every PE counts alike",
     {{"while r > 0.001 {", "while t < 100 {"}}},
    {"E0712: a barrier in a device graph a kernel launches",
     R"orch(pipeline p
comm world
buffer b: f32[256] symmetric
buffer work: u32
kernel decide(work: in u32, g: graph) launches g fire_and_forget <= 1 source """extern "C" __global__ void decide(const unsigned* work, cudaGraphExec_t g) {}"""
graph sync device {
  barrier
}
graph main {
  decide<<<1, 1>>>(work, sync)
}
)orch",
     R"txt(t.orch:7:3: error[E0712]: `barrier` inside device graph `sync`, which PEs may run differently: the PEs that reach it would wait for those that never do
  barrier
  ^~~~~~~
t.orch:10:3: note: `sync` is launched here; kernel `decide` launches this graph when and as often as its code decides
  decide<<<1, 1>>>(work, sync)
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "launch it with a `launch` statement",
     {{"  decide<<<1, 1>>>(work, sync)", "  launch sync fire_and_forget"}}},
    {"E0712: a signal in a `while kernel` body",
     R"orch(pipeline p
comm world
buffer b: f32[256] symmetric
buffer sig: u64 symmetric
buffer left: i32
kernel step(left: inout i32, c: cond) source """extern "C" __global__ void step(int* left, cudaGraphConditionalHandle c) {}"""
graph main {
  fill left = 8
  while kernel {
    step<<<1, 1>>>(left, cond)
    signal sig += 1 on (my_pe + 1) % n_pes
  }
  wait sig >= 8
}
)orch",
     R"txt(t.orch:11:5: error[E0712]: `signal` inside a loop that PEs may run differently: a peer could wait for what it never sends
    signal sig += 1 on (my_pe + 1) % n_pes
    ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
t.orch:9:3: note: the condition is here; a kernel of the loop sets its condition (`while kernel`) from what it computes
  while kernel {
  ^~~~~~~~~~~~~~
1 error generated.
)txt",
     "signal after the loop",
     {{"    signal sig += 1 on (my_pe + 1) % n_pes\n  }\n", "  }\n  signal sig += 1 on (my_pe + 1) % n_pes\n"}}},
    {"E0713: a wait before an allreduce whose signal comes after it",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer g: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
graph main {
  fill sig = 0
  barrier
  wait sig == 1
  allreduce sum g on world
  signal sig = 1 on (my_pe + 1) % n_pes
}
)orch",
     R"txt(t.orch:10:3: error[E0713]: `wait` on `sig` before `allreduce`, while `sig` may be signalled only after it: a PE waiting here holds its `allreduce` back, and the peer that would signal waits inside the same `allreduce`
  wait sig == 1
  ^~~~~~~~~~~~~
t.orch:11:3: note: the `allreduce` is here
  allreduce sum g on world
  ^~~~~~~~~~~~~~~~~~~~~~~~
t.orch:12:3: note: `sig` is signalled here, after the `allreduce`
  signal sig = 1 on (my_pe + 1) % n_pes
  ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
1 error generated.
)txt",
     "wait after the allreduce",
     {{"  wait sig == 1\n  allreduce sum g on world\n", "  allreduce sum g on world\n  wait sig == 1\n"}}},
    {"E0714: quiet in a pipeline without symmetric buffers",
     R"orch(pipeline p
comm world
param n: u32 = 256
buffer g: f32[n]
graph main {
  allreduce sum g on world
  quiet
}
)orch",
     R"txt(t.orch:7:3: error[E0714]: `quiet` is NVSHMEM's, but this pipeline declares no `symmetric` buffer: NVSHMEM works between the copies of symmetric buffers that every PE has (`buffer x: f32[n] symmetric`, with a `comm`)
  quiet
  ^~~~~
1 error generated.
)txt",
     "declare the symmetric buffer NVSHMEM works on",
     {{"buffer g: f32[n]", "buffer g: f32[n] symmetric"}}},
};

TEST_CASE("E0710-E0714: each statement rule, its full text and its closest fix") { check_rule_cases(kStatements); }

// A loop every PE runs alike, with every statement: the condition reads a scalar set by `fill` and
// `+=` only, and one only an allreduce writes (the same on every rank); `get` and `quiet` stand
// under a condition on my_pe (they involve no peer's progress).
const char* kClean = R"orch(pipeline p
comm world
param n: u32 = 256
buffer a: f32[n]
buffer b: f32[n] symmetric
buffer sig: u64 symmetric
buffer t: u32
buffer err: f32
buffer worst: f32
kernel residual(n: u32, a: in f32[], err: out f32) source """extern "C" __global__ void residual(unsigned n, const float* a, float* err) {}"""
graph main {
  barrier
  fill t = 0
  residual<<<1, 256>>>(n, a, err)
  allreduce max err -> worst on world
  while t < 8 && worst > 0.001 {
    put a -> b on (my_pe + 1) % n_pes signal sig += 1
    wait sig >= t + 1
    if my_pe == 0 { get b -> a from 1 }
    t += 1
  }
  if my_pe != 0 { quiet }
}
)orch";

TEST_CASE("E0712: conditions every PE computes alike pass; get and quiet stand anywhere") {
  CHECK(diagnostics_of(kClean) == "");
  // The allreduce is what makes `worst` the same everywhere; `err`, which a kernel writes, is not
  // (nor would an allreduce in place make it so: the checker does not follow which write a read sees).
  CHECK(diagnostics_of(fix(kClean, {{"while t < 8 && worst > 0.001", "while t < 8 && err > 0.001"}}))
            .find("error[E0712]: `put` inside a loop that PEs may run differently") != std::string::npos);
  // A scalar set from my_pe is not the same everywhere, nor is one copied from it.
  const std::string from_pe = fix(kClean, {{"  fill t = 0\n", "  fill t = my_pe\n"}});
  CHECK(diagnostics_of(from_pe).find("it reads `t`, which PEs may hold different values of: it is filled with a "
                                     "value that differs between PEs") != std::string::npos);
  // A scalar nothing writes holds what the application gave each PE.
  const std::string unset = fix(kClean, {{"while t < 8 && worst > 0.001", "while t < 8 && worst > lim"},
                                         {"buffer err: f32", "buffer err: f32\nbuffer lim: f32"}});
  CHECK(diagnostics_of(unset).find("it reads `lim`, which PEs may hold different values of: nothing in the pipeline "
                                   "sets it") != std::string::npos);
  // A signal word is never the same everywhere: peers write it.
  CHECK(diagnostics_of(fix(kClean, {{"if my_pe != 0 { quiet }", "if sig > 3 { signal sig = 0 on 0 }"}}))
            .find("it reads `sig`, which PEs may hold different values of: it is symmetric, so peers write it") !=
        std::string::npos);
}

TEST_CASE("E0711: a kernel that takes the signal word as inout counts as a signal; one that reads it does not") {
  const std::string program = R"orch(pipeline p
comm world
buffer sig: u64 symmetric
kernel ping(sig: inout u64) source """extern "C" __global__ void ping(unsigned long long* sig) {}"""
graph main {
  ping<<<1, 1>>>(sig)
  wait sig >= 1
}
)orch";
  CHECK(diagnostics_of(program) == "");
  CHECK(check(fix(program, {{"sig: inout u64)", "sig: in u64)"}}))->codes() == "E0711");
}

TEST_CASE("E0711 is not a second error for a put whose own mistake was reported") {
  CHECK(check(fix(kClean, {{"put a -> b on", "put b -> a on"}}))->codes() == "E0710");
}

TEST_CASE("E0713: a wait after the collective, or one whose signal comes before it, passes") {
  const std::string before = R"orch(pipeline p
comm world
param n: u32 = 256
buffer g: f32[n]
buffer sig: u64 symmetric
graph main {
  fill sig = 0
  barrier
  signal sig = 1 on (my_pe + 1) % n_pes
  wait sig == 1
  allreduce sum g on world
}
)orch";
  CHECK(diagnostics_of(before) == "");
  // A signal in a device graph may run after the collective.
  const std::string device = fix(before, {{"  signal sig = 1 on (my_pe + 1) % n_pes\n", ""},
                                          {"  allreduce sum g on world\n", "  allreduce sum g on world\n  launch ping tail\n"},
                                          {"graph main {", "graph ping device { signal sig = 1 on (my_pe + 1) % n_pes }\ngraph main {"}});
  CHECK(check(device)->codes() == "E0713");
  CHECK(diagnostics_of(device).find("note: `sig` is signalled here, in device graph `ping`, which may run after the "
                                    "`allreduce`") != std::string::npos);
}

// Ordering: a peer may touch any symmetric buffer at an NVSHMEM statement, so each is ordered
// against every statement that touches one; a wait reads what the collectives before it write.
TEST_CASE("NVSHMEM statements are ordered against every statement that touches a symmetric buffer") {
  auto c = check(R"orch(pipeline p
comm world
param n: u32 = 256
buffer in: f32[n] symmetric
buffer mine: f32[n]
buffer other: f32[n]
buffer spare: f32[n]
buffer g: f32[n]
buffer sig: u64 symmetric
kernel use(n: u32, x: in f32[], y: out f32[]) source """extern "C" __global__ void use(unsigned n, const float* x, float* y) {}"""
graph main {
  allreduce sum g on world
  signal sig = 1 on (my_pe + 1) % n_pes
  wait sig >= 1
  use<<<1, 256>>>(n, in, mine)
  use<<<1, 256>>>(n, other, spare)
}
)orch");
  REQUIRE(c->text() == "");
  const ir::Region& main = c->result.program->graphs.at(0).body;
  REQUIRE(main.nodes.size() == 5);
  CHECK(is_ordered(main, 2, 3));        // the kernel reading `in` (symmetric) waits for the wait
  CHECK_FALSE(is_ordered(main, 2, 4));  // the one reading only local buffers does not
  CHECK(is_ordered(main, 0, 2));        // the wait reads what the allreduce writes
  CHECK(is_ordered(main, 1, 2));        // signal and wait: both touch every symmetric buffer
}


TEST_CASE("--emit=yaml and --emit=dot name each NVSHMEM statement as written") {
  auto c = check(kClean);
  REQUIRE(c->text() == "");
  const std::string yaml = emit_yaml(*c->result.program, c->sources);
  CHECK(yaml.find("kind: nvshmem") != std::string::npos);
  CHECK(yaml.find("what: put a -> b on (rank + 1) % world_size signal sig += 1") != std::string::npos);
  CHECK(yaml.find("what: wait sig >= t + 1") != std::string::npos);
  CHECK(yaml.find("what: get b -> a from 1") != std::string::npos);
  CHECK(yaml.find("what: barrier") != std::string::npos);
  CHECK(yaml.find("what: quiet") != std::string::npos);
  const std::string dot = emit_dot(*c->result.program, c->sources);
  CHECK(dot.find("wait sig >= t + 1") != std::string::npos);
}

}  // TEST_SUITE("rules: nvshmem")

}  // namespace orch
