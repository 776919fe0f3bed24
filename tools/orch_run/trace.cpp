#include "tools/orch_run/trace.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace orch::run {

namespace {

using json = nlohmann::json;

// Tracks of one process, each a thread id with lanes: a slice goes on the first lane where it
// either starts after everything open there has ended or nests inside what is open, so every
// lane is properly nested (what chrome://tracing and Perfetto require of one thread's slices).
class Lanes {
 public:
  Lanes(std::string name, int* next_tid) : name_(std::move(name)), next_tid_(next_tid) {}
  // The tid for a slice [start, end].
  int place(uint64_t start, uint64_t end, std::vector<json>& meta, int pid) {
    for (size_t i = 0;; ++i) {
      if (i == lanes_.size()) {
        lanes_.push_back({(*next_tid_)++, {}});
        const std::string name = i == 0 ? name_ : name_ + " (lane " + std::to_string(i + 1) + ")";
        meta.push_back(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", lanes_[i].tid},
                            {"args", {{"name", name}}}});
        meta.push_back(json{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", lanes_[i].tid},
                            {"args", {{"sort_index", lanes_[i].tid}}}});
      }
      auto& open = lanes_[i].open;
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (open.empty() || end <= open.back()) {
        open.push_back(end);
        return lanes_[i].tid;
      }
    }
  }

 private:
  struct Lane {
    int tid;
    std::vector<uint64_t> open;  // ends of the slices open at the last start, innermost last
  };
  std::string name_;
  int* next_tid_;
  std::vector<Lane> lanes_;
};

const char* kind_name(NodeRecord::Kind k) {
  switch (k) {
    case NodeRecord::Kind::Kernel: return "kernel";
    case NodeRecord::Kind::Memcpy: return "memcpy";
    case NodeRecord::Kind::Memset: return "memset";
  }
  return "?";
}

bool descends_from(const SiteTable& t, int site, int ancestor) {
  for (int s = t[site].parent; s >= 0; s = t[s].parent)
    if (s == ancestor) return true;
  return false;
}

struct Slice {
  std::string name, cat;
  uint64_t start = 0, end = 0;
  json args = json::object();
};

}  // namespace

std::string trace_json(const TraceInput& in) {
  const int host_pid = 2 * in.rank + 1, gpu_pid = 2 * in.rank + 2;
  std::vector<json> meta, events;
  const std::string who = in.world_size > 1 ? "rank " + std::to_string(in.rank) + ": " : std::string();
  meta.push_back(json{{"ph", "M"}, {"name", "process_name"}, {"pid", host_pid}, {"tid", 0},
                      {"args", {{"name", who + "orch-run (host)"}}}});
  meta.push_back(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", host_pid}, {"tid", 0},
                      {"args", {{"sort_index", host_pid}}}});
  meta.push_back(json{{"ph", "M"}, {"name", "process_name"}, {"pid", gpu_pid}, {"tid", 0},
                      {"args", {{"name", who + "GPU " + in.device + ": pipeline " + in.pipeline}}}});
  meta.push_back(json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", gpu_pid}, {"tid", 0},
                      {"args", {{"sort_index", gpu_pid}}}});

  // The earliest time of all is 0.
  uint64_t base = std::numeric_limits<uint64_t>::max();
  for (const HostSlice& h : in.host) base = std::min(base, h.start_ns);
  if (in.gpu) {
    for (const Attributed& a : in.gpu->records) base = std::min(base, a.record.start_ns);
    for (const Attributed& a : in.gpu->outside) base = std::min(base, a.record.start_ns);
  }
  if (base == std::numeric_limits<uint64_t>::max()) base = 0;
  auto us = [&](uint64_t ns) { return static_cast<double>(ns - std::min(ns, base)) / 1000.0; };
  auto slice_event = [&](const Slice& s, int pid, int tid) {
    json e{{"ph", "X"}, {"name", s.name}, {"cat", s.cat}, {"ts", us(s.start)},
           {"dur", static_cast<double>(s.end - s.start) / 1000.0}, {"pid", pid}, {"tid", tid}};
    if (!s.args.empty()) e["args"] = s.args;
    events.push_back(std::move(e));
  };

  // Host: one track, nested phases (lanes where they overlap otherwise).
  int host_tid = 1;
  Lanes host_lanes("host phases", &host_tid);
  {
    std::vector<HostSlice> host = in.host;
    std::stable_sort(host.begin(), host.end(), [](const HostSlice& a, const HostSlice& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    });
    for (const HostSlice& h : host) {
      Slice s{h.name, h.category, h.start_ns, std::max(h.end_ns, h.start_ns)};
      if (!h.ok) s.args["ok"] = false;
      slice_event(s, host_pid, host_lanes.place(s.start, s.end, meta, host_pid));
    }
  }
  for (const std::string& note : in.notes)
    events.push_back(json{{"ph", "i"}, {"s", "g"}, {"name", note}, {"cat", "note"}, {"ts", 0.0}, {"pid", host_pid},
                          {"tid", 1}});

  if (in.gpu && in.sites) {
    const SiteTable& t = *in.sites;
    const Attribution& g = *in.gpu;
    int gpu_tid = 1;
    std::map<std::string, Lanes> tracks;  // by name
    auto track = [&](const std::string& name) -> Lanes& {
      auto it = tracks.find(name);
      if (it == tracks.end()) it = tracks.emplace(name, Lanes(name, &gpu_tid)).first;
      return it->second;
    };
    track("launches");  // tid 1
    // Records by launch, in start order (attribute() sorted them so).
    std::map<uint32_t, std::vector<const Attributed*>> by_launch;
    for (const Attributed& a : g.records) by_launch[a.launch].push_back(&a);
    for (const auto& [launch, records] : by_launch) {
      uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
      for (const Attributed* a : records) {
        lo = std::min(lo, a->record.start_ns);
        hi = std::max(hi, a->record.end_ns);
      }
      Slice l{"launch " + std::to_string(launch + 1) + " of " + in.pipeline, "launch", lo, hi};
      l.args["profiled launch"] = launch + 1;
      l.args["nodes reported"] = records.size();
      slice_event(l, gpu_pid, track("launches").place(lo, hi, meta, gpu_pid));
      // Conditionals: a span over everything their bodies ran, and each iteration inside.
      std::vector<int> conditionals;
      for (const Attributed* a : records)
        if (a->site >= 0)
          for (int c = t[a->site].parent; c >= 0; c = t[c].parent)
            if (std::find(conditionals.begin(), conditionals.end(), c) == conditionals.end()) conditionals.push_back(c);
      std::sort(conditionals.begin(), conditionals.end());
      for (int c : conditionals) {
        const Site& cs = t[c];
        uint64_t clo = std::numeric_limits<uint64_t>::max(), chi = 0;
        std::map<uint32_t, std::pair<uint64_t, uint64_t>> iterations;
        std::map<uint32_t, uint32_t> bodies;  // iteration: the body it ran
        for (const Attributed* a : records) {
          if (a->site < 0 || !descends_from(t, a->site, c)) continue;
          clo = std::min(clo, a->record.start_ns);
          chi = std::max(chi, a->record.end_ns);
          if (t[a->site].parent != c) continue;  // iterations of the direct body only
          auto [it, inserted] = iterations.try_emplace(a->run, a->record.start_ns, a->record.end_ns);
          it->second.first = std::min(it->second.first, a->record.start_ns);
          it->second.second = std::max(it->second.second, a->record.end_ns);
          bodies[a->run] = t[a->site].body;
        }
        const bool loop = cs.node->body_as_ConditionalOp()->type() == orch::fb::ConditionalType::While;
        Slice span{cs.name, "conditional", clo, chi};
        span.args["statement"] = cs.what;
        span.args["place"] = cs.place;
        if (loop) {
          span.args["iterations reported"] = iterations.size();
          if (iterations.size() <= 1)
            span.args["note"] = "CUPTI reports one run per launch of a node in a while body (the first iteration)";
        }
        Lanes& lanes = track(t.level_name(c) + " / " + cs.what + (loop ? " (iterations)" : " (branch taken)"));
        slice_event(span, gpu_pid, lanes.place(clo, chi, meta, gpu_pid));
        for (const auto& [k, range] : iterations) {
          Slice it{loop ? "iteration " + std::to_string(k) : t.body_label(c, bodies[k]), loop ? "iteration" : "branch",
                   range.first, range.second};
          slice_event(it, gpu_pid, lanes.place(it.start, it.end, meta, gpu_pid));
        }
      }
      // Every record, on its graph level's track.
      for (const Attributed* a : records) {
        const NodeRecord& r = a->record;
        Slice s;
        s.cat = kind_name(r.kind);
        s.start = r.start_ns;
        s.end = r.end_ns;
        std::string level;
        if (a->site >= 0) {
          const Site& site = t[a->site];
          s.name = site.name;
          s.args["statement"] = site.what;
          s.args["place"] = site.place;
          level = t.level_name(a->site);
          if (site.in_while) s.args["run in launch"] = a->run;
          if (a->via != Via::NodeId) s.args["found by"] = a->how.empty() ? std::string(via_name(a->via)) : a->how;
        } else {
          s.name = "not attributed: " + record_text(r.kind, r.name, r.bytes, r.copy_kind);
          s.args["why"] = "CUDA graph node " + node_id_text(r.node_id) +
                          " was not made for any statement as orch-run saw the graphs built" +
                          (a->why.empty() ? "" : " (" + a->why + ")");
          level = "not attributed";
        }
        if (r.kind == NodeRecord::Kind::Kernel) s.args["kernel"] = r.name;
        if (r.bytes) s.args["bytes"] = r.bytes;
        s.args["profiled launch"] = a->launch + 1;
        s.args["CUDA graph node"] = std::to_string(r.node_id);
        s.args["CUDA graph"] = r.graph_id;
        s.args["CUDA stream"] = r.stream_id;
        if (r.device_launched) s.args["device-launched"] = true;
        slice_event(s, gpu_pid, track(level).place(s.start, s.end, meta, gpu_pid));
      }
    }
    // Work outside the graphs (orch-run's and the runtime's own copies): a track of its own.
    for (const Attributed& a : g.outside) {
      const NodeRecord& r = a.record;
      Slice s{"outside the graphs: " + record_text(r.kind, r.name, r.bytes, r.copy_kind), kind_name(r.kind), r.start_ns,
              std::max(r.end_ns, r.start_ns)};
      s.args["why"] = "no graph node: a copy or fill orch-run or the runtime made around the launch, not a node of the pipeline";
      if (r.kind == NodeRecord::Kind::Kernel) s.args["kernel"] = r.name;
      if (r.bytes) s.args["bytes"] = r.bytes;
      s.args["profiled launch"] = a.launch + 1;
      s.args["CUDA stream"] = r.stream_id;
      slice_event(s, gpu_pid, track("outside the pipeline's graphs").place(s.start, s.end, meta, gpu_pid));
    }
  }

  json doc;
  doc["traceEvents"] = json::array();
  for (json& m : meta) doc["traceEvents"].push_back(std::move(m));
  for (json& e : events) doc["traceEvents"].push_back(std::move(e));
  doc["displayTimeUnit"] = "ns";
  json other{{"pipeline", in.pipeline}, {"device", in.device}, {"rank", in.rank}, {"world size", in.world_size},
             {"clock", "CUPTI timestamps (ns), shifted so the first event is at 0"}, {"base ns", std::to_string(base)}};
  if (!in.notes.empty()) other["notes"] = in.notes;
  doc["otherData"] = other;
  return doc.dump(1) + "\n";
}

}  // namespace orch::run
