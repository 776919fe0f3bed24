#include "tools/orch_run/profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace orch::run {

void add_profile_nodes(const SiteTable& sites, const Attribution& a, lowering::Profile* profile) {
  using Key = std::tuple<std::string, uint32_t, uint32_t, std::string>;
  struct Acc {
    lowering::ProfileNode node;
    std::vector<double> ns;
  };
  std::map<Key, Acc> acc;
  const orch::fb::Pipeline& fb = sites.pipeline();
  for (const Attributed& x : a.records) {
    if (x.site < 0 || static_cast<size_t>(x.site) >= sites.size()) continue;
    const Site& s = sites[x.site];
    if (s.line == 0 || s.file.empty()) continue;
    // A kernel statement's kernel by the name it was declared with (its guarded variants have
    // the same); everything else orchc made of a statement is the statement's.
    std::string kernel;
    const orch::fb::KernelOp* k = s.node->body_as_KernelOp();
    if (k && !s.generated && fb.kernels() && k->kernel() >= 0 &&
        static_cast<uint32_t>(k->kernel()) < fb.kernels()->size())
      kernel = fb.kernels()->Get(static_cast<uint32_t>(k->kernel()))->name()->str();
    Acc& c = acc[Key{s.file, s.line, s.column, kernel}];
    lowering::ProfileNode& n = c.node;
    if (c.ns.empty()) {
      n.file = s.file;
      n.line = s.line;
      n.column = s.column;
      n.kernel = kernel;
      n.what = s.what;
    }
    const NodeRecord& r = x.record;
    c.ns.push_back(static_cast<double>(r.end_ns - r.start_ns));
    ++n.launches;
    if (r.kind == NodeRecord::Kind::Kernel) {
      lowering::MeasuredLaunch l = n.launch.value_or(lowering::MeasuredLaunch{});
      if (!n.launch)
        for (int d = 0; d < 3; ++d) l.grid[d] = l.block[d] = 0;
      // The largest of each: the launch least likely to fit in one wave.
      for (int d = 0; d < 3; ++d) {
        l.grid[d] = std::max(l.grid[d], std::max(r.grid[d], 1u));
        l.block[d] = std::max(l.block[d], std::max(r.block[d], 1u));
      }
      l.registers = std::max(l.registers, r.registers);
      l.static_shared_bytes = std::max(l.static_shared_bytes, r.static_shared_bytes);
      l.dynamic_shared_bytes = std::max(l.dynamic_shared_bytes, r.dynamic_shared_bytes);
      n.launch = l;
    } else {
      n.bytes = std::max(n.bytes.value_or(0), r.bytes);
    }
  }
  for (auto& [key, c] : acc) {
    const Summary sum = summarize(c.ns);
    c.node.median_ns = static_cast<uint64_t>(std::llround(sum.median));
    c.node.min_ns = static_cast<uint64_t>(std::llround(sum.min));
    profile->nodes.push_back(std::move(c.node));
  }
}

}  // namespace orch::run
