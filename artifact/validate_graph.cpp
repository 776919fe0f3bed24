// validate()'s rules for graphs and their nodes: limits, the dependency layout and edge kinds,
// and each op proved once per context (prove_op hands its body to validate_ops.cpp).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "artifact/validate_internal.h"

namespace orch::artifact::detail {

namespace {

std::string lower(const char* s) {
  std::string out = s ? s : "";
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace

bool Validator::check_top_graph(uint32_t i) {
  const fb::Graph* g = graphs_->Get(i);
  Scope scope(*this, FrameKind::Graph, i);
  if (g->family_size() > 0 && !g->device()) {
    return fail_here("family size " + std::to_string(g->family_size()) +
                     " but not a device graph (families are instantiated for device launch)");
  }
  if (g->family_size() > kMaxFamilySize) {
    return fail_here("family size " + std::to_string(g->family_size()) + " is more than " +
                     std::to_string(kMaxFamilySize));
  }
  if (g->device() && size_of(g->nodes()) == 0) return fail_here("a device graph has no nodes");
  if (g->device()) {
    // "The graph cannot be empty and must contain at least one kernel, memcpy, or memset
    // node" (doc comment of cudaGraphInstantiate, device launch).
    bool work = false;
    for (uint32_t k = 0; k < size_of(g->nodes()); ++k) {
      const uint32_t op = g->nodes()->Get(k)->op();
      if (op >= n_ops_) continue;  // its node's check says so
      const fb::OpBody type = ops_->Get(op)->body_type();
      work |= type == fb::OpBody::KernelOp || type == fb::OpBody::MemcpyOp || type == fb::OpBody::MemsetOp;
    }
    if (!work) return fail_here("a device graph has no kernel, memcpy or memset node");
  }
  if (g->fire_and_forget_launches() > kMaxFireAndForgetLaunches) {
    return fail_here(std::to_string(g->fire_and_forget_launches()) +
                     " fire-and-forget launches, more than CUDA's " +
                     std::to_string(kMaxFireAndForgetLaunches));
  }
  if (g->tail_launches() > kMaxTailLaunches) {
    return fail_here(std::to_string(g->tail_launches()) + " tail launches, more than CUDA's " +
                     std::to_string(kMaxTailLaunches));
  }
  top_ = i;
  top_device_ = g->device();
  top_conditional_ = top_launcher_ = top_collective_ = false;
  if (!check_graph(g, 0, false)) return false;
  // One executable graph never holds conditional nodes together with device graph launches
  // (measured to hang, docs/diagnostics.md E0402), kernels that launch kernels, or NCCL work
  // (NVIDIA/nccl#1986): the lowering splits main into segments where it has both.
  if (top_conditional_ && (top_launcher_ || top_collective_)) {
    return fail_here(std::string("holds conditional nodes and ") +
                     (top_launcher_ ? "kernels that launch from the device" : "collectives") +
                     "; one executable graph cannot hold both");
  }
  return true;
}

// A top-level graph (depth 0) or a conditional body (depth >= 1, in_body).
bool Validator::check_graph(const fb::Graph* g, uint32_t depth, bool in_body) {
  const auto* nodes = g->nodes();
  const uint32_t n = size_of(nodes), n_deps = size_of(g->deps()), n_kinds = size_of(g->dep_kinds());
  if (!charge(8 + 4 + (g->name() ? g->name()->size() : 0) + sizeof(fb::Node) * uint64_t{n} + 4 * uint64_t{n_deps} +
              n_kinds))
    return false;
  if (n_kinds != 0 && n_kinds != n_deps) {
    return fail_here("dep_kinds has " + plural(n_kinds, "entry", "entries") + " for " +
                     plural(n_deps, "dependency", "dependencies"));
  }
  // The layout first, in one pass over the structs: each node's dependencies end at or after
  // the node before it ends them and within deps, so every range read below is in bounds.
  uint32_t end = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t e = nodes->Get(i)->deps_end();
    if (e < end || e > n_deps) {
      Scope scope(*this, FrameKind::Node, i);
      return fail_here("dependencies end at " + std::to_string(e) + ", outside " + std::to_string(end) + ".." +
                       std::to_string(n_deps) + " (where the node before ends them, and deps' length)");
    }
    end = e;
  }
  if (end != n_deps) {
    return fail_here("deps has " + plural(n_deps, "entry", "entries") + ", but the nodes' dependencies end at " +
                     std::to_string(end));
  }
  uint32_t first = 0;  // where node i's dependencies begin in g->deps()
  for (uint32_t i = 0; i < n; ++i) {
    if (!node_known_good(g, i, first, in_body)) {
      Scope scope(*this, FrameKind::Node, i);
      if (!check_node(g, i, first, depth, in_body)) return false;
    }
    first = nodes->Get(i)->deps_end();
  }
  return true;
}

// The common node, decided without a path frame: its op already proved in this context, at
// most one dependency (an earlier node, by a Full edge or a programmatic one both ends allow),
// its location in range. False sends the node to check_node, which decides it in full and says
// what is wrong. Every rule here is one check_node enforces. (check_graph proved the range
// [first, end) within deps.)
bool Validator::node_known_good(const fb::Graph* g, uint32_t index, uint32_t first, bool in_body) {
  const fb::Node* node = g->nodes()->Get(index);
  const uint32_t end = node->deps_end(), op = node->op();
  if (end - first > 1 || op >= n_ops_) return false;
  const OpProved& proved = op_proved_[op];
  if (proved.top_plus_one != top_ + 1 || proved.in_body != in_body || !loc_ok(&node->loc())) return false;
  if (end == first + 1) {
    const uint32_t d = g->deps()->Get(first);
    if (d >= index) return false;
    if (const auto* kinds = g->dep_kinds(); kinds && kinds->size() > 0) {
      const fb::EdgeKind k = kinds->Get(first);
      if (k != fb::EdgeKind::Full &&
          (k != fb::EdgeKind::Programmatic || !proved.pdl_into ||
           !op_proved_[g->nodes()->Get(d)->op()].pdl_from || !targets_problem_.empty()))
        return false;
    }
  }
  op_used_[op] = true;
  top_launcher_ |= proved.launcher;
  return true;
}

// Node `index` of `g`, whose dependencies are deps()[first, its deps_end) (in bounds:
// check_graph).
bool Validator::check_node(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t depth, bool in_body) {
  const fb::Node* node = g->nodes()->Get(index);
  const uint32_t end = node->deps_end();
  if (node->op() >= n_ops_) return fail_here(range_problem("op index", node->op(), n_ops_, "op"));
  const auto* deps = g->deps();
  if (end - first == 1) {
    if (deps->Get(first) >= index)
      return fail_here("dependency " + std::to_string(deps->Get(first)) + " is not an earlier node");
  } else if (end - first > 1) {
    std::vector<uint32_t> sorted(deps->begin() + first, deps->begin() + end);
    for (uint32_t d : sorted) {
      if (d >= index)
        return fail_here("dependency " + std::to_string(d) + " is not an earlier node");
    }
    std::sort(sorted.begin(), sorted.end());
    auto dup = std::adjacent_find(sorted.begin(), sorted.end());
    if (dup != sorted.end())
      return fail_here("dependency " + std::to_string(*dup) + " is listed twice");
  }
  if (!loc_ok(&node->loc())) return fail_here(loc_problem(&node->loc()));
  // Last: the edge rules look at this node's kernel, proved valid by check_op.
  return check_op(node->op(), depth, in_body) && check_edge_kinds(g, index, first, end);
}

// The op a node runs, in the graph being walked: proved once per context (top-level graph and
// whether in a body), which is all its rules depend on. A conditional is proved at its one
// use (its bodies are walked there); so is a collective.
bool Validator::check_op(uint32_t index, uint32_t depth, bool in_body) {
  op_used_[index] = true;
  const OpProved& proved = op_proved_[index];
  if (proved.top_plus_one == top_ + 1 && proved.in_body == in_body) {
    top_launcher_ |= proved.launcher;
    return true;
  }
  return prove_op(index, depth, in_body);
}

[[gnu::noinline]] bool Validator::prove_op(uint32_t index, uint32_t depth, bool in_body) {
  OpProved& proved = op_proved_[index];
  const fb::Op* op = ops_->Get(index);
  const flatbuffers::String* what = op->what();
  if (!charge(16 + (what ? what->size() + 4 : 0))) return false;  // the op and its body
  // The verifier passes a union of a type it does not know, or of a type without its table.
  const fb::OpBody type = op->body_type();
  if (type == fb::OpBody::NONE) return fail_here("op " + std::to_string(index) + " has no body (type NONE)");
  if (!in_range(type))
    return fail_here("op " + std::to_string(index) + " has unknown body type " +
                     std::to_string(static_cast<unsigned>(type)));
  if (op->body() == nullptr)
    return fail_here("op " + std::to_string(index) + " is a " + fb::EnumNameOpBody(type) + " without its table");
  const NodeKind kind = node_kind(type);

  const bool launcher_before = top_launcher_;
  top_launcher_ = false;
  bool ok = true;
  switch (kind) {
    case NodeKind::Kernel:
      ok = check_kernel_node(op->body_as_KernelOp(), in_body);
      break;
    case NodeKind::Memcpy:
      ok = check_memcpy(op->body_as_MemcpyOp());
      break;
    case NodeKind::Memset:
      ok = check_memset(op->body_as_MemsetOp());
      break;
    case NodeKind::Empty:
      // Device graphs hold "only kernel nodes, memcpy nodes, memset nodes, and child graph
      // nodes" (doc comment of cudaGraphInstantiate); conditional bodies may hold empty nodes.
      if (top_device_) return fail_here("a device graph cannot hold an empty node");
      break;
    case NodeKind::Conditional:
      top_conditional_ = true;
      ok = check_conditional(op->body_as_ConditionalOp(), depth);
      break;
    case NodeKind::Collective:
      top_collective_ = true;
      ok = check_collective(op->body_as_CollectiveOp(), in_body);
      break;
  }
  const bool launcher = top_launcher_;
  top_launcher_ = launcher_before || launcher;
  if (ok && kind != NodeKind::Conditional && kind != NodeKind::Collective) {
    const fb::KernelOp* k = op->body_as_KernelOp();
    proved.top_plus_one = top_ + 1;
    proved.in_body = in_body;
    proved.launcher = launcher;
    proved.pdl_from = k && !launches_from_device(k);
    proved.pdl_into = proved.pdl_from && kernels_->Get(k->kernel())->waits_at_entry();
  }
  return ok;
}

// Graph.dep_kinds: absent, or one valid kind per dependency; a Programmatic edge joins two
// kernel nodes whose kernels launch nothing from the device, into a kernel that waits at
// entry, in a pipeline whose every target has programmatic dependent launch (sm_90 on).
// Node `index`'s dependencies are deps()[first, end), each an earlier node (checked).
bool Validator::check_edge_kinds(const fb::Graph* g, uint32_t index, uint32_t first, uint32_t end) {
  const auto* kinds = g->dep_kinds();
  if (size_of(kinds) == 0) return true;
  const uint32_t op_index = g->nodes()->Get(index)->op();
  const fb::Op* op = ops_->Get(op_index);
  for (uint32_t j = first; j < end; ++j) {
    const fb::EdgeKind k = kinds->Get(j);
    const uint32_t d = g->deps()->Get(j);
    if (!in_range(k)) {
      return fail_here("dependency " + std::to_string(d) + " has unknown edge kind " +
                       std::to_string(static_cast<unsigned>(k)));
    }
    if (k != fb::EdgeKind::Programmatic) continue;
    // Both ops are proved (the dependency is an earlier node); the common case is decided
    // from what their proofs found, the rest below spells out what is wrong.
    if (op_proved_[op_index].pdl_into && op_proved_[g->nodes()->Get(d)->op()].pdl_from && targets_problem_.empty())
      continue;
    // Only a failure spells the edge out: this runs for every edge of every load.
    auto edge = [d] { return "programmatic dependency on node " + std::to_string(d) + ": "; };
    const fb::KernelOp* from = op_of(g, d)->body_as_KernelOp();
    const fb::KernelOp* to = op->body_as_KernelOp();
    if (!from || !to) {
      const NodeKind other = op_kind(to ? *op_of(g, d) : *op);
      return fail_here(edge() + (to ? "node " + std::to_string(d) : std::string("this node")) + " is " +
                       (other == NodeKind::Empty ? "an " : "a ") + lower(node_kind_name(other)) +
                       " node; a programmatic edge joins two kernel nodes");
    }
    const fb::Kernel* to_kernel = kernels_->Get(to->kernel());
    if (!to_kernel->waits_at_entry()) {
      return fail_here(edge() + kernel_label(to->kernel()) +
                       " does not wait at entry (waits_at_entry), so it could read what node " +
                       std::to_string(d) + " writes before it is written");
    }
    for (const fb::KernelOp* end_op : {from, to}) {
      if (launches_from_device(end_op)) {
        return fail_here(edge() + kernel_label(end_op->kernel()) +
                         " launches work from the device; a programmatic edge cannot join it");
      }
    }
    if (!targets_problem_.empty()) return fail_here(edge() + targets_problem_);
  }
  return true;
}

bool Validator::launches_from_device(const fb::KernelOp* n) const {
  if (kernels_->Get(n->kernel())->launches_kernels()) return true;
  for (uint32_t j = 0; j < size_of(n->args()); ++j) {
    const fb::ArgKind k = n->args()->Get(j)->kind();
    if (k == fb::ArgKind::GraphExec || k == fb::ArgKind::GraphTable) return true;
  }
  return false;
}

// Programmatic dependent launch needs compute capability 9.0: "" when every target has it,
// else why not (computed once; only a programmatic edge asks).
std::string Validator::pdl_targets_problem(const fb::Pipeline& p) {
  const auto* targets = p.targets();
  if (size_of(targets) == 0) {
    return "programmatic edges need compute capability 9.0 or newer, and the pipeline lists "
           "no targets";
  }
  for (uint32_t i = 0; i < targets->size(); ++i) {
    const std::string_view t = view(targets->Get(i));
    int cc = 0;
    size_t digits = 0;
    if (t.substr(0, 3) == "sm_")
      for (size_t c = 3; c < t.size() && t[c] >= '0' && t[c] <= '9' && digits < 4; ++c, ++digits)
        cc = cc * 10 + (t[c] - '0');
    if (digits == 0 || cc < 90) {
      return "programmatic edges need compute capability 9.0 or newer, but the pipeline "
             "targets " + printable(targets->Get(i));
    }
  }
  return std::string();
}

}  // namespace orch::artifact::detail
