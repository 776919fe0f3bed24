#include "tools/orch_run/runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include "artifact/artifact.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "tools/orch_run/nodes.h"
#include "tools/orch_run/watchdog.h"

namespace orch::run {

namespace {

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

// Owners for the CUDA objects orch-run creates, so every return path releases them.
struct StreamOwner {
  cudaStream_t s = nullptr;
  ~StreamOwner() {
    if (s) cudaStreamDestroy(s);
  }
};
// Waits for the stream before the Executable goes, on every path (a failed launch included).
struct SyncOnExit {
  cudaStream_t s = nullptr;
  ~SyncOnExit() {
    if (s) cudaStreamSynchronize(s);
  }
};
struct EventOwner {
  cudaEvent_t e = nullptr;
  ~EventOwner() {
    if (e) cudaEventDestroy(e);
  }
};

class Runner {
 public:
  Runner(Options& o, std::ostream& out, std::ostream& err) : o_(o), out_(out), err_(err) {}

  int run() {
    Watchdog watchdog(o_.timeout, [this] { timed_out(); });
    // 1. The artifact, checked exactly as the runtime checks it, with no GPU involved.
    std::string error;
    if (!orch::artifact::read_file(o_.pipeline, orch::artifact::kMaxFileSize, &pipeline_file_, &error))
      return fail(o_.pipeline + ": " + error);
    const auto opened = orch::artifact::open_pipeline(pipeline_file_.data(), pipeline_file_.size);
    if (!opened.ok()) return fail(o_.pipeline + ": " + opened.error);
    const orch::fb::Pipeline& fb = *opened.pipeline;
    if (o_.list) {
      out_ << list_pipeline(fb);
      return kExitOk;
    }

    // 2. Names and values against the declarations; the fill files.
    error = check_against_pipeline(&o_, fb);
    if (!error.empty()) return fail(error);
    const bool has_comms = fb.comms() && fb.comms()->size() > 0;
    if (o_.ranks > 0 && !has_comms)
      return fail("--ranks " + std::to_string(o_.ranks) + ": pipeline " + fb.name()->str() +
                  " has no comm, so its ranks would not work together; run it without --ranks");
    // --ranks N: this process starts N copies of itself (ORCH_RANK set) and waits for them.
    if (o_.ranks > 0 && !std::getenv("ORCH_RANK")) {
      auto launcher = orch::ranks::from_environment();
      if (launcher && !launcher->source.empty())
        return fail("--ranks " + std::to_string(o_.ranks) +
                    ": the rank processes get ORCH_RANK from orch-run itself; under " + launcher->source +
                    " leave --ranks out (the launcher starts the ranks)");
      return spawn_ranks();
    }
    if (has_comms) {
      auto me = orch::ranks::from_environment();
      if (!me) return fail(me.error().message());
      me_ = *me;
      if (o_.ranks > 0 && me_.world_size != static_cast<int>(o_.ranks))
        return fail("--ranks " + std::to_string(o_.ranks) + ", but " + me_.source + " says world size " +
                    std::to_string(me_.world_size));
      if (me_.world_size > 1 && o_.device != 0)
        return fail("--device cannot be combined with several ranks: each rank uses the GPU of its local rank");
      if (!me_.source.empty()) o_.device = me_.local_rank;
      quiet_ = me_.rank != 0;
      const char* spawned = std::getenv("ORCH_NCCL_ID_FILE");
      if (me_.world_size > 1 && !(spawned && *spawned) && o_.nccl_id_file.empty())
        return fail("give --nccl-id-file PATH (rank " + std::to_string(me_.rank) + " of " +
                    std::to_string(me_.world_size) + ", from " + me_.source +
                    "): rank 0 writes the NCCL unique id there for the others; use a fresh path every "
                    "rank can read");
      orch::ranks::default_nccl_environment();  // before NCCL is loaded
    }
    if (o_.nodes && uses_device_graphs(fb))
      return fail("--nodes: pipeline " + fb.name()->str() +
                  " launches graphs from the device, and its launches fail while CUPTI traces "
                  "them (seen with driver 580, CUDA 13.0); per-node times are not available "
                  "for it, run without --nodes");
    // Refuse a --dump destination that could not be written before any GPU work is done.
    for (const DumpArg& d : o_.dumps) {
      const std::string path = me_.world_size > 1 ? d.path + ".rank" + std::to_string(me_.rank) : d.path;
      std::string problem = orch::artifact::output_path_problem(path, input_paths());
      if (!problem.empty()) return fail("--dump " + d.name + "=" + d.path + ": " + problem);
    }
    for (const FillArg& f : o_.fills)
      if (f.kind == FillArg::Kind::File) {
        orch::artifact::FileBytes data;
        if (!orch::artifact::read_file(f.text, SIZE_MAX / 2, &data, &error))
          return fail("--fill " + f.name + "=" + f.spec + ": " + error);
        file_data_[f.name] = std::move(data);
      }

    // 3. The GPU.
    phase_ = "looking for the CUDA device";
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail("no CUDA device: " + cuda_text(e));
    }
    if (count == 0) return fail("no CUDA device: cudaGetDeviceCount found none");
    if (o_.device >= count)
      return fail("no CUDA device " + std::to_string(o_.device) + ": this machine has " +
                  std::to_string(count) + " (devices 0 to " + std::to_string(count - 1) + ")");
    if ((e = cudaSetDevice(o_.device)) != cudaSuccess)
      return fail("cannot use CUDA device " + std::to_string(o_.device) + ": " + cuda_text(e));
    cudaDeviceProp prop{};
    if ((e = cudaGetDeviceProperties(&prop, o_.device)) != cudaSuccess)
      return fail("cannot read the properties of CUDA device " + std::to_string(o_.device) +
                  ": " + cuda_text(e));

    // 4. Load, bind, instantiate.
    orch::LoadOptions load_options;
    load_options.force_ptx = o_.force_ptx;
    phase_ = "loading the pipeline";
    auto pipeline = orch::Pipeline::load(o_.pipeline, load_options);
    if (!pipeline) return fail(pipeline.error());
    StreamOwner stream;
    if ((e = cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking)) != cudaSuccess)
      return fail("cannot create a stream: " + cuda_text(e));
    orch::Bindings bindings;
    for (const ParamArg& p : o_.params) bindings.set_param(p.name, p.parsed);
    std::vector<std::string> id_files;
    if (has_comms) {
      // One communicator per declared comm, from a unique id each: made here for one rank,
      // else shared by rank 0 through a file (spawn's private one, or --nccl-id-file).
      std::string base;
      if (me_.world_size > 1) {
        const char* spawned = std::getenv("ORCH_NCCL_ID_FILE");
        base = spawned && *spawned ? spawned : o_.nccl_id_file;
      }
      for (uint32_t i = 0; i < fb.comms()->size(); ++i) {
        orch::Result<std::array<char, 128>> id = std::array<char, 128>{};
        if (me_.world_size == 1) {
          id = orch::nccl_unique_id();
        } else {
          id_files.push_back(i == 0 ? base : base + "." + std::to_string(i));
          id = orch::ranks::share_unique_id(id_files.back(), me_.rank, std::chrono::seconds(300));
        }
        if (!id) return fail(id.error());
        bindings.comm_from_unique_id(fb.comms()->Get(i)->name()->string_view(), id->data(), me_.rank,
                                     me_.world_size);
      }
    }
    phase_ = "instantiating the pipeline";
    auto exec = (*pipeline)->instantiate(bindings, stream.s);
    if (!exec) return fail(exec.error());
    orch::Executable& x = *exec.value();
    SyncOnExit sync_on_exit{stream.s};
    // Every rank has read the ids (the communicators exist): rank 0 removes them, so that a
    // later run cannot read a stale one.
    if (me_.rank == 0)
      for (const std::string& f : id_files) std::remove(f.c_str());

    out() << "pipeline " << (*pipeline)->name() << " on device " << o_.device << " ("
         << prop.name << ", sm_" << prop.major << prop.minor << "): " << (*pipeline)->image()
         << "\n";
    if (has_comms) {
      auto v = orch::nccl_version();
      out() << "ranks: " << me_.world_size << (me_.source.empty() ? " (this process alone)" : " (from " + me_.source + ")")
            << ", NCCL " << (v ? *v : std::string("?")) << "\n";
    }
    if (fb.params() && fb.params()->size() > 0) {
      out() << "params:";
      for (const auto* p : *fb.params()) {
        auto v = x.param_as_double(p->name()->string_view());
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.9g", v ? *v : 0.0);
        out() << " " << p->name()->str() << "=" << (v ? buf : "?");
      }
      out() << "\n";
    }

    // 5. Fill.
    phase_ = "filling the buffers";
    for (const FillArg& f : o_.fills) {
      const int rc = fill(x, f);
      if (rc != kExitOk) return rc;
    }
    // A copy from pageable memory may still be in flight when cudaMemcpy returns, and the
    // launch stream does not wait for the legacy stream.
    if (!o_.fills.empty() && (e = cudaDeviceSynchronize()) != cudaSuccess)
      return fail("filling the buffers failed: " + cuda_text(e));

    // 6. Warm up, then time each launch with a pair of events.
    phase_ = "the warm-up launches";
    for (unsigned i = 0; i < o_.warmup; ++i) {
      orch::Status s = x.launch(stream.s);
      if (!s) return fail(s.error());
    }
    if ((e = cudaStreamSynchronize(stream.s)) != cudaSuccess)
      return fail("a warm-up launch failed on the GPU: " + cuda_text(e));
    if (orch::Status d = x.device_status(); !d) return fail(d.error());

    std::vector<double> ms;
    ms.reserve(o_.repeat);
    constexpr unsigned kBatch = 1024;  // events are reused, batch by batch
    std::vector<EventOwner> starts(std::min(o_.repeat, kBatch)), stops(starts.size());
    for (size_t i = 0; i < starts.size(); ++i)
      if ((e = cudaEventCreate(&starts[i].e)) != cudaSuccess ||
          (e = cudaEventCreate(&stops[i].e)) != cudaSuccess)
        return fail("cannot create CUDA events: " + cuda_text(e));
    phase_ = "the timed launches";
    const auto wall_start = std::chrono::steady_clock::now();
    for (unsigned done = 0; done < o_.repeat;) {
      const unsigned n = std::min(o_.repeat - done, kBatch);
      for (unsigned i = 0; i < n; ++i) {
        cudaEventRecord(starts[i].e, stream.s);
        orch::Status s = x.launch(stream.s);
        if (!s) return fail(s.error());
        cudaEventRecord(stops[i].e, stream.s);
      }
      if ((e = cudaStreamSynchronize(stream.s)) != cudaSuccess)
        return fail("a launch failed on the GPU: " + cuda_text(e));
      // Work launched from the GPU reports its failures only in the device status.
      if (orch::Status d = x.device_status(); !d) return fail(d.error());
      for (unsigned i = 0; i < n; ++i) {
        float t = 0;
        if ((e = cudaEventElapsedTime(&t, starts[i].e, stops[i].e)) != cudaSuccess)
          return fail("cannot read a CUDA event: " + cuda_text(e));
        ms.push_back(t);
      }
      done += n;
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
            .count();

    const Summary s = summarize(ms);
    std::vector<std::vector<double>> per_rank;
    if (me_.world_size > 1) {
      // Every rank's figures to every rank (rank 0 prints them), through the pipeline's first
      // communicator.
      phase_ = "exchanging the times with the other ranks";
      auto all = orch::ranks::allgather(
          x.comm(fb.comms()->Get(0)->name()->string_view()),
          {double(o_.device), s.median, s.p90, s.min, s.max, s.mean, wall_ms / o_.repeat}, stream.s);
      if (!all) return fail(all.error());
      per_rank = std::move(*all);
    }
    out() << "launches: " << o_.repeat << " timed after " << o_.warmup << " warm-up\n"
         << "per launch (CUDA events): median " << format_ms(s.median) << ", p90 "
         << format_ms(s.p90) << ", min " << format_ms(s.min) << ", max " << format_ms(s.max)
         << ", mean " << format_ms(s.mean) << "\n"
         << "wall clock: " << format_ms(wall_ms) << " for " << o_.repeat << " launches ("
         << format_ms(wall_ms / o_.repeat) << " per launch, event records included)\n";
    if (!per_rank.empty()) print_ranks(per_rank);
    out().flush();
    if (o_.nodes) {
      const int rc = profile_nodes(x, fb, stream.s, s);
      if (rc != kExitOk) return rc;
    }

    // 7. Dump.
    phase_ = "dumping the buffers";
    for (const DumpArg& d : o_.dumps) {
      const int rc = dump(x, d);
      if (rc != kExitOk) return rc;
    }
    // Everything launched has finished (synchronized above), so the Executable may go.
    phase_ = "finishing";
    return kExitOk;
  }

 private:
  // --timeout passed: say where the run was, then end the process (the default) or tell the
  // test that replaced the action.
  void timed_out() {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", o_.timeout);
    const std::string message = std::string("orch-run: ") +
                                (me_.world_size > 1 ? "rank " + std::to_string(me_.rank) + ": " : std::string()) +
                                "timed out after " + seconds + " s (--timeout) while " + phase_.load() +
                                "; GPU work that does not finish cannot be cancelled, so orch-run ends its "
                                "process, which ends that work";
    if (o_.on_timeout) o_.on_timeout(message);
    else report_and_exit(message, kExitTimeout);
  }

  int fail(const std::string& message) {
    err_ << "orch-run: " << (me_.world_size > 1 ? "rank " + std::to_string(me_.rank) + ": " : std::string())
         << message << "\n";
    return kExitError;
  }

  // Results go to out_ on rank 0 only.
  std::ostream& out() { return quiet_ ? null_ : out_; }

  // --ranks N: checks the GPUs, then runs this program once per rank and waits for them all.
  int spawn_ranks() {
    if (o_.device != 0)
      return fail("--device cannot be combined with --ranks: rank r runs on device r");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail("no CUDA device: " + cuda_text(e));
    }
    if (count < static_cast<int>(o_.ranks))
      return fail("--ranks " + std::to_string(o_.ranks) + ": this machine has " + std::to_string(count) +
                  " CUDA device" + (count == 1 ? "" : "s") + " (one rank per GPU)");
    std::vector<std::string> argv = {o_.self_exe};
    argv.insert(argv.end(), o_.command_line.begin(), o_.command_line.end());
    out_.flush();
    phase_ = "waiting for the rank processes";
    auto exits = orch::ranks::spawn(static_cast<int>(o_.ranks), argv);
    if (!exits) return fail(exits.error());
    int rc = kExitOk;
    for (const orch::ranks::Exit& x : *exits)
      if (!x.ok()) {
        // A rank that was stopped because another failed says nothing of its own.
        if (!x.killed) err_ << "orch-run: " << x.describe() << "\n";
        rc = kExitError;
      }
    return rc;
  }

  // Rank 0's table of every rank's figures: {device, median, p90, min, max, mean, wall}.
  void print_ranks(const std::vector<std::vector<double>>& all) {
    out() << "rank  device  median      p90         min         max         wall/launch\n";
    double slowest = 0, fastest = 1e300;
    for (size_t r = 0; r < all.size(); ++r) {
      const std::vector<double>& v = all[r];
      char line[200];
      std::snprintf(line, sizeof line, "%-5zu %-7d %-11s %-11s %-11s %-11s %s\n", r, static_cast<int>(v[0]),
                    format_ms(v[1]).c_str(), format_ms(v[2]).c_str(), format_ms(v[3]).c_str(),
                    format_ms(v[4]).c_str(), format_ms(v[6]).c_str());
      out() << line;
      slowest = std::max(slowest, v[1]);
      fastest = std::min(fastest, v[1]);
    }
    out() << "all " << all.size() << " ranks: step time (the slowest rank's median) " << format_ms(slowest)
          << ", fastest rank's median " << format_ms(fastest) << ", spread "
          << format_ms(slowest - fastest) << "\n";
  }
  int fail(const orch::Error& error) { return fail(error.to_string()); }

  // --nodes: --repeat more launches, each synchronized and its CUPTI records taken.
  int profile_nodes(orch::Executable& x, const orch::fb::Pipeline& fb, cudaStream_t stream,
                    const Summary& launch) {
    std::string error;
    auto profiler = NodeProfiler::create(&error);
    if (!profiler) return fail("--nodes: " + error);
    phase_ = "the per-node profiling launches (--nodes)";
    std::vector<std::vector<NodeRecord>> launches;
    for (unsigned i = 0; i < o_.repeat; ++i) {
      orch::Status s = x.launch(stream);
      if (!s) return fail(s.error());
      cudaError_t e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return fail("a launch failed on the GPU: " + cuda_text(e));
      if (orch::Status d = x.device_status(); !d) return fail(d.error());
      launches.push_back(profiler->take(&error));
      if (!error.empty()) return fail("--nodes: " + error);
    }
    const auto rows = aggregate_nodes(launches);
    out() << format_node_table(fb, rows, [&](const std::string& name) { return x.buffer_bytes(name); },
                              launch, launches.size());
    return kExitOk;
  }

  int fill(orch::Executable& x, const FillArg& f) {
    void* ptr = x.buffer(f.name);
    const size_t bytes = x.buffer_bytes(f.name);
    const size_t esize = type_size(f.type);
    if (!ptr || esize == 0) return fail("--fill " + f.name + ": the runtime has no such buffer");
    const size_t count = bytes / esize;
    std::vector<uint8_t> host;
    const void* src = nullptr;
    switch (f.kind) {
      case FillArg::Kind::Random:  // each rank its own data
        host = random_bytes(f.type, count, o_.seed + static_cast<uint64_t>(me_.rank), f.name, f.range);
        src = host.data();
        break;
      case FillArg::Kind::Constant:
        host = repeat_element(f.element, count);
        src = host.data();
        break;
      case FillArg::Kind::File: {
        const orch::artifact::FileBytes& file = file_data_.at(f.name);
        const size_t n = file.size;
        if (n != bytes)
          return fail("--fill " + f.name + "=" + f.spec + ": the file has " + std::to_string(n) +
                      " bytes; `" + f.name + "` is " + type_name(f.type) + "[" +
                      std::to_string(count) + "] = " + std::to_string(bytes) + " bytes");
        src = file.data();
        break;
      }
    }
    if (bytes == 0) return kExitOk;
    cudaError_t e = cudaMemcpy(ptr, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) return fail("--fill " + f.name + ": cudaMemcpy: " + cuda_text(e));
    return kExitOk;
  }

  // The files this run reads, which no --dump may replace.
  std::vector<std::string> input_paths() const {
    std::vector<std::string> in{o_.pipeline};
    for (const FillArg& f : o_.fills)
      if (f.kind == FillArg::Kind::File) in.push_back(f.text);
    return in;
  }

  int dump(orch::Executable& x, const DumpArg& d) {
    void* ptr = x.buffer(d.name);
    const size_t bytes = x.buffer_bytes(d.name);
    if (!ptr) return fail("--dump " + d.name + ": the runtime has no such buffer");
    std::string data(bytes, '\0');
    if (bytes) {
      cudaError_t e = cudaMemcpy(data.data(), ptr, bytes, cudaMemcpyDefault);
      if (e != cudaSuccess) return fail("--dump " + d.name + ": cudaMemcpy: " + cuda_text(e));
    }
    std::string error;
    const std::string path = me_.world_size > 1 ? d.path + ".rank" + std::to_string(me_.rank) : d.path;
    if (!orch::artifact::write_file_atomically(path, data, &error, input_paths()))
      return fail("--dump " + d.name + "=" + path + ": " + error);
    out() << "dumped " << d.name << " (" << format_bytes(bytes) << ") to " << path
          << (me_.world_size > 1 ? " (rank 0's; each rank writes " + d.path + ".rank<r>)" : std::string()) << "\n";
    return kExitOk;
  }

  Options& o_;
  std::ostream& out_;
  std::ostream& err_;
  std::ostream null_{nullptr};
  bool quiet_ = false;
  orch::ranks::Rank me_;  // rank 0 of 1 unless the pipeline has comms and a launcher says more
  orch::artifact::FileBytes pipeline_file_;
  std::map<std::string, orch::artifact::FileBytes> file_data_;
  // What the run is doing, for --timeout's message (read by the watchdog's thread).
  std::atomic<const char*> phase_{"reading the pipeline"};
};

}  // namespace

int run(Options& options, std::ostream& out, std::ostream& err) {
  return Runner(options, out, err).run();
}

}  // namespace orch::run
