// Undo on the CPU, against the recording fake of the CUDA seam (seam_build.h): each CUDA call
// of a set_param patch failed in turn leaves the Executable, its graphs and its executable
// graphs exactly as they were; a patch whose undo fails leaves the Executable refusing use.
#include <doctest/doctest.h>

#include "runtime/tests/seam_build.h"

using namespace orch::test::seam;

namespace {

// What must be as it was after a failed set_param.
struct Snapshot {
  FakeState state;
  double param = 0;
  Executable::Stats stats;
  std::vector<bool> upload_needed, update_needed;
  std::vector<uintptr_t> execs, templates;
  size_t records = 0;
  static Snapshot of(FakeBuild& f, const char* param) {
    Snapshot s;
    s.state = f.cuda.state;
    s.param = f.param(param);
    s.stats = f.exec->stats();
    for (const Impl::Top& t : f.x->tops) {
      s.upload_needed.push_back(t.upload_needed);
      s.update_needed.push_back(t.update_needed);
      s.execs.push_back(h(t.exec.get()));
      s.templates.push_back(h(t.graph_template.get()));
    }
    s.records = f.x->records.size();
    return s;
  }
  void check_same(const Snapshot& o) const {
    CHECK(state == o.state);
    CHECK(param == o.param);
    CHECK(stats.nodes_patched_in_place == o.stats.nodes_patched_in_place);
    CHECK(stats.patches_refused == o.stats.patches_refused);
    CHECK(stats.graph_updates == o.stats.graph_updates);
    CHECK(stats.segments_rebuilt == o.stats.segments_rebuilt);
    CHECK(upload_needed == o.upload_needed);
    CHECK(update_needed == o.update_needed);
    CHECK(execs == o.execs);
    CHECK(templates == o.templates);
    CHECK(records == o.records);
  }
};

// Fails each call a successful set_param(name, value) makes, in turn, on a fresh build: every
// failure that set_param reports leaves the snapshot as it was (and the Executable usable:
// the same set_param then succeeds); a failure it absorbs (a refused in-place patch) still
// ends with every exec equal to its template. Returns how many calls failed the set_param.
template <class T>
size_t fail_each_call(const std::function<Status(FakeBuild&)>& build, const char* name, T value) {
  size_t calls = 0;
  {
    FakeBuild f;
    REQUIRE(build(f).ok());
    const size_t from = f.cuda.calls.size();
    REQUIRE(f.exec->set_param(name, value).ok());
    calls = f.cuda.calls.size() - from;
  }
  REQUIRE(calls > 0);
  size_t reported = 0;
  for (size_t k = 0; k < calls; ++k) {
    FakeBuild f;
    REQUIRE(build(f).ok());
    const Snapshot before = Snapshot::of(f, name);
    const size_t from = f.cuda.calls.size();
    CAPTURE(k);
    CAPTURE(f.cuda.calls.size() > from + k ? f.cuda.calls[from + k].name : std::string());
    f.cuda.fail_call(from + k, cudaErrorInvalidValue);
    const Status s = f.exec->set_param(name, value);
    if (!s.ok()) {
      ++reported;
      INFO("failed call " << f.cuda.calls[from + k].name << ": " << s.error().to_string());
      Snapshot::of(f, name).check_same(before);
      CHECK(s.error().message().find("refuses further use") == std::string::npos);
      f.cuda.clear_failures();
      ORCH_CHECK_OK(f.exec->set_param(name, value));
    }
    for (const Impl::Top& t : f.x->tops) {
      std::vector<uintptr_t> all;
      f.cuda.nodes_of(h(t.graph_template.get()), &all);
      for (uintptr_t n : all) CHECK(f.cuda.exec_node(h(t.exec.get()), n) == f.cuda.node(n));
    }
  }
  return reported;
}

}  // namespace

TEST_CASE("seam: undo: any CUDA call of a patch failing leaves the Executable as it was") {
  SUBCASE("kernels, copies and fills of a host graph") {
    auto build = [](FakeBuild& f) { return f.build(host_pipeline(), host_bindings(1000)); };
    CHECK(fail_each_call(build, "n", 2000u) > 0);
    CHECK(fail_each_call(build, "scale", 0.25f) > 0);
  }
  SUBCASE("a device graph") {
    auto build = [](FakeBuild& f) {
      return f.build(orch::test::open_example("scheduler"), Bindings());
    };
    CHECK(fail_each_call(build, "batch", 1024u) > 0);
  }
  SUBCASE("a family") {
    auto build = [](FakeBuild& f) { return f.build(orch::test::open_example("moe"), Bindings()); };
    CHECK(fail_each_call(build, "tokens", 2048u) > 0);
  }
  SUBCASE("the sample artifact: kernels, copies, fills, conditional bodies, a device graph, a collective") {
    auto build = [](FakeBuild& f) { return f.build(sample(), sample_bindings(), 2); };
    CHECK(fail_each_call(build, "n", 2048u) > 0);
    CHECK(fail_each_call(build, "tol", 0.5f) > 0);
  }
  SUBCASE("a segment rebuilt for its collective") {
    auto build = [](FakeBuild& f) {
      Bindings b;
      b.param("n", 4096u);
      return f.build(orch::test::open_example("dp_step"), b, 2);
    };
    CHECK(fail_each_call(build, "n", 8192u) > 0);
  }
}

TEST_CASE("seam: undo: a patch that cannot be undone leaves the Executable refusing further use") {
  FakeBuild f;
  ORCH_REQUIRE_OK(f.build(host_pipeline(), host_bindings(1000)));
  // The first exec patch is refused, the whole-graph update fails, and so does the undo's first
  // template call.
  f.cuda.fail_next("exec_kernel_node_set_params", cudaErrorGraphExecUpdateFailure);
  f.cuda.fail_next("exec_update", cudaErrorGraphExecUpdateFailure);
  size_t template_patches = 0;
  {
    FakeBuild probe;
    ORCH_REQUIRE_OK(probe.build(host_pipeline(), host_bindings(1000)));
    const size_t from = probe.cuda.calls.size();
    ORCH_REQUIRE_OK(probe.exec->set_param("scale", 3.0f));
    template_patches = count(probe.cuda.names_since(from), "kernel_node_set_params");
  }
  f.cuda.fail_next("kernel_node_set_params", cudaErrorInvalidValue,
                   static_cast<int>(template_patches));
  const Status s = f.exec->set_param("scale", 3.0f);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("cannot update graph 'main' in place") != std::string::npos);
  CHECK(s.error().message().find("undoing the patches failed too") != std::string::npos);
  CHECK(s.error().message().find("so this Executable refuses further use") != std::string::npos);
  const size_t from = f.cuda.calls.size();
  const Status again = f.exec->set_param("scale", 1.0f);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message().find("instantiate the pipeline again") != std::string::npos);
  CHECK_FALSE(f.exec->launch(nullptr).ok());
  CHECK(f.cuda.calls.size() == from);  // refused before any CUDA call
}

TEST_CASE(
    "seam: building fails cleanly at any CUDA call, naming the node, and leaves nothing behind") {
  size_t calls = 0;
  {
    FakeBuild f;
    ORCH_REQUIRE_OK(f.build(orch::test::open_example("moe"), Bindings()));
    calls = f.cuda.calls.size();
  }
  size_t failed = 0;
  for (size_t k = 0; k < calls; ++k) {
    FakeBuild f;
    f.cuda.fail_call(k, cudaErrorInvalidValue);
    const Status s = f.build(orch::test::open_example("moe"), Bindings());
    const std::string name = f.cuda.calls[k].name;
    CAPTURE(k);
    CAPTURE(name);
    if (s.ok()) continue;
    ++failed;
    const std::string m = s.error().message();
    CHECK(s.error().cuda_error() == cudaErrorInvalidValue);
    if (name == "add_memset_node") CHECK(m.find("cudaGraphAddMemsetNode") != std::string::npos);
    if (name == "instantiate") CHECK(m.find("cannot instantiate graph '") != std::string::npos);
    if (name == "add_kernel_node") {
      CHECK(m.find("cuGraphAddNode (kernel)") != std::string::npos);
      CHECK(!s.error().where().empty());
    }
    // Everything made is freed with the Executable's state.
    f.failed.reset();
    CHECK(f.cuda.state.execs.empty());
    size_t graphs = 0, graph_destroys = 0, mallocs = 0, frees = 0;
    for (const FakeCall& c : f.cuda.calls) {
      graphs += c.name == "graph_create" && c.result == 0;
      graph_destroys += c.name == "graph_destroy";
      mallocs += c.name == "malloc" && c.result == 0;
      frees += c.name == "free";
    }
    CHECK(graphs == graph_destroys);
    CHECK(mallocs == frees);
  }
  CHECK(failed > calls / 2);
}
