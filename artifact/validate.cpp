// validate(): the semantic checks that run after the FlatBuffers verifier. The verifier proves
// that every offset stays inside the buffer; this proves that every index, expression and node
// is something the runtime can build without tripping. docs/format.md lists the rules; each
// message is one line saying what is wrong and where.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "artifact/validate_internal.h"

namespace orch::artifact {

namespace detail {

std::string Validator::where() const {
  std::string out;
  const size_t n = frames_.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 3 * kHeadTail && i >= kHeadTail && i < n - kHeadTail) {
      if (i == kHeadTail) out += " ... (" + std::to_string(n - 2 * kHeadTail) + " more) ...";
      continue;
    }
    const Frame& f = frames_[i];
    if (!out.empty()) out += ' ';
    switch (f.kind) {
      case FrameKind::Graph:
        out += graph_label(f.index);
        break;
      case FrameKind::Node:
        out += "node " + std::to_string(f.index);
        break;
      case FrameKind::Body:
        out += "body " + std::to_string(f.index);
        break;
      case FrameKind::Arg:
        out += "arg " + std::to_string(f.index);
        break;
    }
  }
  return out;
}

template <class Table>
bool Validator::check_unique_names(const flatbuffers::Vector<flatbuffers::Offset<Table>>* v,
                                   const char* what) {
  std::unordered_map<std::string_view, uint32_t> seen;
  for (uint32_t i = 0; i < size_of(v); ++i) {
    const flatbuffers::String* name = v->Get(i)->name();
    if (!charge(8 + 4 + name->size())) return false;
    if (name->size() == 0)
      return fail(std::string(what) + " " + std::to_string(i) + " has an empty name");
    auto [it, inserted] = seen.emplace(view(name), i);
    if (!inserted) {
      return fail(std::string(what) + " '" + printable(name) + "' is declared twice (" + what +
                  "s " + std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
  return true;
}

bool Validator::check_pipeline() {
  if (empty(p_.name())) return fail("the pipeline has an empty name");
  if (!charge(8 * (1 + uint64_t{size_of(p_.source_files())} + size_of(p_.targets()))))
    return false;

  if (!check_unique_names(params_, "param")) return false;
  for (uint32_t i = 0; i < n_params_; ++i) {
    const fb::Param* q = params_->Get(i);
    const std::string label = named("param", q->name(), i);
    if (!in_range(q->type())) {
      return fail(label + " has unknown type " +
                  std::to_string(static_cast<unsigned>(q->type())));
    }
    if (q->has_default()) {
      const expr::Value v = default_of(*q);
      const expr::Outcome o = expr::convert(v, v.type);
      if (!o.ok() || o.value != v)
        return fail(label + " has a default that is not a value of " + fb::EnumNameScalarType(q->type()));
    }
    std::string problem = loc_problem(q->loc());
    if (!problem.empty()) return fail(label + ": " + problem);
  }

  if (!check_unique_names(buffers_, "buffer")) return false;
  for (uint32_t i = 0; i < n_buffers_; ++i) {
    const fb::Buffer* b = buffers_->Get(i);
    const std::string label = buffer_label(i);
    if (!in_range(b->type())) {
      return fail(label + " has unknown type " +
                  std::to_string(static_cast<unsigned>(b->type())));
    }
    if (!check_expr(b->count(), false, label + " count")) return false;
    std::string problem = loc_problem(b->loc());
    if (!problem.empty()) return fail(label + ": " + problem);
    // NVSHMEM's symmetric heap is device memory (orchc's E0706).
    if (b->symmetric() && b->host()) return fail(label + " is both symmetric and host memory");
  }

  if (!check_unique_names(comms_, "comm")) return false;

  const auto* modules = p_.modules();
  for (uint32_t m = 0; m < size_of(modules); ++m) {
    const fb::Module* mod = modules->Get(m);
    if (!charge(8)) return false;
    if (!check_code(mod->images(), mod->ptx(), mod->ptx_arch(), "module " + std::to_string(m)))
      return false;
  }
  std::vector<bool> module_used(size_of(modules), false);
  for (uint32_t i = 0; i < n_kernels_; ++i) {
    if (!check_kernel(i)) return false;
    const int module = kernels_->Get(i)->in_module();
    if (module >= 0 && static_cast<uint32_t>(module) < module_used.size()) module_used[module] = true;
  }
  for (uint32_t m = 0; m < module_used.size(); ++m)
    if (!module_used[m]) return fail("module " + std::to_string(m) + " holds no kernel's code");

  for (uint32_t i = 0; i < n_handles_; ++i) {
    const fb::ConditionalHandle* h = handles_->Get(i);
    if (!charge(8)) return false;
    const std::string label = "handle " + std::to_string(i);
    std::string problem = range_problem("graph index", h->graph(), n_graphs_, "graph");
    if (!problem.empty()) return fail(label + ": " + problem);
    if (graphs_->Get(h->graph())->device()) {
      return fail(label + ": " + graph_label(h->graph()) +
                  " is a device graph, which cannot hold conditional nodes");
    }
  }
  if (!check_device_order()) return false;
  handle_users_.assign(n_handles_, 0);
  op_proved_.assign(n_ops_, OpProved());
  op_used_.assign(n_ops_, false);

  for (uint32_t i = 0; i < n_graphs_; ++i) {
    if (!check_top_graph(i)) return false;
  }

  {
    const int main = p_.main_graph();
    std::string problem = range_problem("main_graph", main, n_graphs_, "graph");
    if (!problem.empty()) return fail(problem);
    if (graphs_->Get(main)->device()) {
      return fail("main_graph " + std::to_string(main) + " (" + graph_label(main) +
                  ") is a device graph; the host launches main");
    }
  }

  const auto* segments = p_.segments();
  std::vector<bool> in_segments(n_graphs_, false);
  if (!charge(4 * uint64_t{size_of(segments)})) return false;
  for (uint32_t i = 0; i < size_of(segments); ++i) {
    const int g = segments->Get(i);
    const std::string label = "segments[" + std::to_string(i) + "]";
    std::string problem = range_problem("graph index", g, n_graphs_, "graph");
    if (!problem.empty()) return fail(label + ": " + problem);
    if (graphs_->Get(g)->device()) {
      return fail(label + ": " + graph_label(g) +
                  " is a device graph; segments are launched by the host");
    }
    if (in_segments[g]) return fail(label + ": " + graph_label(g) + " is listed twice");
    in_segments[g] = true;
  }

  for (uint32_t i = 0; i < n_handles_; ++i) {
    if (handle_users_[i] == 0) {
      return fail(
          "handle " + std::to_string(i) + " (" + graph_label(handles_->Get(i)->graph()) +
          ") is not used by any conditional node; CUDA may refuse to instantiate the graph");
    }
  }

  for (uint32_t i = 0; i < n_ops_; ++i)
    if (!op_used_[i]) return fail("op " + std::to_string(i) + " is used by no node");

  const auto* checks = p_.bind_checks();
  for (uint32_t i = 0; i < size_of(checks); ++i) {
    const fb::BindCheck* c = checks->Get(i);
    if (!charge(8)) return false;
    const std::string label = "bind check " + std::to_string(i);
    if (empty(c->code())) return fail(label + " has an empty code");
    if (empty(c->message()))
      return fail(label + " (" + printable(c->code()) + ") has an empty message");
    if (!check_expr(c->condition(), true, label + " (" + printable(c->code()) + ") condition"))
      return false;
    std::string problem = loc_problem(c->loc());
    if (!problem.empty()) return fail(label + ": " + problem);
    // The runtime evaluates a check once per member with the family index set, and once
    // without one otherwise (where the family index has no value).
    bool uses_index = false;
    for (const fb::ExprInstr* in : *c->condition()->code())
      uses_index |= in->op() == fb::ExprOp::FamilyIndex;
    if (uses_index && c->family_size() == 0)
      return fail(label + " (" + printable(c->code()) +
                  ") uses the family index but has no family_size to check it for");
    if (c->family_size() > kMaxFamilySize)
      return fail(label + " (" + printable(c->code()) + ") has family_size " +
                  std::to_string(c->family_size()) + ", more than the limit of " +
                  std::to_string(kMaxFamilySize));
  }
  const auto* sites = p_.status_sites();
  for (uint32_t i = 0; i < size_of(sites); ++i) {
    const fb::StatusSite* site = sites->Get(i);
    if (!charge(8 + (site->what() ? site->what()->size() : 0))) return false;
    std::string problem = loc_problem(site->loc());
    if (!problem.empty()) return fail("status site " + std::to_string(i) + ": " + problem);
  }
  if (std::string problem = memory_plan_problem(p_); !problem.empty()) return fail(problem);
  return true;
}

}  // namespace detail

std::string validate(const fb::Pipeline& pipeline, size_t payload_size) {
  try {
    return detail::Validator(pipeline, payload_size).run();
  } catch (const std::exception& e) {  // std::bad_alloc, at worst
    return std::string("cannot validate the pipeline: ") + e.what();
  }
}

}  // namespace orch::artifact
