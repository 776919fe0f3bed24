#include "tools/orch_run/nodes.h"

#include <cupti_activity.h>
#include <cupti_version.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

namespace orch::run {

// The CUPTI entry points orch-run uses, looked up in the libcupti it opened.
struct NodeProfiler::Api {
  void* handle = nullptr;
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  std::vector<CUpti_ActivityKind> enabled;

  std::string text(CUptiResult r) const {
    const char* s = nullptr;
    if (result_string) result_string(r, &s);
    return s ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
  }
};

namespace {

// CUPTI delivers records to plain callbacks on its own thread: they land here.
std::mutex g_mutex;
std::vector<NodeRecord> g_records;
uint64_t g_dropped = 0;
const NodeProfiler::Api* g_api = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBufferSize = 8u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
  *size = *buffer ? kBufferSize : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid_size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (buffer && g_api) {
    CUpti_Activity* record = nullptr;
    while (g_api->next_record(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      NodeRecord r;
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          r.kind = NodeRecord::Kind::Kernel;
          r.name = k->name ? k->name : "";
          r.graph_id = k->graphId;
          r.node_id = k->graphNodeId;
          r.start_ns = k->start;
          r.end_ns = k->end;
          r.device_launched = k->isDeviceLaunched != 0;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          r.kind = NodeRecord::Kind::Memcpy;
          r.bytes = m->bytes;
          r.copy_kind = m->copyKind;
          r.graph_id = m->graphId;
          r.node_id = m->graphNodeId;
          r.start_ns = m->start;
          r.end_ns = m->end;
          r.device_launched = m->isDeviceLaunched != 0;
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          r.kind = NodeRecord::Kind::Memset;
          r.bytes = m->bytes;
          r.graph_id = m->graphId;
          r.node_id = m->graphNodeId;
          r.start_ns = m->start;
          r.end_ns = m->end;
          r.device_launched = m->isDeviceLaunched != 0;
          break;
        }
        default:
          continue;
      }
      g_records.push_back(std::move(r));
    }
    size_t dropped = 0;
    if (g_api->dropped_records &&
        g_api->dropped_records(context, stream_id, &dropped) == CUPTI_SUCCESS)
      g_dropped += dropped;
  }
  std::free(buffer);
}

std::string loc_text(const orch::fb::Pipeline& p, const orch::fb::SourceLoc* loc) {
  if (!loc) return {};
  std::string file = "?";
  if (p.source_files() && loc->file() < p.source_files()->size()) {
    file = p.source_files()->Get(loc->file())->str();
    const size_t slash = file.rfind('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
  }
  return file + ":" + std::to_string(loc->line()) + ":" + std::to_string(loc->column());
}

// Calls f(node, in_conditional, in_while) for every node, conditional bodies included.
template <class F>
void walk(const orch::fb::Graph* g, bool in_conditional, bool in_while, const F& f) {
  if (!g || !g->nodes()) return;
  for (const orch::fb::Node* n : *g->nodes()) {
    f(*n, in_conditional, in_while);
    if (n->kind() == orch::fb::NodeKind::Conditional && n->bodies())
      for (const orch::fb::Graph* body : *n->bodies())
        walk(body, true, in_while || n->conditional() == orch::fb::ConditionalType::While, f);
  }
}

// memset8, memset16, memset32: CUDA's kernels for a fill of 1, 2 or 4 byte elements.
int memset_kernel_element_size(const std::string& name) {
  if (name == "memset8") return 1;
  if (name == "memset16") return 2;
  if (name == "memset32") return 4;
  return 0;
}

double median_of(std::vector<double> v) { return summarize(std::move(v)).median; }

}  // namespace

std::unique_ptr<NodeProfiler> NodeProfiler::create(std::string* error) {
  auto api = std::make_unique<Api>();
  std::vector<std::string> candidates = {"libcupti.so.13", "libcupti.so"};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(var))
      candidates.push_back(std::string(root) + "/lib64/libcupti.so");
  candidates.push_back("/usr/local/cuda/lib64/libcupti.so");
  candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  std::string first_error;
  for (const std::string& c : candidates) {
    api->handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->handle) break;
    if (first_error.empty()) first_error = dlerror();
  }
  if (!api->handle) {
    *error = "per-node times need CUPTI (libcupti.so, part of the CUDA toolkit), which could not "
             "be loaded: " + first_error + " (set CUDA_HOME, or add its lib64 to LD_LIBRARY_PATH)";
    return nullptr;
  }
  auto sym = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(api->handle, name));
    return *fn != nullptr;
  };
  if (!sym(&api->get_version, "cuptiGetVersion") || !sym(&api->result_string, "cuptiGetResultString") ||
      !sym(&api->enable, "cuptiActivityEnable") || !sym(&api->disable, "cuptiActivityDisable") ||
      !sym(&api->register_callbacks, "cuptiActivityRegisterCallbacks") ||
      !sym(&api->flush_all, "cuptiActivityFlushAll") ||
      !sym(&api->next_record, "cuptiActivityGetNextRecord")) {
    *error = "the libcupti that was loaded lacks the activity API";
    return nullptr;
  }
  sym(&api->dropped_records, "cuptiActivityGetNumDroppedRecords");
  // The record layouts (CUpti_ActivityKernel10, ...) are those of the CUPTI headers orch-run
  // was built with; they hold within one major CUDA version.
  uint32_t version = 0;
  if (api->get_version(&version) != CUPTI_SUCCESS || version / 10000 != CUPTI_API_VERSION / 10000) {
    *error = "the libcupti that was loaded has API version " + std::to_string(version) +
             "; orch-run was built with " + std::to_string(CUPTI_API_VERSION) +
             " (use the CUPTI of the same CUDA major version)";
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_dropped = 0;
    g_api = api.get();
  }
  auto forget_api = [] {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_api = nullptr;
  };
  CUptiResult r = api->register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    *error = "CUPTI refused its activity callbacks: " + api->text(r);
    forget_api();
    return nullptr;
  }
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET}) {
    r = api->enable(kind);
    if (r != CUPTI_SUCCESS) {
      *error = "CUPTI refused to trace activity kind " + std::to_string(static_cast<int>(kind)) + ": " +
               api->text(r) +
               (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? " (the driver restricts profiling to admin users)" : "");
      for (CUpti_ActivityKind k : api->enabled) api->disable(k);
      api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      forget_api();
      return nullptr;
    }
    api->enabled.push_back(kind);
  }
  return std::unique_ptr<NodeProfiler>(new NodeProfiler(std::move(api)));
}

NodeProfiler::NodeProfiler(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NodeProfiler::~NodeProfiler() {
  for (CUpti_ActivityKind k : api_->enabled) api_->disable(k);
  api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.clear();
  g_api = nullptr;  // a buffer CUPTI completes later is only freed
  // libcupti stays loaded: its threads may outlive this object.
}

std::vector<NodeRecord> NodeProfiler::take(std::string* error) {
  CUptiResult r = api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (r != CUPTI_SUCCESS) {
    *error = "CUPTI could not flush its records: " + api_->text(r);
    return {};
  }
  if (g_dropped > 0) {
    *error = "CUPTI dropped " + std::to_string(g_dropped) + " activity records";
    return {};
  }
  std::vector<NodeRecord> out;
  out.swap(g_records);
  return out;
}

std::vector<NodeRow> aggregate_nodes(const std::vector<std::vector<NodeRecord>>& launches) {
  using Key = std::tuple<int, uint32_t, uint64_t, std::string>;
  struct Acc {
    NodeRow row;
    std::vector<double> ms, offsets;
    size_t runs = 0;
  };
  std::map<Key, Acc> acc;
  for (const auto& records : launches) {
    if (records.empty()) continue;
    uint64_t first = records.front().start_ns;
    // (Key, and the first start, include records of no duration: they still mark the order.)
    for (const NodeRecord& r : records) first = std::min(first, r.start_ns);
    std::map<Key, std::pair<double, uint64_t>> launch;  // sum of ms, earliest start
    for (const NodeRecord& r : records) {
      if (r.end_ns <= r.start_ns) continue;  // a node that did not run (an IF branch not taken)
      Key key{static_cast<int>(r.kind), r.graph_id, r.node_id, r.name};
      auto [it, inserted] = launch.try_emplace(key, 0.0, r.start_ns);
      it->second.first += static_cast<double>(r.end_ns - r.start_ns) / 1e6;
      it->second.second = std::min(it->second.second, r.start_ns);
      Acc& a = acc[key];
      if (a.runs++ == 0) {
        a.row.kind = r.kind;
        a.row.name = r.name;
        a.row.bytes = r.bytes;
        a.row.copy_kind = r.copy_kind;
        a.row.device_launched = r.device_launched;
      }
    }
    for (const auto& [key, v] : launch) {
      acc[key].ms.push_back(v.first);
      acc[key].offsets.push_back(static_cast<double>(v.second - first) / 1e6);
    }
  }
  std::vector<NodeRow> rows;
  for (auto& [key, a] : acc) {
    a.row.per_launch = summarize(a.ms);
    a.row.runs_per_launch = launches.empty() ? 0 : static_cast<double>(a.runs) / launches.size();
    a.row.start_offset = median_of(a.offsets);
    rows.push_back(a.row);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const NodeRow& a, const NodeRow& b) { return a.start_offset < b.start_offset; });
  return rows;
}

bool uses_device_graphs(const orch::fb::Pipeline& p) {
  if (p.graphs())
    for (const orch::fb::Graph* g : *p.graphs())
      if (g->device()) return true;
  return false;
}

std::vector<Statement> statements_for(const orch::fb::Pipeline& p, const NodeRow& row,
                                      const std::function<size_t(const std::string&)>& buffer_bytes) {
  std::vector<Statement> out;
  const orch::fb::Buffer* none = nullptr;
  auto buffer = [&](int index) {
    if (!p.buffers() || index < 0 || static_cast<uint32_t>(index) >= p.buffers()->size()) return none;
    return p.buffers()->Get(index);
  };
  auto bytes_of = [&](int index) -> size_t {
    const orch::fb::Buffer* b = buffer(index);
    return b ? buffer_bytes(b->name()->str()) : 0;
  };
  // CUPTI's copy kinds from the buffers' kinds: pinned host buffers are the host side.
  auto copy_kind = [&](const orch::fb::Node& n) -> uint8_t {
    const orch::fb::Buffer* src = buffer(n.src());
    const orch::fb::Buffer* dst = buffer(n.dst());
    if (!src || !dst) return 0;
    if (src->host()) return dst->host() ? 9 : 1;
    return dst->host() ? 2 : 8;
  };
  bool is_pipeline_kernel = false;
  if (row.kind == NodeRecord::Kind::Kernel && p.kernels())
    for (const orch::fb::Kernel* k : *p.kernels())
      if (k->lowered_name()->str() == row.name) is_pipeline_kernel = true;
  const int memset_size = is_pipeline_kernel ? 0 : memset_kernel_element_size(row.name);

  auto visit = [&](const orch::fb::Node& n, bool in_conditional, bool in_while) {
    bool match = false;
    switch (row.kind) {
      case NodeRecord::Kind::Kernel:
        if (is_pipeline_kernel) {
          match = n.kind() == orch::fb::NodeKind::Kernel && p.kernels() && n.kernel() >= 0 &&
                  static_cast<uint32_t>(n.kernel()) < p.kernels()->size() &&
                  p.kernels()->Get(n.kernel())->lowered_name()->str() == row.name;
        } else if (memset_size > 0) {
          match = n.kind() == orch::fb::NodeKind::Memset && in_conditional &&
                  n.memset_element_size() == memset_size;
        }
        break;
      case NodeRecord::Kind::Memcpy:
        match = n.kind() == orch::fb::NodeKind::Memcpy && bytes_of(n.src()) == row.bytes &&
                (row.copy_kind == 0 || copy_kind(n) == 0 || copy_kind(n) == row.copy_kind);
        break;
      case NodeRecord::Kind::Memset:
        match = n.kind() == orch::fb::NodeKind::Memset && !in_conditional && bytes_of(n.dst()) == row.bytes;
        break;
    }
    if (!match) return;
    std::string what = n.what() ? n.what()->str() : std::string();
    if (what.empty()) what = row.kind == NodeRecord::Kind::Kernel ? row.name : "(generated)";
    const std::string loc = loc_text(p, n.loc());
    out.push_back({loc.empty() ? what : what + "  " + loc, in_while});
  };
  if (p.graphs())
    for (const orch::fb::Graph* g : *p.graphs()) walk(g, false, false, visit);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_node_table(const orch::fb::Pipeline& p, const std::vector<NodeRow>& rows,
                              const std::function<size_t(const std::string&)>& buffer_bytes,
                              const Summary& launch, size_t profiled_launches) {
  std::ostringstream s;
  s << "per node (CUPTI activity records of " << profiled_launches
    << " more launches; GPU time of each graph node per launch):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %10s %10s %7s  %s\n", "median", "p90", "runs", "node");
  s << line;
  double sum = 0;
  for (const NodeRow& r : rows) {
    sum += r.per_launch.median;
    std::string label;
    const auto statements = statements_for(p, r, buffer_bytes);
    static const char* kCopyKinds[] = {"", " HtoD", " DtoH", " HtoA", " AtoH", " AtoA", " AtoD", " DtoA", " DtoD", " HtoH", " PtoP"};
    std::string kind_text =
        r.kind == NodeRecord::Kind::Kernel ? "kernel " + r.name
        : r.kind == NodeRecord::Kind::Memcpy
            ? "memcpy " + format_bytes(r.bytes) + (r.copy_kind <= 10 ? kCopyKinds[r.copy_kind] : "")
            : "memset " + format_bytes(r.bytes);
    bool all_in_while = !statements.empty();
    for (const Statement& st : statements) all_in_while &= st.in_while;
    if (statements.size() == 1) {
      label = statements[0].text;
      if (memset_kernel_element_size(r.name) > 0 && r.kind == NodeRecord::Kind::Kernel &&
          label.find(r.name) == std::string::npos)
        label += "  (as CUDA's " + r.name + ")";
    } else if (statements.empty()) {
      label = kind_text + " (no statement of the pipeline matches)";
    } else {
      label = kind_text + ", one of " + std::to_string(statements.size()) + " statements: ";
      for (size_t i = 0; i < statements.size() && i < 3; ++i) label += (i ? "; " : "") + statements[i].text;
      if (statements.size() > 3) label += "; ...";
    }
    if (all_in_while) label += "  [while body: CUPTI reports one iteration per launch]";
    if (r.device_launched) label += "  [device-launched]";
    char runs[32];
    std::snprintf(runs, sizeof runs, r.runs_per_launch == static_cast<uint64_t>(r.runs_per_launch) ? "%.0f" : "%.2f",
                  r.runs_per_launch);
    std::snprintf(line, sizeof line, "  %10s %10s %7s  ", format_ms(r.per_launch.median).c_str(),
                  format_ms(r.per_launch.p90).c_str(), runs);
    s << line << label << "\n";
  }
  if (rows.empty()) s << "  (CUPTI reported no kernel, copy or fill)\n";
  s << "  " << rows.size() << " nodes; their medians sum to " << format_ms(sum) << ", the launch median is "
    << format_ms(launch.median)
    << " (concurrent nodes overlap; the rest is launch overhead and dependency gaps)\n";
  return s.str();
}

}  // namespace orch::run
