// Guarded unrolling of `while` loops (lowering/unroll_loops.cpp, issue 11): copies per WHILE
// iteration, what is not unrolled and why, the guard roles and their code, the verifier's
// refusals of a broken guard protocol, and the compiled variants of user kernels. No GPU.
#include "lowering/speed_test_support.h"

namespace orch {

TEST_CASE("unroll: `while c > 0 { step }` runs 16 copies of step per WHILE iteration, each deciding alone") {
  auto l = lower_text(kCountdown);
  const lir::Program& p = l->program;
  const lir::ConditionalNode& loop = first_loop(p);
  std::string expected = "step ";
  for (int k = 2; k <= 16; ++k) expected += "step[" + std::to_string(k) + "/alone] ";
  CHECK(copies(p, loop.bodies[0]) == expected + "condition");
  REQUIRE(p.unrolled_loops.size() == 1);
  CHECK(p.unrolled_loops[0].copies == 16);  // the compiler's choice for a body of one node
  // One guarded variant of step (the copy's slot index is an argument), calling the guard at entry.
  size_t variants = 0;
  for (const lir::Kernel& k : p.kernels)
    if (k.guard_of >= 0) {
      ++variants;
      CHECK(k.name == "step");
      CHECK(k.guard_code.find("extern \"C\" __device__ unsigned orch_guard(") != std::string::npos);
      // The function returns thread 0's decision; the patched entry ORs it over the block.
      CHECK(k.guard_code.find("return orch_go;") != std::string::npos);
      CHECK(k.guard_code.find("__syncthreads_or") == std::string::npos);
      CHECK(k.guard_code.find("atomicCAS(orch_slot") == std::string::npos);  // alone: no atomics
      REQUIRE(k.params.size() == 4);  // c, then the slot index, c again (the condition's), status
      CHECK(k.guard_param_sizes == std::vector<uint32_t>{4, 8, 8});
    }
  CHECK(variants == 1);
  // The slots: one per copy from 2 on; both condition kernels reset them.
  const lir::Buffer& slots = p.buffers[p.unrolled_loops[0].slots];
  CHECK(slots.name == "orch.guard.0");
  CHECK(slots.count->text == "15");
  size_t resets = 0;
  for (const lir::Kernel& k : p.kernels)
    resets += k.source.find("for (unsigned i = 0u; i < 15u; ++i) b1[i] = 0u;") != std::string::npos;
  CHECK(resets == 2);
  CHECK(verify(p) == "");
}

TEST_CASE("unroll: --unroll N sets the copies, 1 turns it off, and long bodies get fewer") {
  LowerOptions three;
  three.unroll = 3;
  CHECK(lower_text(kCountdown, three)->program.unrolled_loops.at(0).copies == 3);
  LowerOptions off;
  off.unroll = 1;
  auto plain = lower_text(kCountdown, off);
  CHECK(plain->program.unrolled_loops.empty());
  CHECK(copies(plain->program, first_loop(plain->program).bodies[0]) == "step condition");
  CHECK(unroll_notes(kCountdown, off) == std::vector<std::string>{"unrolling off (--unroll 1)"});
  CHECK(unroll_notes(kCountdown) ==
        std::vector<std::string>{
            "`while c > 0` at line 10:3: 16 copies of its body per WHILE iteration (the compiler's choice for 1 node)"});
  LowerOptions eight;
  eight.unroll = 8;
  CHECK(unroll_notes(kCountdown, eight) ==
        std::vector<std::string>{"`while c > 0` at line 10:3: 8 copies of its body per WHILE iteration"});

  // 99 statements: 256 / 99 = 2 copies; 139: no room for a second.
  auto body_of = [](int statements) {
    std::string s = "pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n  while c > 0 {\n";
    for (int i = 0; i < statements - 1; ++i) s += "    x += " + std::to_string(i % 2 ? 1 : 2) + "\n    c += 0\n";
    return s + "    c -= 1\n  }\n}\n";
  };
  // (Counted before fusion, which runs after unrolling and joins the adjacent updates of a copy.)
  auto two = lower_text(body_of(50));  // 99 statements
  REQUIRE(two->program.unrolled_loops.size() == 1);
  CHECK(two->program.unrolled_loops[0].copies == 2);
  CHECK(unroll_notes(body_of(70)).at(0) ==
        "`while c > 0` at line 7:3: not unrolled: its 139 nodes leave no room for a second copy under 256 nodes per body");
}

TEST_CASE("unroll: a guarded generated kernel triggers its dependents after its guard, an unguarded one at once") {
  auto l = lower_text("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n"
                      "  while c > 0 {\n    x += 2\n    c -= 1\n  }\n}\n");
  size_t guarded = 0, plain = 0;
  for (const lir::Kernel& k : l->program.kernels) {
    if (!k.generated || !k.waits_at_entry) continue;
    CAPTURE(k.name);
    const size_t wait = k.source.find("griddepcontrol.wait;");
    const size_t trigger = k.source.find("griddepcontrol.launch_dependents;");
    REQUIRE(wait != std::string::npos);
    REQUIRE(trigger != std::string::npos);
    CHECK(k.source.find("griddepcontrol.launch_dependents;", trigger + 1) == std::string::npos);
    if (k.guard) {
      ++guarded;
      // Every way out of the guard (`return;`) comes before the trigger: a block that skips
      // the copy exits, which counts as its trigger.
      const size_t guard_end = k.source.rfind("return;");
      REQUIRE(guard_end != std::string::npos);
      CHECK(wait < guard_end);
      CHECK(guard_end < trigger);
    } else {
      ++plain;
      CHECK(only_inert_between(k.source, wait, trigger));
    }
  }
  CHECK(guarded > 0);
  CHECK(plain > 0);
  CHECK(verify(l->program) == "");
}

TEST_CASE("unroll: the compiler's choice is copies for 32 nodes per iteration, 8 to 16") {
  CHECK(lowering::auto_unroll(0) == 16);
  CHECK(lowering::auto_unroll(1) == 16);
  CHECK(lowering::auto_unroll(2) == 16);
  CHECK(lowering::auto_unroll(3) == 11);
  CHECK(lowering::auto_unroll(4) == 8);
  CHECK(lowering::auto_unroll(5) == 8);
  CHECK(lowering::auto_unroll(40) == 8);
  // A body of two statements: 16 copies, 32 nodes.
  auto two = lower_text("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer x: i32\ngraph main {\n  fill c = 9\n"
                        "  while c > 0 {\n    x += 2\n    c -= 1\n  }\n}\n");
  REQUIRE(two->program.unrolled_loops.size() == 1);
  CHECK(two->program.unrolled_loops[0].copies == 16);
}

TEST_CASE("unroll: what is not unrolled says why") {
  auto note = [](const std::string& body, const std::string& extra = "") {
    return unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer h: i32 host\nbuffer g: i32\ncomm world\n"
                        "buffer sx: f32[4]\nbuffer sy: f32[4]\n" + extra +
                        "graph main {\n  fill c = 3\n  while c > 0 {\n" + body + "    c -= 1\n  }\n}\n")
        .at(0);
  };
  const std::string at = "`while c > 0` at line 11:3: not unrolled: ";
  CHECK(note("    if g > 0 { g -= 1 }\n") ==
        "`while c > 0` at line 11:3: not unrolled: its body holds a conditional (each copy would need a conditional "
        "node and handle of its own)");
  CHECK(note("    copy h -> g\n") ==
        at + "its body copies host memory (a guarded copy would be a kernel touching mapped host memory)");
  CHECK(note("    fill h = 1\n") ==
        at + "its body fills host memory (a guarded fill would be a kernel touching mapped host memory)");
  // Collectives, graph launches and kernels that launch kernels cannot be in a loop body at all
  // (E0401, E0604, E0507); unroll_loops refuses them too, should that change.
  const std::string k = "kernel k(g: inout i32) source \"\"\"extern \"C\" __global__ void k(int* g) {}\"\"\"\n";
  LowerOptions eject = for_emit_cuda();
  CHECK(unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer g: i32\n" + k +
                         "graph main {\n  fill c = 3\n  while c > 0 {\n    k<<<1, 1>>>(g)\n    c -= 1\n  }\n}\n",
                     eject)
            .at(0) ==
        "`while c > 0` at line 8:3: not unrolled: user kernel `k` cannot be guarded here (--emit=cuda: nvcc compiles "
        "it from its source)");
  CHECK(unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\n"
                     "kernel dec(c: inout i32, go: cond) source \"\"\"extern \"C\" __global__ void dec(int* c, "
                     "cudaGraphConditionalHandle go) { cudaGraphSetConditional(go, --*c > 0); }\"\"\"\n"
                     "graph main {\n  fill c = 3\n  while kernel {\n    dec<<<1, 1>>>(c, cond)\n  }\n}\n")
            .at(0) ==
        "`while kernel` at line 7:3: not unrolled: its body kernel sets the condition through "
        "cudaGraphSetConditional, whose value no other kernel can read");
  // A loop inside a loop: the inner one is unrolled, the outer holds a conditional.
  const std::vector<std::string> nested =
      unroll_notes("pipeline p\ntarget sm_90\nbuffer c: i32\nbuffer d: i32\ngraph main {\n  fill c = 3\n"
                   "  while c > 0 {\n    fill d = 4\n    while d > 0 { d -= 1 }\n    c -= 1\n  }\n}\n");
  CHECK(nested == std::vector<std::string>{
                      "`while d > 0` at line 9:5: 16 copies of its body per WHILE iteration (the compiler's choice "
                      "for 1 node)",
                      "`while c > 0` at line 7:3: not unrolled: its body holds a conditional (each copy would need a "
                      "conditional node and handle of its own)"});
}

TEST_CASE("unroll: roles follow the edges within a copy") {
  auto l = lower_text(R"(pipeline shapes
target sm_90
param n: u32 = 1000
param limit: i32 = 37
buffer a: f32[n]
buffer b: f32[n]
buffer s: f32[16]
buffer c: i32
buffer d: i32
kernel wide(n: u32, a: inout f32[]) source """
extern "C" __global__ void wide(unsigned n, float* a) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = a[i] * 0.5f + 1.0f; }
"""
kernel count(c: inout i32) source """
extern "C" __global__ void count(int* c) { if (threadIdx.x == 0) *c += 1; }
"""
graph main {
  fill c = 0
  fill d = 0
  while c < limit {
    wide<<<ceil_div(n, 256), 256>>>(n, a)
    copy a -> b
    fill s = 2
    d += 3
    count<<<1, 32>>>(c)
  }
}
)");
  const lir::Program& p = l->program;
  const std::string body = copies(p, first_loop(p).bodies[0]);
  // Copy 1 as written (a memset does the fill, a memcpy the copy); in copies 2 on three sources
  // (the wide kernel, the fill, the update of d) write nothing the condition reads, so each of
  // their threads decides; the copy follows the wide kernel, count follows everything (it writes
  // c, which every guard reads).
  CHECK(body.rfind("wide memcpy memset update count wide[2/each] copy[2/follow] fill[2/each] update[2/each] "
                   "count[2/follow] wide[3/each]",
                   0) == 0);
  CHECK(verify(p) == "");
  for (const lir::Kernel& k : p.kernels) {
    if (!k.generated || !k.guard) continue;
    CHECK(k.source.find(lowering::kGuardPlaceholder) == std::string::npos);
    const bool race = k.guard->role == mir::GuardRole::Race;
    CHECK((k.source.find("atomicCAS(orch_slot, 0u, 1u)") != std::string::npos) == race);
  }

  // A source of several blocks that writes what the condition reads races for the slot: its
  // early blocks may write c before its late ones start.
  auto racing = lower_text(R"(pipeline p
target sm_90
param n: u32 = 1000
buffer c: i32
buffer x: f32[n]
kernel bump(n: u32, c: inout i32, x: inout f32[]) source """
extern "C" __global__ void bump(unsigned n, int* c, float* x) { if (blockIdx.x == 0 && threadIdx.x == 0) *c -= 1; }
"""
graph main {
  fill c = 5
  while c > 0 {
    bump<<<ceil_div(n, 256), 256>>>(n, c, x)
  }
}
)");
  const std::string racing_body = copies(racing->program, first_loop(racing->program).bodies[0]);
  INFO(racing_body);
  CHECK(racing_body.rfind("bump bump[2/race] bump[3/race]", 0) == 0);
  CHECK(verify(racing->program) == "");

  // A chain whose source runs one block: it decides and stores, the rest follow.
  auto chain = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer x: f32[4096]
graph main {
  fill c = 5
  while c > 0 {
    c -= 1
    fill x = 1.5
  }
}
)");
  std::string want = "update memset";  // copy 1, then copies 2 to 16 (the compiler's choice for 2 nodes)
  for (int k = 2; k <= 16; ++k)
    want += " update[" + std::to_string(k) + "/decide] fill[" + std::to_string(k) + "/follow]";
  CHECK(copies(chain->program, first_loop(chain->program).bodies[0]) == want + " condition");
  CHECK(verify(chain->program) == "");
}

TEST_CASE("unroll: the guard code of each role") {
  using lowering::guard_statement;
  const std::string t = "T", s = "S", i = "2u";
  // Every thread decides, no barrier; thread 0 of a block reports, block 0 stores.
  const std::string each =
      "{ orch_v<orch_bool> orch_c = T; if (orch_c.e && threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) "
      "orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); const unsigned orch_go = (!orch_c.e && orch_c.v) ? "
      "1u : 0u; if (blockIdx.x == 0u && blockIdx.y == 0u && blockIdx.z == 0u && threadIdx.x == 0u && threadIdx.y == 0u "
      "&& threadIdx.z == 0u) *(volatile unsigned*)(S + 2u) = orch_go ? 2u : 3u; ";
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Each, false) == each + "if (!orch_go) return; }");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Each, true) == each + "return orch_go; }");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Follow, false) ==
        "if (*(const unsigned*)(S + 2u) != 2u) return;");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Alone, true) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; } return orch_go; }");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Follow, true) ==
        "return *(const unsigned*)(S + 2u) == 2u ? 1u : 0u;");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Decide, false) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_go = (!orch_c.e && orch_c.v) ? 1u : 0u; *(volatile unsigned*)(S + 2u) = orch_go ? 2u : 3u; } "
        "{ const unsigned orch_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); const unsigned orch_n = blockDim.x * blockDim.y * blockDim.z - (orch_t & ~31u); __syncwarp(orch_n >= 32u ? 0xffffffffu : (1u << orch_n) - 1u); } if (!__syncthreads_or(orch_go)) return; }");
  CHECK(guard_statement(t, s, i, 4, mir::GuardRole::Race, false) ==
        "{ unsigned orch_go = 0u; if (threadIdx.x == 0u && threadIdx.y == 0u && threadIdx.z == 0u) { "
        "unsigned* const orch_slot = (S + 2u); unsigned orch_s = *(volatile unsigned*)orch_slot; "
        "if (orch_s == 0u) orch_s = atomicCAS(orch_slot, 0u, 1u); if (orch_s == 0u) { "
        "orch_v<orch_bool> orch_c = T; if (orch_c.e) orch_report_error(orch_status, 3u, 4u, (unsigned)orch_c.e); "
        "orch_s = (!orch_c.e && orch_c.v) ? 2u : 3u; __threadfence(); atomicExch(orch_slot, orch_s); } else { "
        "while (orch_s == 1u) orch_s = *(volatile unsigned*)orch_slot; __threadfence(); } "
        "orch_go = orch_s == 2u ? 1u : 0u; } { const unsigned orch_t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); const unsigned orch_n = blockDim.x * blockDim.y * blockDim.z - (orch_t & ~31u); __syncwarp(orch_n >= 32u ? 0xffffffffu : (1u << orch_n) - 1u); } if (!__syncthreads_or(orch_go)) return; }");
}

TEST_CASE("unroll: fusion keeps copies apart") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer d: i32
graph main {
  fill c = 5
  while c > 0 {
    d += 1
    c -= 1
  }
}
)");
  // Within a copy the two updates are one kernel; never across copies, never with the condition.
  std::string want = "update";  // 16 copies: the compiler's choice for 2 statements
  for (int k = 2; k <= 16; ++k) want += " update[" + std::to_string(k) + "/alone]";
  CHECK(copies(l->program, first_loop(l->program).bodies[0]) == want + " condition");
}

TEST_CASE("unroll: the verifier refuses a broken guard protocol") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer c: i32
buffer x: f32[4096]
graph main {
  fill c = 5
  while c > 0 {
    c -= 1
    fill x = 1.5
  }
}
)");
  auto body = [](lir::Program& p) -> lir::Body& {
    for (lir::Node& n : p.graphs[p.main_graph].body.nodes)
      if (auto* c = std::get_if<lir::ConditionalNode>(&n.op)) return c->bodies[0];
    FAIL("no loop");
    return p.graphs[p.main_graph].body;
  };
  {
    lir::Program p = l->program;  // a follower with nothing of its copy before it
    lir::Body& b = body(p);
    b.nodes[3].deps.clear();
    CHECK(verify(p).find("follows its copy's decision, but no node of its copy comes before it") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // an unguarded node among the copies
    body(p).nodes[4].guard.reset();
    CHECK(verify(p).find("sits among loop 0's guarded copies without a guard of its own") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // nothing resets the slots
    lir::Body& b = body(p);
    for (lir::BufferAccess& a : b.nodes.back().accesses)
      if (a.buffer == p.unrolled_loops[0].slots) a.write = false;
    CHECK(verify(p).find("nothing resets loop 0's guard slots after its copies") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // a decider that may run several blocks
    lir::Body& b = body(p);
    auto& k = std::get<lir::KernelNode>(b.nodes[2].op);
    k.grid[0] = b.nodes[3].guard ? std::get<lir::KernelNode>(b.nodes[3].op).grid[0] : k.grid[0];
    k.grid[0].code[0].value.bits = 16;
    CHECK(verify(p).find("lets each of its blocks decide for its copy, but may run more than one block and writes "
                         "what the condition reads") != std::string::npos);
  }
  {
    lir::Program p = l->program;  // every thread deciding in a node that writes the condition
    lir::Node& n = body(p).nodes[2];
    n.guard->role = mir::GuardRole::Each;
    p.kernels[std::get<lir::KernelNode>(n.op).kernel].guard->role = mir::GuardRole::Each;
    CHECK(verify(p).find("lets every thread decide for its copy, but writes what the condition reads") !=
          std::string::npos);
  }
}

TEST_CASE("unroll: guarded kernels compile; a user kernel's variant calls its guard at the PTX entry") {
  auto l = compile_artifact(kCountdown);
  const fb::Pipeline& f = *l->pipeline;
  // `step` and its guarded variant: two entries of one module (they share the source's state),
  // the variant a copy of `step` under its own name that calls the guard first.
  const fb::Kernel* plain = nullptr;
  const fb::Kernel* guarded = nullptr;
  for (const fb::Kernel* k : *f.kernels())
    if (k->name()->str() == "step") (k->params()->size() == 4 ? guarded : plain) = k;
  REQUIRE(plain);
  REQUIRE(guarded);
  CHECK(plain->in_module() >= 0);
  CHECK(guarded->in_module() == plain->in_module());
  CHECK(plain->lowered_name()->str() == "step");
  CHECK(guarded->lowered_name()->str() == "step_orch");
  const fb::Module* m = f.modules()->Get(static_cast<uint32_t>(plain->in_module()));
  const std::string ptx(reinterpret_cast<const char*>(m->ptx()->data()), m->ptx()->size());
  CHECK(ptx.find(".visible .func  (.param .b32 func_retval0) orch_guard(") != std::string::npos);
  // The patch's names avoid every token of the module, the guard's included (orch_1_ here).
  CHECK(ptx.find("call.uni (orch_1_ret), orch_guard, (orch_1_arg0, orch_1_arg1, orch_1_arg2);") != std::string::npos);
  CHECK(ptx.find(".entry step(") != std::string::npos);
  CHECK(ptx.find(".entry step_orch(") != std::string::npos);
  REQUIRE(m->images()->size() == 1);
  CHECK(m->images()->Get(0)->arch()->str() == "sm_90");
  bool slots = false;
  for (const fb::Buffer* b : *f.buffers()) slots |= b->name()->str() == "orch.guard.0";
  CHECK(slots);
}

// The rule the speed passes keep (issue 20): a kernel's module identity. Every kernel declared
// from one source file, and every variant orchc makes of one (a wait at entry, an unrolled
// loop's guard), is an entry of that file's one module, with any options: so they share the
// file's __device__, __constant__ and __managed__ objects as nvcc's build would. (The GPU test
// "module state: ..." runs this pipeline against the CPU.)
TEST_CASE("speed passes: kernels of one file and their variants stay in one module, with any options") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("orch-module-identity-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "state.cu") << R"(__device__ unsigned long long total;
extern "C" __global__ void add(unsigned n, const unsigned* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&total, (unsigned long long)x[i]);
}
extern "C" __global__ void take(unsigned long long* out) { if (threadIdx.x == 0) { *out += total; total = 0; } }
)";
  std::ofstream(dir / "p.orch") << R"(pipeline state
target sm_90
param n: u32 = 1000
buffer x: u32[n]
buffer out: u64
buffer c: i32
kernel add(n: u32, x: in u32[]) from "state.cu"
kernel take(out: inout u64) from "state.cu"
kernel other(out: inout u64) source """
extern "C" __global__ void other(unsigned long long* out) { *out += 1; }
"""
graph main {
  add<<<ceil_div(n, 256), 256>>>(n, x)
  take<<<1, 32>>>(out)
  c = 3
  while c > 0 {
    add<<<ceil_div(n, 256), 256>>>(n, x)
    take<<<1, 32>>>(out)
    other<<<1, 1>>>(out)
    c -= 1
  }
}
)";
  struct Config {
    bool pdl;
    uint32_t unroll;
  };
  for (const Config cfg : {Config{true, 0}, Config{false, 1}, Config{true, 1}, Config{false, 4}}) {
    CAPTURE(cfg.pdl);
    CAPTURE(cfg.unroll);
    SourceManager sources;
    DiagnosticEngine diags;
    CheckResult checked = check_file((dir / "p.orch").string(), sources, {}, diags);
    REQUIRE(!diags.has_errors());
    LowerOptions options;
    options.compile.use_cache = false;
    options.pdl = cfg.pdl;
    options.unroll = cfg.unroll;
    lir::Program l;
    std::optional<std::string> bytes = lower_to_artifact(*checked.program, sources, options, diags, &l);
    REQUIRE_MESSAGE(bytes.has_value(), format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text));
    int state_module = -2;
    size_t from_file = 0, variants = 0;
    std::set<std::string> symbols;
    for (const lir::Kernel& k : l.kernels) {
      if (k.generated) continue;
      CAPTURE(k.name);
      if (k.name == "other") {
        // A source of its own, used once per variant: its own module only if it has variants.
        continue;
      }
      ++from_file;
      variants += k.guard_of >= 0 || k.waits_at_entry;
      if (state_module == -2) state_module = k.module;
      CHECK(k.module >= 0);
      CHECK(k.module == state_module);
      CHECK(k.images.empty());
      symbols.insert(k.lowered_name);
    }
    REQUIRE(state_module >= 0);
    const std::string& ptx = l.modules[static_cast<size_t>(state_module)].ptx;
    // One definition of `total` in the one module, and an entry for every distinct symbol.
    CHECK(ptx.find(".global .align 8 .u64 total") != std::string::npos);
    CHECK(ptx.find(".global .align 8 .u64 total") == ptx.rfind(".global .align 8 .u64 total"));
    for (const std::string& sym : symbols) CHECK(ptx.find(".entry " + sym + "(") != std::string::npos);
    if (cfg.unroll != 1) CHECK(variants > 0);
    CHECK(from_file >= 2);
  }
  fs::remove_all(dir);
}

// Names orchc adds live where users cannot write them, or are renamed when a user did (issue
// 20: a kernel named orch_guard failed with E0902 once its loop was unrolled).
TEST_CASE("speed passes: a user kernel named like orchc's guard function compiles and keeps its name") {
  auto l = compile_artifact(R"(pipeline clash
target sm_90
buffer c: i32
buffer n: u32
kernel orch_guard(c: inout i32, n: inout u32) source """
extern "C" __global__ void orch_guard(int* c, unsigned* n) { if (threadIdx.x == 0) { --(*c); ++(*n); } }
"""
graph main {
  c = 20
  while c > 0 {
    orch_guard<<<1, 32>>>(c, n)
  }
}
)");
  std::set<std::string> symbols;
  for (const fb::Kernel* k : *l->pipeline->kernels())
    if (!k->generated()) symbols.insert(k->lowered_name()->str());
  CHECK(symbols.count("orch_guard"));      // the user's kernel, as it was
  CHECK(symbols.count("orch_guard_orch"));  // its guarded copy
  bool renamed_guard = false;
  for (const fb::Module* m : *l->pipeline->modules()) {
    const std::string ptx(reinterpret_cast<const char*>(m->ptx()->data()), m->ptx()->size());
    renamed_guard |= ptx.find(".func  (.param .b32 func_retval0) orch_guard_1(") != std::string::npos;
  }
  CHECK(renamed_guard);
}

// Launch shapes (issue 19): programmatic edges join launches that fit in one wave, and the
// compiler unrolls a loop only where its launches do; --emit=ir and --print-passes say why.

TEST_CASE("unroll: roles by the grid as written, each copy's slot index, params reach the guard as bits") {
  auto l = lower_text(R"(pipeline g
target sm_90
param n: u32 = 256
param limit: f32 = 2.5
param scale: f64 = 0.5
buffer x: f32[n]
buffer c: f32
buffer d: f64
kernel grow(n: u32, c: inout f32) source """
extern "C" __global__ void grow(unsigned n, float* c) { if (blockIdx.x == 0 && threadIdx.x == 0) *c += 0.5f; }
"""
graph main {
  c = 0.0
  d = 0.0
  while c < limit && d < scale {
    grow<<<ceil_div(n, 256), 256>>>(n, c)
  }
}
)");
  const lir::Program& p = l->program;
  const lir::ConditionalNode& loop = first_loop(p);
  // ceil_div(n, 256) is one block at n's default, but not as written: the copies race.
  std::string expected = "grow ";
  for (int k = 2; k <= 16; ++k) expected += "grow[" + std::to_string(k) + "/race] ";
  CHECK(copies(p, loop.bodies[0]) == expected + "condition");
  // Copy k passes slot k - 2 as the guard's first argument (after grow's own two).
  for (const lir::Node& n : loop.bodies[0].nodes) {
    if (!n.guard) continue;
    const auto& k = std::get<lir::KernelNode>(n.op);
    REQUIRE(k.args.size() > 2);
    CHECK(k.args[2].value.text == std::to_string(n.guard->copy - 2));
  }
  bool checked = false;
  for (const lir::Kernel& k : p.kernels) {
    if (k.guard_of < 0) continue;
    checked = true;
    // The guard takes every argument as 64 bits and the floats back as their bits.
    CHECK(k.guard_code.find("__uint_as_float((unsigned)orch_a") != std::string::npos);
    CHECK(k.guard_code.find("__longlong_as_double((long long)orch_a") != std::string::npos);
    CHECK(k.guard_code.find("atomicCAS(orch_slot, 0u, 1u)") != std::string::npos);
  }
  CHECK(checked);
}


}  // namespace orch
