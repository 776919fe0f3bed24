#include "tools/orch_run/cupti.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "tools/orch_run/cupti_api.h"

namespace orch::run {

namespace {

// CUPTI delivers activity records to plain callbacks on its own thread: they land here.
std::mutex g_mutex;
std::vector<NodeRecord> g_records;
uint64_t g_dropped = 0;
const Cupti::Api* g_api = nullptr;

// What kernel, memcpy and memset records share: the graph node, the times, where it ran.
template <typename Record>
void fill_common(NodeRecord& r, const Record& a) {
  r.graph_id = a.graphId;
  r.node_id = a.graphNodeId;
  r.start_ns = a.start;
  r.end_ns = a.end;
  r.device_launched = a.isDeviceLaunched != 0;
  r.device_id = a.deviceId;
  r.stream_id = a.streamId;
  r.correlation_id = a.correlationId;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBufferSize = 8u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
  *size = *buffer ? kBufferSize : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_size) {
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
          fill_common(r, *k);
          // CUPTI's int32 fields are never negative for a launch that ran.
          auto u = [](int32_t v) { return v > 0 ? static_cast<uint32_t>(v) : 0u; };
          r.grid[0] = u(k->gridX);
          r.grid[1] = u(k->gridY);
          r.grid[2] = u(k->gridZ);
          r.block[0] = u(k->blockX);
          r.block[1] = u(k->blockY);
          r.block[2] = u(k->blockZ);
          r.registers = k->registersPerThread;
          r.static_shared_bytes = u(k->staticSharedMemory);
          r.dynamic_shared_bytes = u(k->dynamicSharedMemory);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          r.kind = NodeRecord::Kind::Memcpy;
          r.bytes = m->bytes;
          r.copy_kind = m->copyKind;
          fill_common(r, *m);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          r.kind = NodeRecord::Kind::Memset;
          r.bytes = m->bytes;
          fill_common(r, *m);
          break;
        }
        default:
          continue;
      }
      g_records.push_back(std::move(r));
    }
    size_t dropped = 0;
    if (g_api->dropped_records && g_api->dropped_records(context, stream_id, &dropped) == CUPTI_SUCCESS)
      g_dropped += dropped;
  }
  std::free(buffer);
}

}  // namespace

namespace {

// What the resource callbacks need (lives as long as libcupti: CUPTI may call back until it is
// unsubscribed, and the library is never unloaded).
struct CallbackData {
  const Cupti::Api* api = nullptr;
  NodeIds* ids = nullptr;
  const SiteTable* sites = nullptr;
  const Cupti* cupti = nullptr;  // debug lines
  bool debug = false;
  std::mutex mutex;                                 // roots
  std::vector<std::pair<uint32_t, CUgraph>> roots;  // debug: graphs made outside any window
};
CallbackData* g_callback_data = nullptr;

}  // namespace

// The runtime's observer: node ids through CUPTI, host phases through CUPTI's clock.
class Cupti::Observer : public orch::Observer {
 public:
  Observer(Cupti& c, const SiteTable& sites, bool node_ids) : ids_(&sites), c_(c), sites_(sites), node_ids_(node_ids) {}

  void node_begin(const NodeSite& site) override {
    if (!node_ids_) return;
    const int s = site.path ? sites_.find(site.graph, site.member, *site.path) : -1;
    ids_.begin(s);
    if (c_.debug_) c_.debug_line("node_begin site " + site_text(s));
  }
  void node_end(const NodeSite& site, cudaGraphNode_t made) override {
    if (!node_ids_) return;
    const int s = site.path ? sites_.find(site.graph, site.member, *site.path) : -1;
    uint64_t id = 0;
    if (made && c_.api_->graph_node_id(reinterpret_cast<CUgraphNode>(made), &id) != CUPTI_SUCCESS) id = 0;
    // A child graph node (a collective's NCCL capture): its nodes are the originals of what
    // instantiation clones, whether or not CUDA reported them made during the capture.
    if (made && s >= 0) map_child_nodes(made, s, 0);
    ids_.end(s, id);
    if (c_.debug_) c_.debug_line("node_end site " + site_text(s) + " made node " + node_id_text(id));
  }

  std::string site_text(int s) const {
    return s >= 0 ? std::to_string(s) + " (" + sites_[s].name + ")" : std::string("none");
  }

  void map_child_nodes(cudaGraphNode_t node, int site, int depth) {
    cudaGraphNodeType type;
    if (depth > 8 || cudaGraphNodeGetType(node, &type) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (type != cudaGraphNodeTypeGraph) return;
    cudaGraph_t child = nullptr;
    size_t count = 0;
    if (cudaGraphChildGraphNodeGetGraph(node, &child) != cudaSuccess || !child ||
        cudaGraphGetNodes(child, nullptr, &count) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    // The embedded graph is the site's as a whole (what instantiation makes of it too, where
    // CUDA says it was cloned from it), and nested in `node` (the exec numbers its nodes after
    // the top-level graph's).
    uint32_t graph = 0;
    uint64_t parent = 0;
    if (c_.api_->graph_node_id(reinterpret_cast<CUgraphNode>(node), &parent) != CUPTI_SUCCESS) parent = 0;
    if (c_.api_->graph_id && c_.api_->graph_id(reinterpret_cast<CUgraph>(child), &graph) == CUPTI_SUCCESS) {
      ids_.add_graph(graph, site, parent);
      if (c_.debug_)
        c_.debug_line("child graph " + std::to_string(graph) + " of node " + node_id_text(parent) + ", site " +
                      site_text(site));
    }
    std::vector<cudaGraphNode_t> nodes(count);
    if (count && cudaGraphGetNodes(child, nodes.data(), &count) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    for (cudaGraphNode_t n : nodes) {
      uint64_t id = 0;
      if (c_.api_->graph_node_id(reinterpret_cast<CUgraphNode>(n), &id) == CUPTI_SUCCESS) {
        ids_.add(id, site);
        if (c_.debug_) c_.debug_line("child graph node " + node_id_text(id) + " of site " + site_text(site));
      }
      map_child_nodes(n, site, depth + 1);
    }
  }
  // Graphs CUDA makes while a top-level graph is built, instantiated, uploaded (or launched, when
  // launches are observed) are part of it.
  bool tracks(Phase phase) const { return node_ids_ && (phase != Phase::Launch || launches_.load()); }
  void phase_begin(Phase phase, int graph, int member) override {
    if (phase == Phase::Launch && !launches_.load()) return;
    if (tracks(phase)) ids_.phase_begin(graph, member);
    if (c_.debug_ && phase != Phase::Launch)
      c_.debug_line(std::string("phase ") + phase_name(phase) + " of graph " + std::to_string(graph) +
                    (member >= 0 ? "[" + std::to_string(member) + "]" : "") + " begins");
    std::lock_guard<std::mutex> lock(mutex_);
    open_[{phase, graph, member}] = c_.now_ns();
  }
  void phase_end(Phase phase, int graph, int member, bool ok) override {
    if (phase == Phase::Launch && !launches_.load()) return;
    if (tracks(phase)) ids_.phase_end();
    if (c_.debug_ && phase != Phase::Launch)
      c_.debug_line(std::string("phase ") + phase_name(phase) + " of graph " + std::to_string(graph) +
                    (member >= 0 ? "[" + std::to_string(member) + "]" : "") + (ok ? " ends" : " fails"));
    const uint64_t end = c_.now_ns();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = open_.find({phase, graph, member});
    if (it == open_.end()) return;
    HostSlice s;
    const auto* graphs = sites_.pipeline().graphs();
    std::string g = graphs && graph >= 0 && static_cast<uint32_t>(graph) < graphs->size() && graphs->Get(graph)->name()
                        ? graphs->Get(graph)->name()->str()
                        : "graph " + std::to_string(graph);
    if (member >= 0) g += "[" + std::to_string(member) + "]";
    s.category = phase_name(phase);
    s.name = std::string(phase_name(phase)) + " " + g;
    s.start_ns = it->second;
    s.end_ns = end;
    s.ok = ok;
    open_.erase(it);
    slices_.push_back(std::move(s));
  }

  NodeIds ids_;
  std::mutex mutex_;
  std::map<std::tuple<Phase, int, int>, uint64_t> open_;
  std::vector<HostSlice> slices_;
  std::atomic<bool> launches_{true};

 private:
  Cupti& c_;
  const SiteTable& sites_;
  bool node_ids_;
};

namespace {

const char* resource_name(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CREATED: return "GRAPH_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING: return "GRAPH_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED: return "GRAPH_CLONED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATE_STARTING: return "GRAPHNODE_CREATE_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: return "GRAPHNODE_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING: return "GRAPHNODE_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_CREATED: return "GRAPHNODE_DEPENDENCY_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_DEPENDENCY_DESTROY_STARTING: return "GRAPHNODE_DEPENDENCY_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING: return "GRAPHEXEC_CREATE_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: return "GRAPHEXEC_CREATED";
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: return "GRAPHEXEC_DESTROY_STARTING";
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: return "GRAPHNODE_CLONED";
    case CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED: return "GRAPH_NODE_UPDATED";
    case CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS: return "GRAPH_NODE_SET_PARAMS";
    default: return "resource callback";
  }
}

const char* node_type_name(int t) {
  static const char* kNames[] = {"kernel", "memcpy", "memset", "host", "graph", "empty", "wait event",
                                 "event record", "semaphore signal", "semaphore wait", "mem alloc", "mem free",
                                 "batch mem op", "conditional"};
  return t >= 0 && t < static_cast<int>(sizeof kNames / sizeof *kNames) ? kNames[t] : "?";
}

// CUDA calls this on the thread that makes, clones or instantiates a graph or graph node. Only
// CUPTI's id functions are called here (no CUDA API call inside a callback).
void CUPTIAPI on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || !userdata || !cbdata) return;
  auto* self = static_cast<CallbackData*>(userdata);
  const Cupti::Api* api = self->api;
  NodeIds* ids = self->ids;
  if (!api || !ids) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* data = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (!data) return;
  auto graph_id = [&](CUgraph g) {
    uint32_t id = 0;
    if (g && api->graph_id && api->graph_id(g, &id) != CUPTI_SUCCESS) id = 0;
    return id;
  };
  auto node_id = [&](CUgraphNode n) {
    uint64_t id = 0;
    if (n && api->graph_node_id(n, &id) != CUPTI_SUCCESS) id = 0;
    return id;
  };
  const uint32_t graph = graph_id(data->graph), original_graph = graph_id(data->originalGraph);
  const uint64_t node = node_id(data->node), original = node_id(data->originalNode);
  uint32_t exec = 0;
  if (data->graphExec && api->graph_exec_id && api->graph_exec_id(data->graphExec, &exec) != CUPTI_SUCCESS) exec = 0;
  const int window = self->debug ? ids->current_site() : -1;
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CREATED:
      ids->graph_created(graph);
      // A graph made while nothing is built, instantiated or uploaded: a template (the graphs CUDA
      // makes inside instantiation are its own).
      if (self->debug && data->graph && !ids->busy()) {
        std::lock_guard<std::mutex> lock(self->mutex);
        self->roots.emplace_back(graph, data->graph);
      }
      break;
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED: ids->graph_cloned(original_graph, graph); break;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      if (self->debug) {
        std::lock_guard<std::mutex> lock(self->mutex);
        self->roots.erase(std::remove_if(self->roots.begin(), self->roots.end(),
                                         [&](const auto& r) { return r.second == data->graph; }),
                          self->roots.end());
      }
      break;
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
      if (node) ids->created(node, graph);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED:
      if (node) ids->cloned(original, node, original_graph, graph);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: ids->exec_created(graph, exec); break;
    default: break;
  }
  if (self->debug && self->cupti) {
    std::ostringstream line;
    line << resource_name(cbid) << ":";
    if (data->graph) line << " graph " << graph;
    if (data->originalGraph) line << " original graph " << original_graph;
    if (data->node) line << " node " << node_id_text(node) << " type " << node_type_name(static_cast<int>(data->nodeType));
    if (data->originalNode) line << " original node " << node_id_text(original);
    if (data->dependency) line << " dependency " << node_id_text(node_id(data->dependency));
    if (data->graphExec) line << " exec " << exec;
    line << " window " << (window >= 0 && self->sites ? std::to_string(window) + " (" + (*self->sites)[window].name + ")"
                                                      : std::string("none"));
    if (node) {
      const int site = ids->site_of(node);
      if (site >= 0 && self->sites) line << " -> site " << site;
    }
    self->cupti->debug_line(line.str());
  }
}

}  // namespace

std::unique_ptr<Cupti> Cupti::open(std::string* error) {
  auto api = std::make_unique<Api>();
  std::vector<std::string> candidates = {"libcupti.so.13", "libcupti.so"};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(var)) {
      candidates.push_back(std::string(root) + "/lib64/libcupti.so");
      candidates.push_back(std::string(root) + "/extras/CUPTI/lib64/libcupti.so");
    }
  candidates.push_back("/usr/local/cuda/lib64/libcupti.so");
  candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
  std::string first_error;
  for (const std::string& c : candidates) {
    api->handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->handle) break;
    if (first_error.empty()) first_error = dlerror();
  }
  if (!api->handle) {
    *error = "CUPTI (libcupti.so, part of the CUDA toolkit) could not be loaded: " + first_error +
             " (set CUDA_HOME, or add its lib64 to LD_LIBRARY_PATH)";
    return nullptr;
  }
  auto sym = [&](auto* fn, const char* name) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(api->handle, name));
    return *fn != nullptr;
  };
  if (!sym(&api->get_version, "cuptiGetVersion") || !sym(&api->result_string, "cuptiGetResultString") ||
      !sym(&api->get_timestamp, "cuptiGetTimestamp") || !sym(&api->enable, "cuptiActivityEnable") ||
      !sym(&api->disable, "cuptiActivityDisable") ||
      !sym(&api->register_callbacks, "cuptiActivityRegisterCallbacks") ||
      !sym(&api->flush_all, "cuptiActivityFlushAll") || !sym(&api->next_record, "cuptiActivityGetNextRecord") ||
      !sym(&api->subscribe, "cuptiSubscribe") || !sym(&api->unsubscribe, "cuptiUnsubscribe") ||
      !sym(&api->enable_callback, "cuptiEnableCallback") || !sym(&api->graph_node_id, "cuptiGetGraphNodeId")) {
    *error = "the libcupti that was loaded lacks the activity or callback API";
    return nullptr;
  }
  sym(&api->dropped_records, "cuptiActivityGetNumDroppedRecords");
  sym(&api->graph_id, "cuptiGetGraphId");
  sym(&api->graph_exec_id, "cuptiGetGraphExecId");
  sym(&api->profiler_initialize, "cuptiProfilerInitialize");
  sym(&api->profiler_deinitialize, "cuptiProfilerDeInitialize");
  sym(&api->chip_name, "cuptiDeviceGetChipName");
  sym(&api->counter_availability, "cuptiProfilerGetCounterAvailability");
  sym(&api->host_initialize, "cuptiProfilerHostInitialize");
  sym(&api->host_deinitialize, "cuptiProfilerHostDeinitialize");
  sym(&api->host_add_metrics, "cuptiProfilerHostConfigAddMetrics");
  sym(&api->host_config_size, "cuptiProfilerHostGetConfigImageSize");
  sym(&api->host_config_image, "cuptiProfilerHostGetConfigImage");
  sym(&api->host_evaluate, "cuptiProfilerHostEvaluateToGpuValues");
  sym(&api->range_enable, "cuptiRangeProfilerEnable");
  sym(&api->range_disable, "cuptiRangeProfilerDisable");
  sym(&api->range_counter_data_size, "cuptiRangeProfilerGetCounterDataSize");
  sym(&api->range_counter_data_init, "cuptiRangeProfilerCounterDataImageInitialize");
  sym(&api->range_set_config, "cuptiRangeProfilerSetConfig");
  sym(&api->range_start, "cuptiRangeProfilerStart");
  sym(&api->range_stop, "cuptiRangeProfilerStop");
  sym(&api->range_decode, "cuptiRangeProfilerDecodeData");
  sym(&api->range_counter_data_info, "cuptiRangeProfilerGetCounterDataInfo");
  // The record layouts (CUpti_ActivityKernel10, ...) are those of the headers orch-run was
  // built with; they hold within one major CUDA version.
  uint32_t version = 0;
  if (api->get_version(&version) != CUPTI_SUCCESS || version / 10000 != CUPTI_API_VERSION / 10000) {
    *error = "the libcupti that was loaded has API version " + std::to_string(version) + "; orch-run was built with " +
             std::to_string(CUPTI_API_VERSION) + " (use the CUPTI of the same CUDA major version)";
    return nullptr;
  }
  return std::unique_ptr<Cupti>(new Cupti(std::move(api)));
}

Cupti::Cupti(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Cupti::~Cupti() {
  if (observer_ && orch::observer() == observer_.get()) orch::set_observer(nullptr);
  disable_activity();
  if (api_->subscriber) {
    api_->unsubscribe(api_->subscriber);
    api_->subscriber = nullptr;
  }
  // g_callback_data stays: it points at observer_->ids_ only while subscribed.
  if (g_callback_data) {
    g_callback_data->ids = nullptr;
    g_callback_data->cupti = nullptr;
    g_callback_data->sites = nullptr;
    std::lock_guard<std::mutex> lock(g_callback_data->mutex);
    g_callback_data->roots.clear();
  }
  // libcupti stays loaded: its threads may outlive this object. The observer goes last.
}

std::string Cupti::result_text(int r) const {
  const char* s = nullptr;
  if (api_->result_string) api_->result_string(static_cast<CUptiResult>(r), &s);
  return s ? s : "CUPTI error " + std::to_string(r);
}

bool Cupti::observe(const SiteTable& sites, bool node_ids, std::string* error, std::ostream* debug) {
  debug_ = debug;
  observer_ = std::make_unique<Observer>(*this, sites, node_ids);
  if (node_ids) {
    if (!g_callback_data) g_callback_data = new CallbackData;
    g_callback_data->api = api_.get();
    g_callback_data->ids = &observer_->ids_;
    g_callback_data->sites = &sites;
    g_callback_data->cupti = this;
    g_callback_data->debug = debug != nullptr;
    CUptiResult r = api_->subscribe(&api_->subscriber, on_callback, g_callback_data);
    if (r != CUPTI_SUCCESS) {
      api_->subscriber = nullptr;
      *error = "CUPTI refused a subscriber: " + result_text(r) +
               (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                    ? " (another tool, such as Nsight Systems or Nsight Compute, is attached)"
                    : "");
      return false;
    }
    // Nodes made and cloned (the exact path), and the graphs that hold them: made, cloned and
    // instantiated (for nodes whose clones CUDA does not report, such as conditional bodies').
    for (CUpti_CallbackId cbid :
         {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_CBID_RESOURCE_GRAPH_CREATED,
          CUPTI_CBID_RESOURCE_GRAPH_CLONED, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED}) {
      r = api_->enable_callback(1, api_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid);
      if (r != CUPTI_SUCCESS) {
        *error = std::string("CUPTI refused the graph callback ") + resource_name(cbid) + ": " + result_text(r);
        return false;
      }
    }
    // ORCH_RUN_CUPTI_DEBUG: every other graph callback too, to be printed (refusals only said).
    if (debug)
      for (CUpti_CallbackId cbid :
           {CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING,
            CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
            CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED, CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS}) {
        r = api_->enable_callback(1, api_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid);
        if (r != CUPTI_SUCCESS)
          debug_line(std::string("CUPTI refused the callback ") + resource_name(cbid) + ": " + result_text(r));
      }
    if (debug) {
      debug_line(std::string("cuptiGetGraphId ") + (api_->graph_id ? "found" : "MISSING") + ", cuptiGetGraphExecId " +
                 (api_->graph_exec_id ? "found" : "MISSING"));
    }
  }
  orch::set_observer(observer_.get());
  return true;
}

void Cupti::debug_line(const std::string& line) const {
  if (!debug_) return;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  *debug_ << "[orch-run cupti] " << line << "\n";
  debug_->flush();
}

void Cupti::debug_graphs() const {
  if (!debug_) return;
  if (observer_) {
    debug_line("ids: " + observer_->ids_.summary());
    std::istringstream numbering(observer_->ids_.exec_numbering());
    for (std::string line; std::getline(numbering, line);) debug_line(line);
  }
  if (!g_callback_data) return;
  std::vector<std::pair<uint32_t, CUgraph>> roots;
  {
    std::lock_guard<std::mutex> lock(g_callback_data->mutex);
    roots = g_callback_data->roots;
  }
  for (const auto& [id, graph] : roots) {
    char path[] = "/tmp/orch-run-cupti-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    const cudaError_t e = cudaGraphDebugDotPrint(
        reinterpret_cast<cudaGraph_t>(graph), path,
        cudaGraphDebugDotFlagsConditionalNodeParams | cudaGraphDebugDotFlagsHandles);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      debug_line("graph " + std::to_string(id) + ": cudaGraphDebugDotPrint failed: " + cudaGetErrorString(e));
    } else {
      std::ifstream in(path);
      std::ostringstream text;
      text << in.rdbuf();
      debug_line("graph " + std::to_string(id) + " (made outside any statement), as cudaGraphDebugDotPrint writes it:\n" +
                 text.str());
    }
    std::remove(path);
  }
}

const NodeIds& Cupti::ids() const {
  static const NodeIds none;
  return observer_ ? observer_->ids_ : none;
}

uint64_t Cupti::now_ns() const {
  uint64_t t = 0;
  if (api_->get_timestamp(&t) != CUPTI_SUCCESS)
    t = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch())
                                  .count());
  return t;
}

void Cupti::add_host_slice(HostSlice s) {
  if (!observer_) return;
  std::lock_guard<std::mutex> lock(observer_->mutex_);
  observer_->slices_.push_back(std::move(s));
}

std::vector<HostSlice> Cupti::host_slices() const {
  if (!observer_) return {};
  std::lock_guard<std::mutex> lock(observer_->mutex_);
  std::vector<HostSlice> out = observer_->slices_;
  std::stable_sort(out.begin(), out.end(), [](const HostSlice& a, const HostSlice& b) { return a.start_ns < b.start_ns; });
  return out;
}

void Cupti::record_launches(bool on) {
  if (observer_) observer_->launches_ = on;
}

bool Cupti::enable_activity(std::string* error) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_records.clear();
    g_dropped = 0;
    g_api = api_.get();
  }
  CUptiResult r = api_->register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    *error = "CUPTI refused its activity callbacks: " + result_text(r);
    return false;
  }
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}) {
    r = api_->enable(kind);
    if (r != CUPTI_SUCCESS) {
      *error = "CUPTI refused to trace activity kind " + std::to_string(static_cast<int>(kind)) + ": " +
               result_text(r) +
               (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? " (the driver restricts profiling to admin users)" : "");
      disable_activity();
      return false;
    }
    api_->enabled.push_back(kind);
  }
  return true;
}

void Cupti::disable_activity() {
  if (api_->enabled.empty()) return;
  for (CUpti_ActivityKind k : api_->enabled) api_->disable(k);
  api_->enabled.clear();
  api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.clear();
  g_api = nullptr;  // a buffer CUPTI completes later is only freed
}

std::vector<NodeRecord> Cupti::take(std::string* error) {
  CUptiResult r = api_->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (r != CUPTI_SUCCESS) {
    *error = "CUPTI could not flush its records: " + result_text(r);
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

}  // namespace orch::run
