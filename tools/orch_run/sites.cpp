#include "tools/orch_run/sites.h"

#include <algorithm>

#include "support/node_name.h"

namespace orch::run {

std::string place_of(const orch::fb::Pipeline& p, const orch::fb::SourceLoc* loc) {
  if (!loc) return {};
  std::string file;
  if (p.source_files() && loc->file() < p.source_files()->size()) file = p.source_files()->Get(loc->file())->str();
  return orch::node_place(file, loc->line(), loc->column());
}

SiteTable::SiteTable(const orch::fb::Pipeline& p) : p_(p) {
  const uint32_t ngraphs = p.graphs() ? p.graphs()->size() : 0;
  std::vector<bool> host_top(ngraphs, false);
  if (p.segments() && p.segments()->size() > 0) {
    for (int g : *p.segments())
      if (g >= 0 && static_cast<uint32_t>(g) < ngraphs) host_top[g] = true;
  } else if (p.main_graph() >= 0 && static_cast<uint32_t>(p.main_graph()) < ngraphs) {
    host_top[p.main_graph()] = true;
  }
  std::vector<uint32_t> path;
  for (uint32_t g = 0; g < ngraphs; ++g) {
    const orch::fb::Graph* graph = p.graphs()->Get(g);
    const std::string name = graph->name() ? graph->name()->str() : "graph " + std::to_string(g);
    if (graph->device()) {
      if (graph->family_size() > 0) {
        for (uint32_t m = 0; m < graph->family_size(); ++m)
          add_graph(graph, static_cast<int>(g), static_cast<int>(m), name + "[" + std::to_string(m) + "]", true, -1,
                    0, 0, false, path);
      } else {
        add_graph(graph, static_cast<int>(g), -1, name, true, -1, 0, 0, false, path);
      }
    } else if (host_top[g]) {
      add_graph(graph, static_cast<int>(g), -1, name, false, -1, 0, 0, false, path);
    }
  }
  // Who launches each device graph: a kernel node passing it as a `graph` or `graph[N]` argument
  // (its own graph for `self`); one from another graph is preferred over a self relaunch.
  launcher_.assign(ngraphs, std::string());
  for (const Site& s : sites_) {
    const orch::fb::KernelOp* k = s.node->body_as_KernelOp();
    if (!k || !k->args()) continue;
    for (const orch::fb::KernelArg* a : *k->args()) {
      if (a->kind() != orch::fb::ArgKind::GraphExec && a->kind() != orch::fb::ArgKind::GraphTable) continue;
      const int g = a->ref() < 0 ? s.graph : a->ref();
      if (g < 0 || static_cast<uint32_t>(g) >= ngraphs) continue;
      if (launcher_[g].empty() || (g != s.graph && launcher_[g] == "self")) launcher_[g] = g == s.graph ? "self" : s.name;
    }
  }
}

void SiteTable::add_graph(const orch::fb::Graph* g, int graph, int member, const std::string& graph_name,
                          bool device, int parent, uint32_t body, int depth, bool in_while,
                          std::vector<uint32_t>& path) {
  if (!g || !g->nodes()) return;
  for (uint32_t i = 0; i < g->nodes()->size(); ++i) {
    const orch::fb::Node* at = g->nodes()->Get(i);
    const orch::fb::Op* n = p_.ops()->Get(at->op());
    path.push_back(i);
    Site s;
    s.graph = graph;
    s.member = member;
    s.path = path;
    s.node = n;
    s.what = n->what() ? n->what()->str() : std::string();
    s.place = place_of(p_, &at->loc());
    const orch::fb::SourceLoc* loc = &at->loc();
    std::string file;
    if (loc && p_.source_files() && loc->file() < p_.source_files()->size())
      file = p_.source_files()->Get(loc->file())->str();
    s.name = orch::node_name(s.what, file, loc ? loc->line() : 0, loc ? loc->column() : 0);
    s.file = file;
    s.line = loc ? loc->line() : 0;
    s.column = loc ? loc->column() : 0;
    s.graph_name = graph_name;
    s.device_graph = device;
    s.parent = parent;
    s.body = body;
    s.depth = depth;
    s.in_while = in_while;
    if (const orch::fb::KernelOp* kn = n->body_as_KernelOp();
        kn && p_.kernels() && kn->kernel() >= 0 && static_cast<uint32_t>(kn->kernel()) < p_.kernels()->size()) {
      const orch::fb::Kernel* k = p_.kernels()->Get(kn->kernel());
      s.generated = k->generated();
      s.kernel_symbol = k->lowered_name() ? k->lowered_name()->str() : std::string();
    }
    const int me = static_cast<int>(sites_.size());
    sites_.push_back(std::move(s));
    if (const auto* nested = orch::artifact::nested_graphs(*n)) {
      const orch::fb::ConditionalOp* c = n->body_as_ConditionalOp();
      const bool loop = c && c->type() == orch::fb::ConditionalType::While;
      for (uint32_t b = 0; b < nested->size(); ++b) {
        path.push_back(b);
        add_graph(nested->Get(b), graph, member, graph_name, device, me, b, depth + 1, in_while || loop, path);
        path.pop_back();
      }
    }
    path.pop_back();
  }
}

int SiteTable::find(int graph, int member, const std::vector<uint32_t>& path) const {
  for (size_t i = 0; i < sites_.size(); ++i) {
    const Site& s = sites_[i];
    if (s.graph == graph && s.member == member && s.path == path) return static_cast<int>(i);
  }
  return -1;
}

std::string SiteTable::body_label(int c, uint32_t body) const {
  const orch::fb::ConditionalOp* n = (*this)[c].node->body_as_ConditionalOp();
  if (!n) return "body";
  switch (n->type()) {
    case orch::fb::ConditionalType::If: return body == 0 ? "then" : "else";
    case orch::fb::ConditionalType::While: return "body";
    case orch::fb::ConditionalType::Switch: return "body " + std::to_string(body);  // CUDA's dense index
  }
  return "body";
}

std::string SiteTable::level_name(int site) const {
  const Site& s = (*this)[site];
  std::vector<std::string> parts;
  for (int c = s.parent, b = static_cast<int>(s.body); c >= 0; b = static_cast<int>((*this)[c].body), c = (*this)[c].parent)
    parts.push_back((*this)[c].what + " (" + body_label(c, static_cast<uint32_t>(b)) + ")");
  std::string out = s.graph_name;
  if (s.device_graph) {
    const std::string& by = s.graph >= 0 && static_cast<size_t>(s.graph) < launcher_.size() ? launcher_[s.graph] : "";
    out += by.empty() || by == "self" ? " (device graph)" : " (device graph, launched by " + by + ")";
  }
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += " / " + *it;
  return out;
}

}  // namespace orch::run
