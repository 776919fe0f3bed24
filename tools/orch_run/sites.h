// The nodes of a pipeline.bin as the runtime builds them: one Site per node of every top-level
// graph it instantiates (each member of a family its own), conditional bodies included, named
// for people with the same function `orchc --emit=dot` uses (support/node_name.h). A Site is
// found from the runtime's observation hook (orch/observe.h NodeSite: graph, member, path).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/artifact.h"

namespace orch::run {

struct Site {
  int graph = -1;               // Pipeline.graphs index of the top-level graph
  int member = -1;              // family member, -1 otherwise
  std::vector<uint32_t> path;   // node, body, node, ... (orch/observe.h)
  const orch::fb::Op* node = nullptr;  // what it does: its op (shared with nodes that do the same)
  std::string what;             // the statement: "sweep<<<ceil_div(n, 256), 256>>>"
  std::string place;            // "jacobi.orch:27:5" ("" without a location)
  std::string file;             // its parts: the file as the artifact names it, line, column (0: none)
  uint32_t line = 0, column = 0;
  std::string name;             // what + "  " + place: node_name()
  std::string graph_name;       // "main", "experts[2]"
  bool device_graph = false;    // its top-level graph is launched from the device
  int parent = -1;              // the conditional Site whose body holds it; -1 at the top
  uint32_t body = 0;            // which body of `parent`
  int depth = 0;                // conditional bodies around it
  bool in_while = false;        // one of them belongs to a `while`
  bool generated = false;       // a kernel orchc wrote (condition, update, launcher, fill)
  std::string kernel_symbol;    // kernel nodes: the symbol CUDA reports (lowered name)
};

class SiteTable {
 public:
  explicit SiteTable(const orch::fb::Pipeline& pipeline);
  const std::vector<Site>& sites() const { return sites_; }
  const Site& operator[](int i) const { return sites_.at(static_cast<size_t>(i)); }
  size_t size() const { return sites_.size(); }
  // The site the runtime builds at (graph, member, path); -1 when there is none.
  int find(int graph, int member, const std::vector<uint32_t>& path) const;
  // The graph level a site runs in, for a timeline track: "main", "main / while ... (body)",
  // "experts[2] (device graph, launched by route<<<1, 1024>>>  moe.orch:35:3)".
  std::string level_name(int site) const;
  // A short label of a conditional body: "then", "else", "body", "case 3", "default".
  std::string body_label(int conditional_site, uint32_t body) const;
  const orch::fb::Pipeline& pipeline() const { return p_; }

 private:
  void add_graph(const orch::fb::Graph* g, int graph, int member, const std::string& graph_name, bool device,
                 int parent, uint32_t body, int depth, bool in_while, std::vector<uint32_t>& path);
  const orch::fb::Pipeline& p_;
  std::vector<Site> sites_;
  std::vector<std::string> launcher_;  // per Pipeline.graphs index: a kernel node that launches it
};

// "file:line:col" of a location in the pipeline, "" when absent.
std::string place_of(const orch::fb::Pipeline& p, const orch::fb::SourceLoc* loc);

}  // namespace orch::run
