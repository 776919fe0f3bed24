// The passes that make graphs faster than a person builds them (issue 11): which edges become
// programmatic and why not, the kernels that wait at entry, the verifier's refusals, and what the
// artifact and the ejected CUDA say. No GPU: kernels compile with NVRTC where a test needs the
// artifact.
#include "lowering/speed_test_support.h"

namespace orch {

TEST_CASE("programmatic edges: kernel -> kernel edges only, and only into kernels that wait") {
  auto l = lower_text(kChain);
  const lir::Program& p = l->program;
  CHECK(p.pdl);
  // memset, tick, tick, update, tick, memcpy: the three kernel -> kernel edges are programmatic,
  // the memset -> memcpy edge stays full.
  CHECK(edges(main_body(p)) == "0 memset:\n1 kernel:\n2 kernel: 1p\n3 kernel: 2p\n4 kernel: 3p\n5 memcpy: 0\n");
  // Every generated kernel waits; a user kernel waits because programmatic edges enter it.
  CHECK(kernel_named(p, "tick").waits_at_entry);
  CHECK(kernel_named(p, "orch_update_0").waits_at_entry);
  // The wait, then the trigger that lets the next kernel launch (kPdlTrigger), before anything else.
  const std::string& update = kernel_named(p, "orch_update_0").source;
  const size_t wait = update.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
  const size_t trigger = update.find("asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");");
  REQUIRE(wait != std::string::npos);
  REQUIRE(trigger != std::string::npos);
  CHECK(wait < trigger);
  CHECK(only_inert_between(update, wait, trigger));
  CHECK(verify(p) == "");
}

TEST_CASE("programmatic edges: a user kernel no programmatic edge enters is left as it is") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer a: u32[64]
buffer c: i32
kernel first(a: out u32[]) source """extern "C" __global__ void first(unsigned* a) {}"""
graph main {
  first<<<1, 64>>>(a)
  c += 1
}
)");
  const lir::Program& p = l->program;
  CHECK(edges(main_body(p)) == "0 kernel:\n1 kernel:\n");  // independent: no edge at all
  CHECK_FALSE(kernel_named(p, "first").waits_at_entry);
  CHECK(kernel_named(p, "orch_update_0").waits_at_entry);
}

TEST_CASE("programmatic edges: off with --no-pdl, on targets without PDL, and for archs below sm_90") {
  LowerOptions no_pdl;
  no_pdl.pdl = false;
  auto off = lower_text(kChain, no_pdl);
  CHECK_FALSE(off->program.pdl);
  CHECK(edges(main_body(off->program)) == "0 memset:\n1 kernel:\n2 kernel: 1\n3 kernel: 2\n4 kernel: 3\n5 memcpy: 0\n");
  for (const lir::Kernel& k : off->program.kernels) {
    CHECK_FALSE(k.waits_at_entry);
    CHECK(k.source.find("griddepcontrol") == std::string::npos);
  }

  std::string sm80 = kChain;
  sm80.replace(sm80.find("target sm_90"), 12, "target sm_80");
  auto a100 = lower_text(sm80);
  CHECK_FALSE(a100->program.pdl);
  CHECK(edges(main_body(a100->program)) == edges(main_body(off->program)));

  // Every target must have it: sm_90 and sm_80 together get none.
  std::string both = kChain;
  both.replace(both.find("target sm_90"), 12, "target sm_90\ntarget sm_80");
  CHECK_FALSE(lower_text(both)->program.pdl);

  // An arch list with an older arch (orchc --arch sm_80,sm_90) gets none either.
  LowerOptions archs;
  archs.compile.archs = {"sm_80", "sm_90"};
  CHECK_FALSE(lower_text(kChain, archs)->program.pdl);
  archs.compile.archs = {"sm_90", "sm_100"};
  CHECK(lower_text(kChain, archs)->program.pdl);
}

TEST_CASE("programmatic edges: none into user kernels where they cannot be patched (--emit=cuda)") {
  LowerOptions eject;
  eject.patch_user_kernels = false;
  auto l = lower_text(kChain, eject);
  // tick -> update stays programmatic (orchc's kernel waits in its source); update -> tick and
  // tick -> tick are full.
  CHECK(edges(main_body(l->program)) == "0 memset:\n1 kernel:\n2 kernel: 1\n3 kernel: 2p\n4 kernel: 3\n5 memcpy: 0\n");
  CHECK_FALSE(kernel_named(l->program, "tick").waits_at_entry);
  // The ejected file builds that edge with CUDA's edge data.
  const std::string cu = emit_cuda(l->program, l->sources);
  CHECK(cu.find("edges[0].from_port = cudaGraphKernelNodePortProgrammatic;") != std::string::npos);
  CHECK(cu.find("edges[0].type = cudaGraphDependencyTypeProgrammatic;") != std::string::npos);
  CHECK(cu.find("cudaGraphAddNode(&node[3], graph, deps, edges, 1, &node_params)") != std::string::npos);
  CHECK(cu.find("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");") != std::string::npos);
}

TEST_CASE("programmatic edges: full into and out of conditionals, bodies, device graphs and launchers") {
  auto l = lower_text(R"(pipeline p
target sm_90
buffer x: f32[256]
buffer y: f32[256]
buffer flag: u32
kernel k(x: inout f32[]) source """extern "C" __global__ void k(float* x) {}"""
kernel spawn(x: inout f32[]) source """
__global__ void child(float* x) {}
extern "C" __global__ void spawn(float* x) { child<<<1, 1>>>(x); }
"""
graph side device {
  k<<<1, 256>>>(y)
  k<<<1, 256>>>(y)
}
graph main {
  k<<<1, 256>>>(x)
  k<<<1, 256>>>(x)
  if flag != 0 {
    k<<<1, 256>>>(x)
    k<<<1, 256>>>(x)
  }
  k<<<1, 256>>>(x)
  launch side tail
  k<<<1, 256>>>(x)
  spawn<<<1, 1>>>(x)
  k<<<1, 256>>>(x)
}
)");
  const lir::Program& p = l->program;
  std::string all;
  for (const lir::Graph& g : p.graphs) {
    all += "graph " + g.name + "\n" + edges(g.body);
    for (const lir::Node& n : g.body.nodes)
      if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) all += "body\n" + edges(c->bodies[0]);
  }
  INFO(lir::print(p, l->sources));
  // Kernel -> kernel edges between kernels that launch nothing are programmatic, and nothing else
  // is: k -> condition kernel, the body's k -> k, the device graph's k -> k (the GPU said CUDA
  // takes the last two: pdl_gpu_test.cpp); condition kernel -> if, if -> k, k -> launcher and
  // launcher -> k, k -> spawn and spawn -> k (spawn launches a kernel) stay full.
  // `off`: with the switches for bodies and device graphs off, those edges are full too.
  auto check_edges = [&](const lir::Program& q, bool off) {
    size_t in_bodies = 0, in_device = 0, programmatic = 0;
    for (const lir::Graph& g : q.graphs) {
      for (const lir::Node& n : g.body.nodes) {
        for (const lir::Dep& d : n.deps) {
          const lir::Node& from = g.body.nodes[d.from];
          const auto* fk = std::get_if<lir::KernelNode>(&from.op);
          const auto* tk = std::get_if<lir::KernelNode>(&n.op);
          bool plain = fk && tk && !(off && g.device);
          for (const lir::KernelNode* k : {fk, tk})
            if (k) {
              const lir::Kernel& kernel = q.kernels[k->kernel];
              plain = plain && !kernel.may_launch_kernels && kernel.name.rfind("orch_launch", 0) != 0;
            }
          CAPTURE(n.what);
          CAPTURE(from.what);
          CHECK((d.kind == lir::DepKind::Programmatic) == plain);
          programmatic += d.kind == lir::DepKind::Programmatic;
          in_device += g.device && d.kind == lir::DepKind::Programmatic;
        }
        if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op))
          for (const lir::Node& inner : c->bodies[0].nodes)
            for (const lir::Dep& d : inner.deps) in_bodies += d.kind == lir::DepKind::Programmatic;
      }
    }
    CHECK(programmatic >= 1);
    CHECK(in_bodies == (off ? 0u : 1u));
    CHECK(in_device == (off ? 0u : 1u));
    CHECK(verify(q) == "");
  };
  check_edges(p, false);
  // The verifier refuses them where the switches are off...
  lir::Program q = p;
  q.pdl_in_bodies = q.pdl_in_device_graphs = false;
  CHECK(verify(q) ==
        "E0899: internal compiler error: in graph `side`, a programmatic edge in a graph launched from the device\n"
        "E0899: internal compiler error: in graph `main.0`, a programmatic edge inside a conditional body\n");
  // ...and the pass makes none there with them off.
  lowering::PassOptions o;
  o.pdl = true;
  o.pdl_in_bodies = false;
  o.pdl_in_device_graphs = false;
  o.residency = lowering::residency_of(l->checked.program->profile);
  q = p;
  lowering::programmatic_edges(q, o, false);
  check_edges(q, true);
}

TEST_CASE("programmatic edges: the verifier refuses one into a kernel that does not wait, or from a copy") {
  auto l = lower_text(kChain);
  lir::Program p = l->program;
  REQUIRE(verify(p) == "");
  for (lir::Kernel& k : p.kernels)
    if (k.name == "tick") k.waits_at_entry = false;
  CHECK(verify(p) ==
        "E0899: internal compiler error: in graph `main`, a programmatic edge enters kernel `tick`, which does not "
        "wait at entry: it could touch memory before the kernel it depends on has finished\n"
        "E0899: internal compiler error: in graph `main`, a programmatic edge enters kernel `tick`, which does not "
        "wait at entry: it could touch memory before the kernel it depends on has finished\n");
  p = l->program;
  lir::Body& b = p.graphs[p.main_graph].body;
  b.nodes[5].deps[0].kind = lir::DepKind::Programmatic;  // memset -> memcpy
  CHECK(verify(p) == "E0899: internal compiler error: in graph `main`, a programmatic edge from a memset node\n");
  p = l->program;
  p.pdl = false;  // targets without PDL
  CHECK(verify(p).find("programmatic edges are off for this program") != std::string::npos);
  // A programmatic edge does not make up for a missing one: the ordering check still holds.
  p = l->program;
  p.graphs[p.main_graph].body.nodes[3].deps.clear();
  CHECK(verify(p).find("nothing orders this node after the node it conflicts with on `c`") != std::string::npos);
}

TEST_CASE("programmatic edges: the artifact holds them, the kernels wait, and the user kernel's PTX waits first") {
  auto l = compile_artifact(kChain);
  const fb::Pipeline& f = *l->pipeline;
  const fb::Graph& g = *f.graphs()->Get(static_cast<flatbuffers::uoffset_t>(f.main_graph()));
  // Per node: "-" without dependencies, else the kind of each ("p" programmatic, "f" full).
  std::string kinds;
  REQUIRE(g.dep_kinds());
  for (uint32_t i = 0; i < g.nodes()->size(); ++i) {
    const uint32_t first = orch::artifact::deps_begin(g, i), end = g.nodes()->Get(i)->deps_end();
    if (first == end) kinds += "-";
    else kinds += "[";
    for (uint32_t j = first; j < end; ++j) kinds += g.dep_kinds()->Get(j) == fb::EdgeKind::Programmatic ? "p" : "f";
    if (first != end) kinds += "]";
  }
  CHECK(kinds == "--[p][p][p][f]");
  for (const fb::Kernel* k : *f.kernels()) CHECK(k->waits_at_entry());
  const fb::Kernel* tick = f.kernels()->Get(0);
  REQUIRE(tick->name()->str() == "tick");
  const std::string ptx(reinterpret_cast<const char*>(tick->ptx()->data()), tick->ptx()->size());
  const size_t body = ptx.find('{', ptx.find(".entry tick("));
  const size_t wait = ptx.find("griddepcontrol.wait;", body);
  REQUIRE(wait != std::string::npos);
  // Nothing but declarations and comments between the body's brace and the wait.
  std::string between = ptx.substr(body + 1, wait - body - 1);
  for (size_t line = 0; line < between.size();) {
    size_t end = between.find('\n', line);
    if (end == std::string::npos) end = between.size();
    std::string t = between.substr(line, end - line);
    t.erase(0, t.find_first_not_of(" \t"));
    CHECK((t.empty() || t.rfind("//", 0) == 0 || t.rfind(".reg", 0) == 0));
    line = end + 1;
  }
  // The trigger is the next instruction.
  const std::string wait_then_trigger = "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n";
  CHECK(ptx.compare(wait, wait_then_trigger.size(), wait_then_trigger) == 0);
}


TEST_CASE("launch shapes: programmatic edges only where every launch fits in one wave, unrolling up to 4 waves") {
  auto chain = [](uint64_t n) {
    return "pipeline c\ntarget sm_90\nparam n: u32 = " + std::to_string(n) +
           "\nbuffer x: f32[n]\nbuffer c: i32\nbuffer s: u32\n"
           "kernel axpb(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void axpb(unsigned n, float* x) "
           "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0.5f * x[i] + 1.0f; }\"\"\"\n"
           "kernel big_smem(x: inout f32[]) source \"\"\"extern \"C\" __global__ void big_smem(float* x) {}\"\"\"\n"
           "graph main {\n"
           "  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "  axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "  c = 10\n"
           "  while c > 0 {\n"
           "    axpb<<<ceil_div(n, 256), 256>>>(n, x)\n"
           "    c -= 1\n"
           "  }\n"
           "}\n";
  };
  // 1056 blocks of 256 threads fit at once on an sm_90 (132 SMs x 8): one wave.
  auto small = lower_text(chain(1056 * 256));
  CHECK(programmatic(small->program) == 1);
  CHECK(small->program.unrolled_loops.size() == 1);
  // One block more is a second wave: full edges and the reason; the loop is still unrolled (up to
  // 3 waves past the first, unroll_loops.cpp: kMaxExtraWaves).
  auto big = lower_text(chain(1056 * 256 + 1));
  CHECK(programmatic(big->program) == 0);
  CHECK(big->program.unrolled_loops.size() == 1);
  const std::string ir = lir::print(big->program, big->sources);
  CHECK(ir.find("# full edge from kernels: this launch has 1057 blocks of 256 threads, more than the 1056 such "
                "blocks an sm_90 holds at once (132 SMs x 8) (programmatic edges join one-wave launches only)") !=
        std::string::npos);
  CHECK(lower_text(chain(4 * 1056 * 256))->program.unrolled_loops.size() == 1);
  // A fifth wave: no unrolling, and why.
  CHECK(lower_text(chain(4 * 1056 * 256 + 1))->program.unrolled_loops.empty());
  const std::vector<std::string> notes = unroll_notes(chain(4 * 1056 * 256 + 1));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "`while c > 0` at line 13:3: not unrolled: a launch of its body has 4225 blocks of 256 threads, "
                    "more than the 1056 such blocks an sm_90 holds at once (132 SMs x 8); its launches run 4 waves "
                    "past their first, more than 3, so its run time, not the loop's turn-around, dominates (--unroll "
                    "N unrolls it anyway)");
  // --unroll N is the user's word.
  LowerOptions four;
  four.unroll = 4;
  CHECK(lower_text(chain(1 << 24), four)->program.unrolled_loops.size() == 1);
}

TEST_CASE("launch shapes: residency by threads, blocks and shared memory; unknown sizes are not one wave") {
  auto l = lower_text(R"(pipeline s
target sm_90
param n: u32 = 100
param m: u32
buffer x: f32[n]
kernel k(x: inout f32[]) source """extern "C" __global__ void k(float* x) {}"""
graph main {
  k<<<2000, 1024>>>(x)
  k<<<1, 1>>>(x)
  k<<<300, 33, 100000>>>(x)
  k<<<m, 32>>>(x)
  k<<<dim3(10, 10, 3), dim3(16, 16)>>>(x)
}
)");
  const lowering::Residency r = lowering::residency_of(l->checked.program->profile);
  CHECK(r.sms == 132);
  std::vector<lowering::LaunchShape> shapes;
  for (const lir::Node& n : main_body(l->program).nodes)
    if (const auto* k = std::get_if<lir::KernelNode>(&n.op)) shapes.push_back(lowering::launch_shape(l->program, *k, r));
  REQUIRE(shapes.size() == 5);
  // 1024 threads: 2 per SM (2048 threads), 264 at once.
  CHECK(shapes[0].resident == 264);
  CHECK_FALSE(shapes[0].one_wave());
  // One thread: 32 blocks per SM at most.
  CHECK(shapes[1].resident == 32 * 132);
  CHECK(shapes[1].one_wave());
  // 33 threads take two warps; 100000 bytes of shared memory leave room for 2 per SM.
  CHECK(shapes[2].resident == 2 * 132);
  CHECK_FALSE(shapes[2].one_wave());
  // A grid from a param without a default is not known before the launch.
  CHECK_FALSE(shapes[3].blocks.has_value());
  CHECK_FALSE(shapes[3].one_wave());
  CHECK(shapes[3].describe(r) == "a grid known only when it runs, of blocks of 32 threads (at most 4224 such blocks "
                                 "an sm_90 holds at once (132 SMs x 32))");
  CHECK(*shapes[4].blocks == 300);
  CHECK(*shapes[4].threads == 256);
  CHECK(shapes[4].one_wave());
}

// Once compiled, a kernel's registers can leave room for fewer blocks than its threads do: the
// programmatic edges into and out of its launches go, and a loop the compiler unrolled is
// lowered again without unrolling (lower.cpp), each saying why.
TEST_CASE("launch shapes: the compiled kernel's registers count; a loop unrolled past 4 waves is lowered again") {
  auto text = [](const std::string& kernel) {
    return "pipeline r\ntarget sm_90\nparam n: u32 = 512\nbuffer x: f64[n * 128]\nbuffer c: i32\n"
           "kernel heavy(n: u32, x: inout f64[]) source \"\"\"\n"
           "extern \"C\" __global__ void heavy(unsigned n, double* x) {\n"
           "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i >= n) return;\n"
           "  double a[128];\n"
           "#pragma unroll\n"
           "  for (int j = 0; j < 128; ++j) a[j] = x[j * n + i];\n"
           "  double s = 0;\n"
           "#pragma unroll\n"
           "  for (int k = 0; k < 128; ++k)\n"
           "#pragma unroll\n"
           "    for (int j = 0; j < 128; ++j) s += a[j] * a[(j * 7 + k) % 128];\n"
           "  x[i] = s;\n"
           "}\n"
           "\"\"\"\n"
           "kernel light(n: u32, x: inout f64[]) source \"\"\"\n"
           "extern \"C\" __global__ void light(unsigned n, double* x) {\n"
           "  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] = 0.5 * x[i] + 1.0;\n"
           "}\n"
           "\"\"\"\n"
           "graph main {\n"
           "  " + kernel + "<<<1000, 256>>>(n, x)\n"
           "  " + kernel + "<<<1000, 256>>>(n, x)\n"
           "  c = 10\n"
           "  while c > 0 {\n"
           "    " + kernel + "<<<1000, 256>>>(n, x)\n"
           "    c -= 1\n"
           "  }\n"
           "}\n";
  };
  // 1000 blocks of 256 threads: one wave by threads (1056 at once on an sm_90), so before the
  // kernels compile both are taken to fit.
  const lowering::Residency r = lowering::residency_of(lower_text(text("light"))->checked.program->profile);
  auto light = compile_artifact(text("light"));
  CHECK(programmatic(light->program) == 1);
  CHECK(light->program.unrolled_loops.size() == 1);

  auto heavy = compile_artifact(text("heavy"));
  const lir::Kernel* k = nullptr;
  for (const lir::Kernel& kernel : heavy->program.kernels)
    if (kernel.name == "heavy" && kernel.guard_of < 0) k = &kernel;
  REQUIRE(k);
  const uint32_t registers = k->demand.registers;
  INFO(registers);
  REQUIRE(registers > 128);  // 128 doubles live at once
  // Blocks per SM by registers, as cuda_occupancy.h counts them: 8 warps a block, each warp
  // registers * 32 in units of 256, each of 4 partitions holding 16384 registers' worth of warps.
  const uint32_t per_warp = (registers * 32 + 255) / 256 * 256;
  const uint64_t per_sm = (16384 / per_warp) * 4 / 8;
  REQUIRE(per_sm * 132 * 4 < 1000);  // more than 4 waves
  CHECK(programmatic(heavy->program) == 0);
  CHECK(heavy->program.unrolled_loops.empty());
  for (const lir::Node& n : main_body(heavy->program).nodes) {
    if (const auto* c = std::get_if<lir::ConditionalNode>(&n.op)) {
      REQUIRE(c->bodies.size() == 1);
      for (const lir::Node& m : c->bodies[0].nodes) CHECK_FALSE(m.guard.has_value());
    }
  }
  const std::string ir = lir::print(heavy->program, heavy->sources);
  INFO(ir);
  CHECK(ir.find("this launch has 1000 blocks of 256 threads, more than the " + std::to_string(per_sm * 132) +
                " such blocks an sm_90 holds at once (132 SMs x " + std::to_string(per_sm) + ": its " +
                std::to_string(registers) + " registers per thread)") != std::string::npos);
  // The launch shape before compiling knows nothing of registers.
  const lir::KernelNode& first = std::get<lir::KernelNode>(main_body(heavy->program).nodes[1].op);
  lir::Program uncompiled = heavy->program;
  for (lir::Kernel& kernel : uncompiled.kernels) kernel.demand = {};
  CHECK(lowering::launch_shape(uncompiled, first, r).one_wave());
  CHECK_FALSE(lowering::launch_shape(heavy->program, first, r).one_wave());
  CHECK(std::string(lowering::launch_shape(heavy->program, first, r).limit) == "registers");
}

// In a graph where every kernel free of the collective before it fits in one wave, each waits for
// that collective; where one is larger, all stay free (it fills the SMs the chain's short kernels
// need); --no-line-up leaves them all free.
TEST_CASE("line up: one-wave kernels after the collective before them, unless a larger one runs beside them") {
  auto text = [](bool large) {
    std::string t = "pipeline cb\ntarget sm_90\nparam n: u32 = 256\nparam s: f32 = 0.5\ncomm world\n"
                    "buffer big: f32[1 << 24]\nbuffer g0: f32[n]\nbuffer g1: f32[n]\nbuffer g2: f32[n]\n"
                    "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void "
                    "scale(unsigned n, float s, float* x) {}\"\"\"\n"
                    "graph main {\n";
    for (int k = 0; k < 3; ++k)
      t += "  scale<<<ceil_div(n, 256), 256>>>(n, s, g" + std::to_string(k) + ")\n  allreduce sum g" +
           std::to_string(k) + " on world\n";
    t += large ? "  scale<<<65536, 256>>>(1 << 24, s, big)\n" : "  scale<<<1056, 256>>>(1056 * 256, s, big)\n";
    return t + "  scale<<<1, 32>>>(1, s, g0)\n}\n";
  };
  auto lined = lower_text(text(false));
  CHECK(edges(main_body(lined->program)) ==
        "0 kernel:\n1 collective: 0\n2 kernel: 1\n3 collective: 2\n4 kernel: 3\n5 collective: 4\n6 kernel: 5\n"
        "7 kernel: 1 5\n");
  CHECK(main_body(lined->program).nodes[2].order_note ==
        "after the collective at line 13:3: this launch has 1 block of 256 threads, within the 1056 such blocks an "
        "sm_90 holds at once (132 SMs x 8), too short to gain from running beside it");
  // Free, each collective still waits for the one before it (collectives_in_order).
  const std::string free_edges =
      "0 kernel:\n1 collective: 0\n2 kernel:\n3 collective: 2 1\n4 kernel:\n5 collective: 4 3\n6 kernel:\n"
      "7 kernel: 1\n";
  auto large = lower_text(text(true));
  CHECK(edges(main_body(large->program)) == free_edges);
  CHECK(main_body(large->program).nodes[2].order_note.empty());
  LowerOptions off;
  off.line_up_collectives = false;
  CHECK(edges(main_body(lower_text(text(false), off)->program)) == free_edges);
}

// A collective gets high priority (NCCL's kernels first on the SMs) where a kernel may run beside
// it, and not where every kernel is ordered before or after it (lined up, above);
// --no-collective-priority leaves every collective at the stream's priority. The artifact
// carries the flag on the collective's op.
TEST_CASE("collective priority: high where a kernel may run beside the collective, in the IR and the artifact") {
  auto text = [](bool large) {
    std::string t = "pipeline cb\ntarget sm_90\nparam n: u32 = 256\nparam s: f32 = 0.5\ncomm world\n"
                    "buffer big: f32[1 << 24]\nbuffer g0: f32[n]\nbuffer g1: f32[n]\n"
                    "kernel scale(n: u32, s: f32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void "
                    "scale(unsigned n, float s, float* x) { unsigned i = blockIdx.x * blockDim.x + threadIdx.x; "
                    "if (i < n) x[i] *= s; }\"\"\"\n"
                    "graph main {\n";
    for (int k = 0; k < 2; ++k)
      t += "  scale<<<ceil_div(n, 256), 256>>>(n, s, g" + std::to_string(k) + ")\n  allreduce sum g" +
           std::to_string(k) + " on world\n";
    t += large ? "  scale<<<65536, 256>>>(1 << 24, s, big)\n" : "";
    return t + "}\n";
  };
  auto priorities = [](const lir::Program& p) {
    std::string out;
    for (const lir::Node& n : main_body(p).nodes)
      if (const auto* c = std::get_if<lir::CollectiveNode>(&n.op)) out += c->high_priority ? "high " : "stream ";
    return out;
  };
  // The large kernel is free of both collectives; kernel 2 (g1) of the first.
  auto large = lower_text(text(true));
  CHECK(priorities(large->program) == "high high ");
  CHECK(lir::print(large->program, large->sources).find(", high priority") != std::string::npos);
  // Small kernels only: lined up after the collective before them, nothing runs beside one.
  auto small = lower_text(text(false));
  CHECK(priorities(small->program) == "stream stream ");
  CHECK(lir::print(small->program, small->sources).find("high priority") == std::string::npos);
  // Without line-up the small kernel 2 is free of the first allreduce, so that one is high.
  LowerOptions free_kernels;
  free_kernels.line_up_collectives = false;
  CHECK(priorities(lower_text(text(false), free_kernels)->program) == "high stream ");
  LowerOptions off;
  off.prioritize_collectives = false;
  CHECK(priorities(lower_text(text(true), off)->program) == "stream stream ");
  CHECK(priorities(lower_text(text(true), plain_lowering())->program) == "stream stream ");

  auto compiled = compile_artifact(text(true));
  const fb::Pipeline& pipe = *compiled->pipeline;
  int high = 0;  // only a collective's table has high_priority (format 8)
  for (const fb::Op* op : *pipe.ops())
    if (const fb::CollectiveOp* c = op->body_as_CollectiveOp()) high += c->high_priority() ? 1 : 0;
  CHECK(high == 2);
}

// The exact forms the GPU alone used to pin (issue 20, item 8): a grid that is one block only at
// the params' defaults races like any multi-block kernel (a set_param can grow it); each guarded
// copy passes its own slot index; the guard function takes an f32 or f64 param as its bits.

// Loops the DAG leaves free of each other (lowering/one_loop_at_a_time.cpp: two WHILE nodes
// running at once fault the GPU on driver 580).
const char* const kFreeLoops = R"(pipeline loops
target sm_90
buffer a: i32
buffer b: i32
buffer c: i32
buffer x: i32
buffer y: i32
buffer z: i32
graph main {
  a = 3
  b = 4
  c = 1
  while a > 0 {
    x += 1
    a -= 1
  }
  while b > 0 {
    y += 1
    b -= 1
  }
  if c > 0 {
    while c > 0 {
      z += 1
      c -= 1
    }
  }
}
)";

TEST_CASE("loops: no two while loops of a body run at once, with or without the speed passes") {
  for (const LowerOptions& options : {LowerOptions{}, plain_lowering()}) {
    auto l = lower_text(kFreeLoops, options);
    const lir::Body& b = l->program.graphs[l->program.main_graph].body;
    std::vector<uint32_t> loops;  // the nodes that hold a while loop, in program order
    for (uint32_t i = 0; i < b.nodes.size(); ++i)
      if (lir::holds_while(b.nodes[i])) loops.push_back(i);
    REQUIRE(loops.size() == 3);  // two whiles and the if around the third
    CHECK(std::get<lir::ConditionalNode>(b.nodes[loops[2]].op).type == lir::ConditionalType::If);
    for (size_t k = 1; k < loops.size(); ++k) {
      CAPTURE(k);
      CHECK(lir::reaches(b, loops[k - 1], loops[k]));
      CHECK(b.nodes[loops[k]].order_note.find("two while loops running at once fault the GPU") != std::string::npos);
    }
    CHECK(verify(l->program) == "");
    // Without the edge the pass added, the verifier refuses the program.
    lir::Program p = l->program;
    std::vector<lir::Dep>& deps = p.graphs[p.main_graph].body.nodes[loops[1]].deps;
    deps.erase(std::remove_if(deps.begin(), deps.end(), [&](const lir::Dep& d) { return d.from == loops[0]; }),
               deps.end());
    CHECK(verify(p) ==
          "E0899: internal compiler error: in graph `main`, this while loop may run at the same time as an earlier one\n");
  }
}


}  // namespace orch
