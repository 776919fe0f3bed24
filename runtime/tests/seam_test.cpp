// The graph builder and the patcher on the CPU, against the recording fake of the CUDA seam
// (fake_graph_api.h): every node kind the runtime builds (kernel, memcpy, memset, conditional
// IF/WHILE/SWITCH with their bodies, device graphs and families with their exec tables, a
// device graph's own exec, collectives captured into a segment), checked node by node against
// the artifact; and every set_param patch path (in place, refused then updated, device graphs
// re-uploaded at the next launch, a segment rebuilt for a collective, nothing to patch). Undo
// is seam_undo_test.cpp's; the builder is seam_build.h.
#include <doctest/doctest.h>

#include "runtime/tests/seam_build.h"

using namespace orch::test::seam;

TEST_CASE(
    "seam: a host pipeline's kernels, copies, fills and IF/WHILE/SWITCH nodes are built as the "
    "artifact says") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  check_built(f);
  REQUIRE(f.x->tops.size() == 1);
  const Impl::Top& main = f.top("main");
  CHECK_FALSE(main.device);

  // The conditionals: an IF (with its else), a WHILE (host graphs with one launch after other
  // loops) and a SWITCH of three bodies, each on a handle created on main with the artifact's
  // default and flags.
  std::vector<int> types;
  for (uintptr_t n : f.cuda.graph_nodes.at(h(main.graph_template.get())))
    if (f.cuda.node(n).kind == "conditional") types.push_back(f.cuda.node(n).cond_type);
  CHECK(types ==
        std::vector<int>{cudaGraphCondTypeIf, cudaGraphCondTypeWhile, cudaGraphCondTypeSwitch});
  CHECK(f.x->has_loops);
  const auto creates = f.cuda.named("conditional_handle_create");
  REQUIRE(creates.size() == f.p->handles()->size());
  for (uint32_t i = 0; i < f.p->handles()->size(); ++i) {
    const fb::ConditionalHandle* ch = f.p->handles()->Get(i);
    CHECK(creates[i]->on == h(main.graph_template.get()));
    CHECK(creates[i]->default_value == ch->default_value());
    CHECK(creates[i]->flags ==
          (ch->set_default() ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0u));
    CHECK(f.x->handles[i] == creates[i]->node);
  }

  // The values: n = 1000, scale = 2 (the default), 1.5 in the else branch.
  const uintptr_t axpy = f.kernel("axpy");
  const std::vector<uintptr_t> nodes = f.kernel_nodes(main, axpy);
  REQUIRE(nodes.size() >= 4);
  const FakeParams& first = f.cuda.node(nodes[0]);
  CHECK(first.grid[0] == 8);  // ceil_div(1000, 128)
  CHECK(first.block[0] == 128);
  CHECK(first.grid[1] == 1);
  CHECK(first.block[2] == 1);
  CHECK(first.args == std::vector<uint64_t>{1000, f32_slot(2.0f), f.buffer("a"), f.buffer("b")});
  const FakeParams& branch = f.cuda.node(nodes[1]);
  CHECK(branch.grid[0] == 4);  // ceil_div(1000, 256)
  CHECK(branch.args == std::vector<uint64_t>{1000, f32_slot(1.5f), f.buffer("b"), f.buffer("a")});
  const FakeParams& loop = f.cuda.node(nodes[2]);
  CHECK(loop.grid[0] == 16);  // ceil_div(1000, 64)
  CHECK(loop.block[0] == 64);
  const FakeParams& last = f.cuda.node(nodes.back());
  CHECK(last.grid[0] == 1);
  CHECK(last.block[0] == 32);
  CHECK(last.args == std::vector<uint64_t>{1000, f32_slot(2.0f), f.buffer("b"), f.buffer("a")});

  // The order instantiate makes its calls in: the device status record (the generated
  // kernels of the conditions report into it), the template and its handles, the nodes, then
  // instantiate, upload and wait.
  const std::vector<std::string> names = f.cuda.names_since(0);
  REQUIRE(names.size() > 6);
  REQUIRE(f.x->status);
  CHECK(names[0] == "malloc");
  CHECK(f.cuda.calls[0].params.bytes == Impl::kStatusBytes);
  CHECK(names[1] == "memset_async");
  CHECK(names[2] == "graph_create");
  CHECK(names[3] == "conditional_handle_create");
  CHECK(names[names.size() - 3] == "instantiate");
  CHECK(names[names.size() - 2] == "upload");
  CHECK(names.back() == "stream_synchronize");
  CHECK(f.cuda.named("upload").front()->on == h(main.exec.get()));
}

TEST_CASE("seam: the sample artifact: every node kind, an empty node, a programmatic edge, two segments") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(sample(), sample_bindings(), 2));
  check_built(f);
  REQUIRE(f.x->segments.size() == 2);
  CHECK(f.top("expert").device);
  // Segments in order, after the device graph.
  const auto instantiates = f.cuda.named("instantiate");
  REQUIRE(instantiates.size() == 3);
  CHECK(instantiates[0]->on == h(f.top("expert").graph_template.get()));
  CHECK(instantiates[1]->on == h(f.top("main").graph_template.get()));
  CHECK(instantiates[2]->on == h(f.top("main.1").graph_template.get()));
  // main ends in an empty node after the IF.
  const std::vector<uintptr_t>& main = f.cuda.graph_nodes.at(h(f.top("main").graph_template.get()));
  CHECK(f.cuda.node(main.back()).kind == "empty");
  // The condition kernel's edge from the scale kernel is programmatic: both fit in one wave.
  const FakeCall* condition = nullptr;
  for (const FakeCall* c : f.cuda.named("add_kernel_node"))
    if (c->edge_types.size() == 2) condition = c;
  REQUIRE(condition);
  CHECK(condition->edge_types ==
        std::vector<int>{CU_GRAPH_DEPENDENCY_TYPE_DEFAULT, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC});
  CHECK(f.exec->stats().programmatic_edges == 1);
  CHECK(f.exec->stats().programmatic_edges_made_full == 0);
  // main.1's launcher: a launch shape of constants, and the device graph's exec as argument.
  const std::vector<uintptr_t>& tail = f.cuda.graph_nodes.at(h(f.top("main.1").graph_template.get()));
  const FakeParams& launcher = f.cuda.node(tail[0]);
  CHECK(launcher.grid[0] == 8);
  CHECK(launcher.block[0] == 32);
  CHECK(launcher.args == std::vector<uint64_t>{f.buffer("u"), h(f.top("expert").exec.get())});
  CHECK(f.cuda.node(tail[1]).kind == "collective");
  CHECK(f.cuda.node(tail[1]).bytes == 1024);
}

TEST_CASE("seam: a programmatic edge is made full where a launch runs in more than one wave here") {
  FakeBuild f;
  f.cuda.blocks_per_sm = 0;  // the driver says no block fits: several waves
  ORCH_REQUIRE_OK(f.build(sample(), sample_bindings(), 2));
  for (const FakeCall* c : f.cuda.named("add_kernel_node")) CHECK(c->edge_types.empty());  // no edge data
  CHECK(f.exec->stats().programmatic_edges == 1);
  CHECK(f.exec->stats().programmatic_edges_made_full == 1);
}

TEST_CASE(
    "seam: device graphs and a family: members instantiated for device launch, their exec table "
    "filled") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("moe"), Bindings()));
  check_built(f);
  const int experts = f.graph("experts");
  REQUIRE(f.p->graphs()->Get(experts)->family_size() == 8);
  REQUIRE(f.x->members[experts].size() == 8);
  // The table: allocated, then the eight execs copied into it in member order.
  REQUIRE(f.x->tables[experts]);
  const uintptr_t table = u(f.x->tables[experts].get());
  const auto mallocs = f.cuda.named("malloc");
  bool allocated = false;
  for (const FakeCall* c : mallocs)
    allocated |= c->node == table && c->params.bytes == 8 * sizeof(cudaGraphExec_t);
  CHECK(allocated);
  const FakeCall* fill = nullptr;
  for (const FakeCall* c : f.cuda.named("memcpy_async"))
    if (c->on == table) fill = c;
  REQUIRE(fill);
  REQUIRE(fill->data.size() == 8);
  for (int m = 0; m < 8; ++m) {
    const Impl::Top& member = f.top("experts", m);
    CHECK(member.device);
    CHECK(fill->data[m] == h(member.exec.get()));
    // expert_ffn's first argument is the family index.
    const std::vector<uintptr_t> nodes = f.kernel_nodes(member, f.kernel("expert_ffn"));
    REQUIRE(nodes.size() == 1);
    CHECK(f.cuda.node(nodes[0]).args.at(0) == static_cast<uint64_t>(m));
  }
  // Device graphs are built and instantiated before the segment that launches them.
  const auto instantiates = f.cuda.named("instantiate");
  REQUIRE(instantiates.size() == f.x->tops.size());
  CHECK(instantiates.back()->on == h(f.top("main").graph_template.get()));
  // route's table and finish's exec, in the segment.
  const std::vector<uintptr_t> route = f.kernel_nodes(f.top("main"), f.kernel("route"));
  REQUIRE(route.size() == 1);
  const FakeParams& r = f.cuda.node(route[0]);
  CHECK(std::find(r.args.begin(), r.args.end(), table) != r.args.end());
  CHECK(std::find(r.args.begin(), r.args.end(), h(f.top("finish").exec.get())) != r.args.end());
}

TEST_CASE(
    "seam: a device graph that tail-launches itself gets its own exec, in the template and the "
    "exec") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("scheduler"), Bindings()));
  check_built(f);
  const Impl::Top& rounds = f.top("rounds");
  CHECK(rounds.device);
  const std::vector<uintptr_t> nodes = f.kernel_nodes(rounds, f.kernel("claim_and_run"));
  REQUIRE(nodes.size() == 1);
  const uintptr_t self = h(rounds.exec.get());
  CHECK(f.cuda.node(nodes[0]).args.back() == self);
  CHECK(f.cuda.exec_node(self, nodes[0]).args.back() == self);
  // Built with no exec yet (a null slot), then patched in place once instantiated: the refresh
  // of the device graphs inside build_all (instantiate() zeroes the stats after it).
  bool built_null = false;
  for (const FakeCall* c : f.cuda.named("add_kernel_node"))
    if (c->params.kernel == f.kernel("claim_and_run")) built_null = c->params.args.back() == 0;
  CHECK(built_null);
  CHECK(f.cuda.named("exec_kernel_node_set_params").size() == 1);
  CHECK(f.exec->stats().nodes_patched_in_place == 1);
  // The device status record, which the generated launcher takes: allocated and zeroed.
  CHECK(f.x->status);
}

TEST_CASE("seam: a collective is captured into its segment, after its dependencies") {
  FakeBuild f;
  Bindings b;
  b.param("n", 4096u);
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("dp_step"), b, 2));
  check_built(f);
  const auto issued = f.cuda.named("issue_collective");
  REQUIRE(issued.size() == 1);
  const FakeParams& c = issued[0]->params;
  CHECK(c.collective == static_cast<int>(fb::CollectiveKind::AllReduce));
  CHECK(c.bytes == 4096);  // NCCL's count
  CHECK(c.src == f.buffer("g"));
  CHECK(c.dst == f.buffer("g"));
  CHECK(c.value == orch::rt::nccl::kFloat32);
  CHECK(c.element_size == orch::rt::nccl::kSum);
  const Impl::Top& main = f.top("main");
  const auto begins = f.cuda.named("begin_capture_to_graph");
  REQUIRE(begins.size() == 1);
  CHECK(begins[0]->node == h(main.graph_template.get()));
  CHECK(f.cuda.named("end_capture").size() == 1);
  // world_size 2: sgd's 1.0 / world_size is 0.5.
  const std::vector<uintptr_t> sgd = f.kernel_nodes(main, f.kernel("sgd"));
  REQUIRE(sgd.size() == 1);
  const std::vector<uint64_t>& args = f.cuda.node(sgd[0]).args;
  CHECK(std::find(args.begin(), args.end(), f32_slot(0.5f)) != args.end());
}

TEST_CASE(
    "seam: set_param patches kernels, copies and fills in the template and in place in the exec") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  const Impl::Top& main = f.top("main");
  const uintptr_t exec = h(main.exec.get());
  const uintptr_t axpy = f.kernel("axpy");

  SUBCASE("an argument only: the kernels that take it") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("scale", 3.0f));
    const std::vector<std::string> names = f.cuda.names_since(from);
    // Four launches take `scale` (the loop's two, unrolled or not, the first and the default
    // case): each patched once in the template and once in the exec, nothing else.
    const size_t patched = count(names, "kernel_node_set_params");
    CHECK(patched >= 4);
    CHECK(count(names, "exec_kernel_node_set_params") == patched);
    CHECK(names.size() == 2 * patched);
    CHECK(f.exec->stats().nodes_patched_in_place == patched);
    CHECK(f.exec->stats().graph_updates == 0);
    for (uintptr_t n : f.kernel_nodes(main, axpy)) {
      const FakeParams& k = f.cuda.node(n);
      CHECK(f.cuda.exec_node(exec, n) == k);
      CHECK((k.args[1] == f32_slot(3.0f) || k.args[1] == f32_slot(1.5f)));
    }
    CHECK(f.param("scale") == 3.0);
  }
  SUBCASE("a size: grids, copy bytes and fill widths") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("n", 2000u));
    const std::vector<std::string> names = f.cuda.names_since(from);
    CHECK(count(names, "memcpy_node_set_params_1d") == 2);  // a -> b, and b -> a in case 1
    CHECK(count(names, "exec_memcpy_node_set_params_1d") == 2);
    CHECK(count(names, "memset_node_set_params") == 2);  // fill b and fill a: 2000 elements now
    CHECK(count(names, "exec_memset_node_set_params") == 2);
    std::vector<uintptr_t> all;
    f.cuda.nodes_of(h(main.graph_template.get()), &all);
    size_t copies = 0, big_fills = 0;
    for (uintptr_t n : all) {
      const FakeParams& k = f.cuda.node(n);
      CHECK(f.cuda.exec_node(exec, n) == k);
      if (k.kind == "memcpy") {
        CHECK(k.bytes == 8000);
        ++copies;
      }
      if (k.kind == "memset" && k.width == 2000) ++big_fills;
      if (k.kind == "kernel" && k.kernel == axpy) CHECK(k.args[0] == 2000);
    }
    CHECK(copies == 2);
    CHECK(big_fills == 2);
    CHECK(f.cuda.node(f.kernel_nodes(main, axpy)[0]).grid[0] == 16);  // ceil_div(2000, 128)
    check_built(f);
  }
  SUBCASE("the same value again: nothing to patch") {
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("n", 1000u));
    CHECK(f.cuda.names_since(from).empty());
  }
  SUBCASE("a value the bind checks or the plan refuse: no CUDA call at all") {
    const size_t from = f.cuda.calls.size();
    CHECK_FALSE(f.exec->set_param("n", -1).ok());
    CHECK_FALSE(f.exec->set_param("nope", 1u).ok());
    CHECK(f.cuda.calls.size() == from);
  }
  SUBCASE("a patch the exec refuses: the whole graph is updated from the template") {
    f.cuda.fail_next("exec_kernel_node_set_params", cudaErrorGraphExecUpdateFailure);
    const size_t from = f.cuda.calls.size();
    ORCH_REQUIRE_OK(f.exec->set_param("scale", 3.0f));
    const std::vector<std::string> names = f.cuda.names_since(from);
    CHECK(count(names, "exec_update") == 1);
    CHECK(names.back() == "exec_update");
    const orch::Executable::Stats s = f.exec->stats();
    CHECK(s.patches_refused == 1);
    CHECK(s.graph_updates == 1);
    CHECK(s.nodes_patched_in_place == count(names, "exec_kernel_node_set_params") - 1);
    for (uintptr_t n : f.kernel_nodes(main, axpy))
      CHECK(f.cuda.exec_node(exec, n) == f.cuda.node(n));
  }
}

// rebind() checks the new memory with the driver (binding_checks.cpp, not behind the seam), then
// points the buffer at it and patches as set_param does: that patch, driven directly.
// Two allreduces, each after a small kernel; with `large`, a multi-wave kernel beside them.
std::string two_allreduces(bool large) {
  std::string t =
      "pipeline two_ar\ntarget sm_90\nparam n: u32 = 256\ncomm world\nbuffer big: f32[1 << 24]\n"
      "buffer g0: f32[n]\nbuffer g1: f32[n]\n"
      "kernel scale(n: u32, x: inout f32[]) source \"\"\"extern \"C\" __global__ void scale(unsigned n, float* x) "
      "{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\"\"\"\n"
      "graph main {\n  scale<<<ceil_div(n, 256), 256>>>(n, g0)\n  allreduce sum g0 on world\n"
      "  scale<<<ceil_div(n, 256), 256>>>(n, g1)\n  allreduce sum g1 on world\n";
  if (large) t += "  scale<<<65536, 256>>>(1 << 24, big)\n";
  return t + "}\n";
}

OpenedExample compiled_with(const std::string& name, const std::string& source, const char* options) {
  std::string log;
  const std::string path = orch::test::compile_source(name, source, &log, options);
  INFO(log);
  REQUIRE(!path.empty());
  return orch::test::open_artifact(path);
}

// A collective that a kernel may run beside (lowering/prioritize_collectives.cpp) has NCCL's
// kernels at the device's greatest priority, and its segment is instantiated with node
// priorities; one with nothing beside it changes nothing.
TEST_CASE("seam: high-priority collectives: NCCL's kernels at the greatest priority, node priorities on") {
  for (bool large : {true, false}) {
    INFO("large kernel beside: " << large);
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(compiled_with(large ? "two_ar_large" : "two_ar", two_allreduces(large), ""), Bindings(), 2));
    const auto issued = f.cuda.named("issue_collective");
    REQUIRE(issued.size() == 2);
    const auto set = f.cuda.named("kernel_node_set_priority");
    const Impl::Top& main = f.top("main");
    if (large) {
      REQUIRE(set.size() == 2);
      for (int k = 0; k < 2; ++k) {
        CHECK(set[k]->node == issued[k]->node);  // the collective's (NCCL's) node, nothing else
        CHECK(f.cuda.node(set[k]->node).priority == -5);
      }
      CHECK(main.node_priority);
    } else {
      CHECK(set.empty());
      CHECK(f.cuda.named("graph_get_nodes").empty());
      CHECK_FALSE(main.node_priority);
    }
    bool instantiated = false;
    for (const auto* c : f.cuda.named("instantiate")) {
      if (c->on != h(main.graph_template.get())) continue;
      instantiated = true;
      CHECK(((c->flags & cudaGraphInstantiateFlagUseNodePriority) != 0) == large);
    }
    CHECK(instantiated);
  }
}

// The runtime keeps each collective after the one before it, by an edge of its own only where the
// graph does not already order them (a kernel lined up between them).
TEST_CASE("seam: a collective waits for the one before it, with no edge the graph already implies") {
  for (const char* options : {"", "--no-line-up"}) {
    INFO(options);
    const bool lined_up = options[0] == 0;
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(compiled_with(lined_up ? "two_ar" : "two_ar_free", two_allreduces(false), options), Bindings(), 2));
    const auto issued = f.cuda.named("issue_collective");
    REQUIRE(issued.size() == 2);
    const std::vector<uintptr_t>& second = issued[1]->deps;
    const bool has_chain_edge = std::find(second.begin(), second.end(), issued[0]->node) != second.end();
    CHECK(has_chain_edge == !lined_up);
    // Its kernel is always one of its dependencies.
    CHECK(!second.empty());
  }
}

TEST_CASE("seam: a buffer moved (rebind's patch): kernels, copies and fills that use it are patched") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  const Impl::Top& main = f.top("main");
  const uintptr_t old_b = f.buffer("b");
  int bi = -1;
  for (uint32_t i = 0; i < f.p->buffers()->size(); ++i)
    if (f.p->buffers()->Get(i)->name()->str() == "b") bi = static_cast<int>(i);
  REQUIRE(bi >= 0);
  const uintptr_t moved = 0x6600000000;
  f.x->buffers[bi].ptr = reinterpret_cast<void*>(moved);
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.x->refresh(Impl::Scope::Everything));
  const std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "memcpy_node_set_params_1d") == 2);  // a -> b, b -> a
  CHECK(count(names, "memset_node_set_params") == 1);     // fill b
  CHECK(count(names, "kernel_node_set_params") >= 4);
  std::vector<uintptr_t> all;
  f.cuda.nodes_of(h(main.graph_template.get()), &all);
  for (uintptr_t n : all) {
    const FakeParams& k = f.cuda.node(n);
    CHECK(k.dst != old_b);
    CHECK(k.src != old_b);
    CHECK(std::find(k.args.begin(), k.args.end(), old_b) == k.args.end());
    CHECK(f.cuda.exec_node(h(main.exec.get()), n) == k);
  }
  check_built(f);
}

TEST_CASE("seam: set_param on a device graph patches it and the next launch uploads it once") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("scheduler"), Bindings()));
  const Impl::Top& rounds = f.top("rounds");
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->set_param("batch", 1024u));
  std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "kernel_node_set_params") == 1);
  CHECK(count(names, "exec_kernel_node_set_params") == 1);
  CHECK(count(names, "upload") == 0);
  CHECK(rounds.upload_needed);
  const std::vector<uintptr_t> nodes = f.kernel_nodes(rounds, f.kernel("claim_and_run"));
  REQUIRE(nodes.size() == 1);
  CHECK(f.cuda.node(nodes[0]).args.at(1) == 1024);
  CHECK(f.cuda.exec_node(h(rounds.exec.get()), nodes[0]) == f.cuda.node(nodes[0]));

  const size_t before_launch = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->launch(nullptr));
  names = f.cuda.names_since(before_launch);
  CHECK(names == std::vector<std::string>{"stream_is_capturing", "upload", "launch"});
  CHECK(f.cuda.calls[before_launch + 1].on == h(rounds.exec.get()));
  CHECK(f.cuda.calls[before_launch + 2].on == h(f.top("main").exec.get()));
  CHECK(f.exec->stats().device_graph_uploads == 1);
  CHECK_FALSE(rounds.upload_needed);
  const size_t second = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->launch(nullptr));
  CHECK(f.cuda.names_since(second) == std::vector<std::string>{"stream_is_capturing", "launch"});
}

TEST_CASE(
    "seam: set_param that changes a collective builds, captures and instantiates its segment "
    "again") {
  FakeBuild f;
  Bindings b;
  b.param("n", 4096u);
  ORCH_REQUIRE_OK(f.build(orch::test::open_example("dp_step"), b, 2));
  const uintptr_t old_exec = h(f.top("main").exec.get());
  const uintptr_t old_graph = h(f.top("main").graph_template.get());
  const size_t from = f.cuda.calls.size();
  ORCH_REQUIRE_OK(f.exec->set_param("n", 8192u));
  const std::vector<std::string> names = f.cuda.names_since(from);
  CHECK(count(names, "graph_create") == 1);
  CHECK(count(names, "issue_collective") == 1);
  CHECK(count(names, "instantiate") == 1);
  CHECK(count(names, "upload") == 1);
  CHECK(count(names, "kernel_node_set_params") == 0);  // built anew, not patched
  CHECK(f.cuda.named("issue_collective").back()->params.bytes == 8192);
  CHECK(f.exec->stats().segments_rebuilt == 1);
  // The old graph and exec are gone once the new ones are in place.
  CHECK(h(f.top("main").exec.get()) != old_exec);
  bool destroyed_exec = false, destroyed_graph = false;
  for (size_t i = from; i < f.cuda.calls.size(); ++i) {
    destroyed_exec |= f.cuda.calls[i].name == "exec_destroy" && f.cuda.calls[i].on == old_exec;
    destroyed_graph |= f.cuda.calls[i].name == "graph_destroy" && f.cuda.calls[i].on == old_graph;
  }
  CHECK(destroyed_exec);
  CHECK(destroyed_graph);
  check_built(f);
}

