#include "tools/orch_run/attribution.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace orch::run {

void NodeIds::begin(int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_[std::this_thread::get_id()].push_back(site);
}

void NodeIds::end(int site, uint64_t made) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = current_.find(std::this_thread::get_id());
  if (it != current_.end() && !it->second.empty()) {
    it->second.pop_back();
    if (it->second.empty()) current_.erase(it);
  }
  if (made != 0 && site >= 0) site_[made] = site;
}

void NodeIds::created(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = current_.find(std::this_thread::get_id());
  if (it != current_.end() && !it->second.empty() && it->second.back() >= 0) site_[id] = it->second.back();
}

void NodeIds::cloned(uint64_t original, uint64_t clone) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = site_.find(original);
  if (it != site_.end()) site_[clone] = it->second;
}

void NodeIds::add(uint64_t id, int site) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (site >= 0) site_[id] = site;
}

int NodeIds::site_of(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = site_.find(id);
  return it == site_.end() ? -1 : it->second;
}

size_t NodeIds::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return site_.size();
}

Attribution attribute(const std::vector<std::vector<NodeRecord>>& launches, const NodeIds& ids) {
  Attribution a;
  a.launches = launches.size();
  for (size_t l = 0; l < launches.size(); ++l) {
    std::vector<Attributed> these;
    for (const NodeRecord& r : launches[l]) {
      if (r.end_ns <= r.start_ns) {  // a node that did not run (an IF branch not taken)
        ++a.without_duration;
        continue;
      }
      Attributed x;
      x.record = r;
      x.site = ids.site_of(r.node_id);
      x.launch = static_cast<uint32_t>(l);
      these.push_back(std::move(x));
    }
    std::stable_sort(these.begin(), these.end(),
                     [](const Attributed& x, const Attributed& y) { return x.record.start_ns < y.record.start_ns; });
    // The k-th run of a site in one launch is its k-th record by start: a loop body's iteration.
    std::map<std::pair<int, uint64_t>, uint32_t> seen;
    for (Attributed& x : these) {
      const auto key = x.site >= 0 ? std::make_pair(x.site, uint64_t{0}) : std::make_pair(-1, x.record.node_id);
      x.run = ++seen[key];
      a.records.push_back(std::move(x));
    }
  }
  return a;
}

std::vector<NodeRow> node_rows(const Attribution& a) {
  // Attributed records group by site; the others by what CUPTI said of them.
  using Key = std::tuple<int, int, std::string, uint64_t>;
  struct Acc {
    NodeRow row;
    std::map<uint32_t, std::pair<double, uint64_t>> per_launch;  // launch: ms summed, earliest start
    std::vector<double> runs;
  };
  std::map<Key, Acc> acc;
  std::map<uint32_t, uint64_t> first;  // launch: its first record's start
  for (const Attributed& x : a.records) {
    auto [it, inserted] = first.try_emplace(x.launch, x.record.start_ns);
    if (!inserted) it->second = std::min(it->second, x.record.start_ns);
  }
  for (const Attributed& x : a.records) {
    const NodeRecord& r = x.record;
    const Key key = x.site >= 0 ? Key{x.site, 0, std::string(), 0}
                                : Key{-1, static_cast<int>(r.kind), r.name, r.node_id};
    Acc& c = acc[key];
    if (c.runs.empty()) {
      c.row.site = x.site;
      c.row.kind = r.kind;
      c.row.symbol = r.name;
      c.row.bytes = r.bytes;
      c.row.copy_kind = r.copy_kind;
      c.row.node_id = r.node_id;
    }
    c.row.device_launched |= r.device_launched;
    const double ms = static_cast<double>(r.end_ns - r.start_ns) / 1e6;
    c.runs.push_back(ms);
    auto [pl, inserted] = c.per_launch.try_emplace(x.launch, 0.0, r.start_ns);
    pl->second.first += ms;
    pl->second.second = std::min(pl->second.second, r.start_ns);
    c.row.max_runs = std::max<size_t>(c.row.max_runs, x.run);
  }
  std::vector<NodeRow> rows;
  for (auto& [key, c] : acc) {
    std::vector<double> totals, offsets;
    for (const auto& [launch, v] : c.per_launch) {
      totals.push_back(v.first);
      offsets.push_back(static_cast<double>(v.second - first[launch]) / 1e6);
    }
    c.row.per_launch = summarize(totals);
    c.row.per_run = summarize(c.runs);
    c.row.runs_per_launch = a.launches ? static_cast<double>(c.runs.size()) / static_cast<double>(a.launches) : 0;
    c.row.start_offset = summarize(offsets).median;
    rows.push_back(c.row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const NodeRow& x, const NodeRow& y) {
    if (x.start_offset != y.start_offset) return x.start_offset < y.start_offset;
    return x.site >= 0 && (y.site < 0 || x.site < y.site);
  });
  return rows;
}

std::string record_text(NodeRecord::Kind kind, const std::string& symbol, uint64_t bytes, uint8_t copy_kind) {
  static const char* kCopyKinds[] = {"", " HtoD", " DtoH", " HtoA", " AtoH", " AtoA", " AtoD", " DtoA", " DtoD", " HtoH", " PtoP"};
  switch (kind) {
    case NodeRecord::Kind::Kernel: return "kernel " + symbol;
    case NodeRecord::Kind::Memcpy:
      return "memcpy " + format_bytes(bytes) + (copy_kind <= 10 ? kCopyKinds[copy_kind] : "");
    case NodeRecord::Kind::Memset: return "memset " + format_bytes(bytes);
  }
  return "?";
}

bool uses_device_graphs(const orch::fb::Pipeline& p) {
  if (p.graphs())
    for (const orch::fb::Graph* g : *p.graphs())
      if (g->device()) return true;
  return false;
}

std::string format_node_table(const SiteTable& sites, const std::vector<NodeRow>& rows, const Summary& launch,
                              size_t profiled_launches) {
  std::ostringstream s;
  s << "per node (CUPTI activity records of " << profiled_launches
    << " more launches; GPU time of each graph node per launch, attributed by CUDA's graph node ids):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %10s %10s %7s  %s\n", "median", "p90", "runs", "node");
  s << line;
  double sum = 0;
  size_t unattributed = 0;
  for (const NodeRow& r : rows) {
    sum += r.per_launch.median;
    std::string label;
    if (r.site < 0) {
      ++unattributed;
      label = record_text(r.kind, r.symbol, r.bytes, r.copy_kind) + ": CUDA graph node " + std::to_string(r.node_id) +
              " was not made for any statement as orch-run saw the graphs built; not attributed";
    } else {
      const Site& site = sites[r.site];
      label = site.name;
      const orch::fb::NodeKind nk = site.node->kind();
      // What CUDA ran for it, where that is not the statement's own kind: a fill run as CUDA's
      // memset kernel, a collective's NCCL kernels.
      if (r.kind == NodeRecord::Kind::Kernel && nk != orch::fb::NodeKind::Kernel)
        label += "  (run as kernel " + r.symbol + ")";
      if (site.in_while) {
        if (r.max_runs > 1)
          label += "  [loop body: " + format_ms(r.per_run.median) + " per run, up to " + std::to_string(r.max_runs) +
                   " runs in a launch]";
        else
          label += "  [loop body: CUPTI reported one run per launch]";
      }
    }
    if (r.device_launched) label += "  [device-launched]";
    char runs[32];
    std::snprintf(runs, sizeof runs,
                  r.runs_per_launch == static_cast<double>(static_cast<uint64_t>(r.runs_per_launch)) ? "%.0f" : "%.2f",
                  r.runs_per_launch);
    std::snprintf(line, sizeof line, "  %10s %10s %7s  ", format_ms(r.per_launch.median).c_str(),
                  format_ms(r.per_launch.p90).c_str(), runs);
    s << line << label << "\n";
  }
  if (rows.empty()) s << "  (CUPTI reported no kernel, copy or fill)\n";
  s << "  " << rows.size() - unattributed << " nodes; their medians sum to " << format_ms(sum)
    << ", the launch median is " << format_ms(launch.median)
    << " (concurrent nodes overlap; the rest is launch overhead and dependency gaps)\n";
  if (unattributed > 0)
    s << "  " << unattributed << " row" << (unattributed == 1 ? "" : "s")
      << " not attributed: CUPTI named graph nodes that orch-run did not see the runtime make\n";
  (void)sites;
  return s.str();
}

}  // namespace orch::run
