#include "tools/orch_run/runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include "artifact/artifact.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "compiler/target_profile.h"
#include "tools/orch_run/attribution.h"
#include "tools/orch_run/costs.h"
#include "tools/orch_run/cupti.h"
#include "tools/orch_run/metrics.h"
#include "tools/orch_run/profile.h"
#include "tools/orch_run/roofline.h"
#include "tools/orch_run/sites.h"
#include "tools/orch_run/trace.h"
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
    // CUPTI's activity tracing makes device graph launches fail (seen with driver 580, CUDA
    // 13.0). ORCH_RUN_TRACE_DEVICE_GRAPHS=1 traces them anyway, to see whether it still does.
    const char* force = std::getenv("ORCH_RUN_TRACE_DEVICE_GRAPHS");
    const bool device_graphs = uses_device_graphs(fb) && !(force && std::string(force) == "1");
    for (const auto& [flag, on] : {std::pair<const char*, bool>{"--nodes", o_.nodes}, {"--roofline", !o_.roofline.empty()},
                                   {"--profile", !o_.profile.empty()}})
      if (on && device_graphs)
        return fail(std::string(flag) + ": pipeline " + fb.name()->str() +
                    " launches graphs from the device, and its launches fail while CUPTI traces "
                    "them (seen with driver 580, CUDA 13.0); per-node times are not available "
                    "for it, run without " + flag + " (--trace shows its host side)");
    if (observing()) {
      sites_ = std::make_unique<SiteTable>(fb);
      trace_gpu_ = !device_graphs;
      if (device_graphs)
        notes_.push_back("pipeline " + fb.name()->str() +
                         " launches graphs from the device, and CUPTI's activity tracing makes such launches fail "
                         "(seen with driver 580, CUDA 13.0): its GPU work is not traced, only the host side");
    }
    // Refuse a --dump or --profile destination that could not be written before any GPU work is done.
    for (const DumpArg& d : o_.dumps) {
      const std::string path = me_.world_size > 1 ? d.path + ".rank" + std::to_string(me_.rank) : d.path;
      std::string problem = orch::artifact::output_path_problem(path, input_paths());
      if (!problem.empty()) return fail("--dump " + d.name + "=" + d.path + ": " + problem);
    }
    if (!o_.profile.empty()) {
      const std::string path = rank_path(o_.profile);
      std::string problem = orch::artifact::output_path_problem(path, input_paths());
      if (!problem.empty()) return fail("--profile " + path + ": " + problem);
    }
    for (const FillArg& f : o_.fills)
      if (f.kind == FillArg::Kind::File) {
        orch::artifact::FileBytes data;
        // At most the buffer's size (check_against_pipeline compared the file's size already
        // where the params alone size the buffer): a huge file is refused, not read.
        const size_t most = f.bytes ? static_cast<size_t>(std::min<uint64_t>(*f.bytes, SIZE_MAX / 2)) : SIZE_MAX / 2;
        if (!orch::artifact::read_file(f.text, most, &data, &error))
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

    // CUPTI hears about every node from here on (it must be there before the graphs are built).
    if (observing()) {
      cupti_ = Cupti::open(&error);
      if (!cupti_) return fail(observe_flag() + ": " + error);
      // ORCH_RUN_CUPTI_DEBUG=1: every graph callback CUDA makes and every activity record, with
      // how it was attributed, on stderr (what to look at when a node is not attributed).
      const char* debug = std::getenv("ORCH_RUN_CUPTI_DEBUG");
      const bool debugging = debug && *debug && std::string(debug) != "0";
      if (!cupti_->observe(*sites_, trace_gpu_, &error, debugging ? &err_ : nullptr))
        return fail(observe_flag() + ": " + error);
    }

    // 4. Load, bind, instantiate.
    orch::LoadOptions load_options;
    load_options.force_ptx = o_.force_ptx;
    phase_ = "loading the pipeline";
    if (o_.timing && (e = sync_for_timing()) != cudaSuccess) return fail("cudaDeviceSynchronize: " + cuda_text(e));
    auto pipeline = [&] {
      HostPhase h(this, "load", "load " + o_.pipeline);
      return orch::Pipeline::load(o_.pipeline, load_options);
    }();
    if (!pipeline) return fail(pipeline.error());
    if (o_.timing && (e = sync_for_timing(&load_ms_)) != cudaSuccess)
      return fail("cudaDeviceSynchronize: " + cuda_text(e));
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
    if (o_.timing && (e = sync_for_timing()) != cudaSuccess) return fail("cudaDeviceSynchronize: " + cuda_text(e));
    auto exec = [&] {
      HostPhase h(this, "instantiate", "instantiate " + fb.name()->str());
      return (*pipeline)->instantiate(bindings, stream.s);
    }();
    if (!exec) return fail(exec.error());
    if (cupti_) cupti_->debug_graphs();
    if (o_.timing && (e = sync_for_timing(&instantiate_ms_)) != cudaSuccess)
      return fail("cudaDeviceSynchronize: " + cuda_text(e));
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
      HostPhase h(this, "fill", "--fill " + f.name + "=" + f.spec);
      const int rc = fill(x, f);
      if (rc != kExitOk) return rc;
    }
    // A copy from pageable memory may still be in flight when cudaMemcpy returns, and the
    // launch stream does not wait for the legacy stream.
    if (!o_.fills.empty() && (e = cudaDeviceSynchronize()) != cudaSuccess)
      return fail("filling the buffers failed: " + cuda_text(e));

    // 6. Warm up, then time each launch with a pair of events.
    phase_ = "the warm-up launches";
    // The host path of the warm-up and timed launches carries no observation of its own.
    if (cupti_) cupti_->record_launches(false);
    std::optional<HostPhase> warmup_phase;
    warmup_phase.emplace(this, "launch", std::to_string(o_.warmup) + " warm-up launches");
    for (unsigned i = 0; i < o_.warmup; ++i) {
      orch::Status s = launch(x, stream.s);
      if (!s) return fail(s.error());
    }
    if ((e = cudaStreamSynchronize(stream.s)) != cudaSuccess)
      return fail(orch::cuda_error(e, "one of the " + std::to_string(o_.warmup) + " warm-up launches failed on the GPU"));
    if (orch::Status d = x.device_status(); !d) return fail(d.error());
    warmup_phase.reset();

    std::vector<double> ms;
    ms.reserve(o_.repeat);
    constexpr unsigned kBatch = 1024;  // events are reused, batch by batch
    std::vector<EventOwner> starts(std::min(o_.repeat, kBatch)), stops(starts.size());
    for (size_t i = 0; i < starts.size(); ++i)
      if ((e = cudaEventCreate(&starts[i].e)) != cudaSuccess ||
          (e = cudaEventCreate(&stops[i].e)) != cudaSuccess)
        return fail("cannot create CUDA events: " + cuda_text(e));
    phase_ = "the timed launches";
    std::optional<HostPhase> timed_phase;
    timed_phase.emplace(this, "launch", std::to_string(o_.repeat) + " timed launches (CUDA events)");
    const auto wall_start = std::chrono::steady_clock::now();
    for (unsigned done = 0; done < o_.repeat;) {
      const unsigned n = std::min(o_.repeat - done, kBatch);
      for (unsigned i = 0; i < n; ++i) {
        cudaEventRecord(starts[i].e, stream.s);
        orch::Status s = launch(x, stream.s);
        if (!s) return fail(s.error());
        cudaEventRecord(stops[i].e, stream.s);
      }
      if ((e = cudaStreamSynchronize(stream.s)) != cudaSuccess)
        return fail(orch::cuda_error(e, "one of timed launches " + std::to_string(done + 1) + " to " +
                                            std::to_string(done + n) + " failed on the GPU"));
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
    timed_phase.reset();

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
    if (o_.timing) print_timing(x.instantiate_times());
    out().flush();
    if (observing()) {
      const int rc = observe(x, fb, stream.s, s, prop);
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

  // --timing: waits for the whole device, then adds the time since the last such wait to
  // `*phase` (when given). Each phase is timed from a synchronized device to a synchronized
  // device, so work it leaves running is counted in it.
  cudaError_t sync_for_timing(double* phase = nullptr) {
    const cudaError_t e = cudaDeviceSynchronize();
    const auto now = std::chrono::steady_clock::now();
    if (phase) *phase = std::chrono::duration<double, std::milli>(now - timing_mark_).count();
    timing_mark_ = now;
    return e;
  }

  // A launch; with --timing the first one is timed on the host clock, device synchronized.
  orch::Status launch(orch::Executable& x, cudaStream_t stream) {
    if (!o_.timing || first_launch_ms_ >= 0) return x.launch(stream);
    cudaError_t e = sync_for_timing();
    if (e != cudaSuccess) return orch::Error(orch::ErrorCode::Cuda, "cudaDeviceSynchronize: " + cuda_text(e));
    orch::Status s = x.launch(stream);
    if (!s) return s;
    e = sync_for_timing(&first_launch_ms_);
    if (e != cudaSuccess) return orch::Error(orch::ErrorCode::Cuda, "the first launch failed on the GPU: " + cuda_text(e));
    return s;
  }

  void print_timing(const orch::Executable::InstantiateTimes& t) {
    const double build = t.build_s * 1e3, inst = t.instantiate_s * 1e3, upload = t.upload_s * 1e3;
    const double rest = instantiate_ms_ - build - inst - upload;
    out() << "timing (host clock, device synchronized around each phase): load " << format_ms(load_ms_)
          << ", instantiate " << format_ms(instantiate_ms_) << " (building " << format_ms(build)
          << ", cudaGraphInstantiate " << format_ms(inst) << ", upload " << format_ms(upload) << ", other "
          << format_ms(rest > 0 ? rest : 0) << "), first launch "
          << (first_launch_ms_ >= 0 ? format_ms(first_launch_ms_) : std::string("none")) << "\n";
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

  bool observing() const { return o_.nodes || !o_.trace.empty() || !o_.roofline.empty() || !o_.profile.empty(); }
  // The flag to name in a message about CUPTI.
  std::string observe_flag() const {
    return o_.nodes ? "--nodes" : !o_.trace.empty() ? "--trace" : !o_.roofline.empty() ? "--roofline" : "--profile";
  }

  // --profile: the profiled launches per statement, with the GPU and the run (lowering/profile.h),
  // written atomically (a temporary file beside it, then a rename) and nowhere else.
  int write_profile(const orch::fb::Pipeline& fb, const Attribution& attribution, const cudaDeviceProp& prop) {
    lowering::Profile p;
    p.device = prop.name;
    p.sms = static_cast<uint32_t>(std::max(prop.multiProcessorCount, 0));
    p.compute_capability = static_cast<uint32_t>(prop.major * 10 + prop.minor);
    p.driver = nvidia_driver_version();
    int version = 0;
    if (cudaError_t e = cudaDriverGetVersion(&version); e != cudaSuccess)
      return fail("--profile: cudaDriverGetVersion: " + cuda_text(e));
    p.cuda_driver_version = static_cast<uint32_t>(std::max(version, 0));
    char date[32] = "";
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    if (now != static_cast<std::time_t>(-1) && gmtime_r(&now, &utc))
      std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    p.date = date;
    p.pipeline = fb.name()->str();
    if (fb.compiler_version()) p.compiler_version = fb.compiler_version()->str();
    if (fb.source_files())
      for (const auto* f : *fb.source_files()) p.sources.push_back(f->str());
    if (pipeline_file_.size >= orch::artifact::kHeaderSize) {
      uint64_t sum = 0;
      for (int i = 0; i < 8; ++i) sum |= uint64_t{pipeline_file_.data()[24 + i]} << (8 * i);
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
      p.artifact_checksum = hex;
    }
    if (fb.params())
      for (const auto* q : *fb.params()) {
        const std::optional<expr::Value> v = param_value(o_, fb, *q);
        if (!v) continue;
        lowering::ProfileValue value;
        if (v->is_float()) value = v->f64();
        else if (v->type == expr::ScalarType::Bool) value = v->truthy();
        else if (expr::is_signed(v->type)) value = v->i64();
        else value = v->u64();
        p.params.emplace_back(q->name()->str(), value);
      }
    p.pipeline_launches = attribution.launches;
    add_profile_nodes(*sites_, attribution, &p);
    const std::string path = rank_path(o_.profile);
    std::string error;
    if (!orch::artifact::write_file_atomically(path, lowering::profile_json(p), &error, input_paths()))
      return fail("--profile " + path + ": " + error);
    out() << "wrote the profile (" << p.nodes.size() << " statement" << (p.nodes.size() == 1 ? "" : "s") << ", "
          << attribution.launches << " profiled launch" << (attribution.launches == 1 ? "" : "es") << ") to " << path
          << "\n";
    return kExitOk;
  }

  // The NVIDIA kernel module's version ("580.159.04"), from /proc/driver/nvidia/version; "" where
  // it cannot be read (a container without it).
  static std::string nvidia_driver_version() {
    std::ifstream in("/proc/driver/nvidia/version");
    std::string line;
    if (!in || !std::getline(in, line)) return {};
    const size_t at = line.find("Kernel Module");
    if (at == std::string::npos) return {};
    std::istringstream words(line.substr(at + 13));
    std::string version;
    words >> version;
    return version;
  }
  // A file written for this rank: FILE, or FILE.rank<r> when there are several ranks.
  std::string rank_path(const std::string& path) const {
    return me_.world_size > 1 ? path + ".rank" + std::to_string(me_.rank) : path;
  }

  // A host-side phase for --trace, on CUPTI's clock.
  struct HostPhase {
    Runner* r;
    HostSlice s;
    HostPhase(Runner* runner, std::string category, std::string name) : r(runner) {
      if (!r->cupti_) return;
      s.category = std::move(category);
      s.name = std::move(name);
      s.start_ns = r->cupti_->now_ns();
    }
    ~HostPhase() {
      if (!r->cupti_) return;
      s.end_ns = r->cupti_->now_ns();
      r->cupti_->add_host_slice(std::move(s));
    }
    HostPhase(const HostPhase&) = delete;
    HostPhase& operator=(const HostPhase&) = delete;
  };

  // --nodes, --trace, --roofline: --repeat more launches under CUPTI's activity tracing, each
  // synchronized and its records taken; then the table, the trace and the roofline.
  int observe(orch::Executable& x, const orch::fb::Pipeline& fb, cudaStream_t stream, const Summary& launch,
              const cudaDeviceProp& prop) {
    std::string error;
    const std::string flag = observe_flag();
    std::vector<std::vector<NodeRecord>> launches;
    auto launch_and_wait = [&](std::string* why) {
      orch::Status s = x.launch(stream);
      if (!s) {
        *why = s.error().to_string();
        return false;
      }
      cudaError_t e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) {
        *why = orch::cuda_error(e, "a launch failed on the GPU").to_string();
        return false;
      }
      if (orch::Status d = x.device_status(); !d) {
        *why = d.error().to_string();
        return false;
      }
      return true;
    };
    cupti_->record_launches(true);
    if (trace_gpu_) {
      phase_ = "the profiled launches (--nodes, --trace, --roofline)";
      if (!cupti_->enable_activity(&error)) return fail(flag + ": " + error);
      for (unsigned i = 0; i < o_.repeat; ++i) {
        HostPhase h(this, "launch", "profiled launch " + std::to_string(i + 1));
        if (!launch_and_wait(&error)) return fail(error);
        launches.push_back(cupti_->take(&error));
        if (!error.empty()) return fail(flag + ": " + error);
        if (cupti_->debug()) cupti_->debug_line("\n" + describe_records(launches.back(), i, cupti_->ids(), *sites_));
      }
      if (cupti_->debug()) cupti_->debug_line("ids after the launches: " + cupti_->ids().summary());
    }
    const Attribution attribution = attribute(launches, cupti_->ids());
    if (o_.nodes)
      out() << format_node_table(*sites_, node_rows(attribution), launch, launches.size(), attribution.outside);
    if (!o_.profile.empty()) {
      const int rc = write_profile(fb, attribution, prop);
      if (rc != kExitOk) return rc;
    }

    if (!o_.roofline.empty()) {
      RooflineReport report;
      // Measured counters: one more launch under the range profiler, with the activity records
      // of the same launch to tell which node each range (each kernel, in the order they ran) is.
      std::map<int, std::pair<KernelCounters, size_t>> measured;  // site: summed counters, runs
      if (o_.declared_costs) {
        report.note = "counts as declared with `cost` (--declared-costs)";
      } else {
        size_t kernels = 0;
        for (const auto& l : launches) {
          size_t k = 0;
          for (const NodeRecord& r : l) k += r.kind == NodeRecord::Kind::Kernel;
          kernels = std::max(kernels, k);
        }
        phase_ = "the range profiler's launch (--roofline)";
        HostPhase h(this, "launch", "range profiler launch (--roofline)");
        // A launch that fails is an error of the run, not of the profiler.
        std::string launch_error;
        auto profiled_launch = [&](std::string* why) {
          if (launch_and_wait(why)) return true;
          launch_error = *why;
          return false;
        };
        // With the activity records of the same launch, which say which node each range is.
        std::string why;
        std::vector<KernelCounters> ranges;
        bool profiled = false;
        {
          auto profiler = RangeProfiler::open(*cupti_, o_.device, kernels + 64, &why);
          profiled = profiler && profiler->profile(profiled_launch, &ranges, &why);
        }
        if (!launch_error.empty()) return fail("--roofline: " + launch_error);
        std::vector<NodeRecord> records = cupti_->take(&error);
        bool ok = profiled && error.empty();
        if (profiled && !error.empty()) why = error;
        error.clear();
        if (ok) {
          ok = match_ranges(records, ranges, &measured, &why);
        } else if (!profiled) {
          // CUPTI may refuse to profile while it traces. Without the records, a launch of one
          // kernel node is still unambiguous: every profiled launch ran the same single kernel.
          int only = -2;
          for (uint32_t l = 0; l < launches.size() && only != -1; ++l) {
            int site = -2, count = 0;
            for (const Attributed& a : attribution.records)
              if (a.launch == l && a.record.kind == NodeRecord::Kind::Kernel) {
                ++count;
                site = a.site;
              }
            only = count == 1 && site >= 0 && (only == -2 || only == site) ? site : -1;
          }
          if (only >= 0) {
            cupti_->disable_activity();
            std::string again;
            auto profiler = RangeProfiler::open(*cupti_, o_.device, 64, &again);
            std::vector<KernelCounters> alone;
            if (profiler && profiler->profile(profiled_launch, &alone, &again) && alone.size() == 1) {
              measured[only] = {alone[0], 1};
              ok = true;
            } else if (profiler && again.empty()) {
              again = std::to_string(alone.size()) + " ranges for a launch of one kernel";
            }
            if (!launch_error.empty()) return fail("--roofline: " + launch_error);
            if (!ok) why += "; without tracing: " + again;
          }
        }
        report.note = ok ? "bytes and FLOPs measured by CUPTI's range profiler (one more launch, kernels replayed)"
                         : "CUPTI could not measure bytes and FLOPs (" + why + "): counts as declared with `cost`";
        // The launch may have failed in ways that leave the GPU unusable: check before going on.
        if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
          return fail("--roofline: the range profiler's launch failed on the GPU: " + cuda_text(e));
        (void)cudaGetLastError();
      }
      report.peaks = peaks_for(prop);
      CostLeaf params = [&](const expr::Instr& in) -> std::optional<double> {
        switch (in.kind) {
          case expr::InstrKind::Param:
            if (fb.params() && in.ref >= 0 && static_cast<uint32_t>(in.ref) < fb.params()->size())
              if (auto v = x.param_as_double(fb.params()->Get(static_cast<uint32_t>(in.ref))->name()->string_view()))
                return *v;
            return std::nullopt;
          case expr::InstrKind::Rank: return static_cast<double>(me_.rank);
          case expr::InstrKind::WorldSize: return static_cast<double>(me_.world_size);
          case expr::InstrKind::FamilyIndex:
          case expr::InstrKind::DeviceScalar:
          case expr::InstrKind::Const:
          case expr::InstrKind::Operator: break;
        }
        return std::nullopt;
      };
      build_points(fb, attribution, measured, params, &report);
      out() << format_roofline(report);
      const std::string path = rank_path(o_.roofline);
      if (!orch::artifact::write_file_atomically(path, roofline_svg(report), &error))
        return fail("--roofline " + path + ": " + error);
      out() << "wrote the roofline (" << report.points.size() << " point" << (report.points.size() == 1 ? "" : "s")
            << ") to " << path << "\n";
    }
    cupti_->disable_activity();

    if (!o_.trace.empty()) {
      TraceInput in;
      in.sites = sites_.get();
      in.pipeline = fb.name()->str();
      in.device = std::string(prop.name) + " (device " + std::to_string(o_.device) + ")";
      in.rank = me_.rank;
      in.world_size = me_.world_size;
      in.gpu = trace_gpu_ ? &attribution : nullptr;
      in.host = cupti_->host_slices();
      in.notes = notes_;
      in.notes.push_back("timed launches (CUDA events, not traced): median " + format_ms(launch.median) + ", p90 " +
                         format_ms(launch.p90) + " over " + std::to_string(launch.count));
      const std::string path = rank_path(o_.trace);
      if (!orch::artifact::write_file_atomically(path, trace_json(in), &error))
        return fail("--trace " + path + ": " + error);
      out() << "wrote the trace (" << launches.size() << " profiled launch" << (launches.size() == 1 ? "" : "es") << ", "
            << attribution.records.size() << " GPU records, " << in.host.size() << " host phases) to " << path
            << (trace_gpu_ ? "" : " (host side only: " + notes_.front() + ")") << "\n";
    }
    return kExitOk;
  }

  // The ranges of the range profiler's launch, in the order the kernels ran, against the kernel
  // records of the same launch in start order. Only when the counts agree is each range given to
  // a node; CUDA's memset kernels (fills) may or may not be ranges, so both are tried.
  bool match_ranges(const std::vector<NodeRecord>& records, const std::vector<KernelCounters>& ranges,
                    std::map<int, std::pair<KernelCounters, size_t>>* measured, std::string* error) const {
    std::vector<const NodeRecord*> all, without_memsets;
    for (const NodeRecord& r : records)
      if (r.kind == NodeRecord::Kind::Kernel && r.end_ns > r.start_ns) all.push_back(&r);
    std::stable_sort(all.begin(), all.end(),
                     [](const NodeRecord* a, const NodeRecord* b) { return a->start_ns < b->start_ns; });
    for (const NodeRecord* r : all)
      if (r->name != "memset8" && r->name != "memset16" && r->name != "memset32") without_memsets.push_back(r);
    const std::vector<const NodeRecord*>* chosen = ranges.size() == all.size()               ? &all
                                                   : ranges.size() == without_memsets.size() ? &without_memsets
                                                                                             : nullptr;
    if (!chosen || ranges.empty()) {
      *error = "its range profiler reported " + std::to_string(ranges.size()) +
               " kernels and its trace of the same launch " + std::to_string(all.size()) +
               ", so which kernel each measurement belongs to is not known";
      return false;
    }
    for (size_t i = 0; i < ranges.size(); ++i) {
      const int site = cupti_->ids().find(*(*chosen)[i]).site;
      if (site < 0) continue;
      auto& [sum, runs] = (*measured)[site];
      sum.dram_bytes += ranges[i].dram_bytes;
      for (int p = 0; p < 3; ++p) sum.flops[p] += ranges[i].flops[p];
      sum.duration_ns += ranges[i].duration_ns;
      ++runs;
    }
    return true;
  }

  Peaks peaks_for(const cudaDeviceProp& prop) {
    Peaks p;
    p.device = prop.name;
    const std::string target = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
    DiagnosticEngine diags;
    auto profile = load_target_profile(target, target_search_dirs(), SourceRange{}, diags);
    if (!profile) {
      p.source = "no target profile " + target;
      return p;
    }
    const DevicePeaks* d = find_device_peaks(*profile, prop.name);
    if (!d) {
      p.source = "targets/" + target + ".yaml lists no peaks for " + std::string(prop.name);
      return p;
    }
    p.dram_bytes_per_s = static_cast<double>(d->dram_bytes_per_s);
    p.flops[0] = static_cast<double>(d->f16_flops_per_s);
    p.flops[1] = static_cast<double>(d->f32_flops_per_s);
    p.flops[2] = static_cast<double>(d->f64_flops_per_s);
    p.source = "targets/" + target + ".yaml: " + d->source;
    return p;
  }

  // One point per kernel node of the .orch file (kernels orchc writes are left out) that ran.
  void build_points(const orch::fb::Pipeline& fb, const Attribution& a,
                    const std::map<int, std::pair<KernelCounters, size_t>>& measured, const CostLeaf& params,
                    RooflineReport* r) const {
    const SiteTable& t = *sites_;
    for (size_t i = 0; i < t.size(); ++i) {
      const Site& site = t[static_cast<int>(i)];
      if (orch::artifact::op_kind(*site.node) != orch::artifact::NodeKind::Kernel || site.generated) continue;
      std::vector<double> runs;
      for (const Attributed& x : a.records)
        if (x.site == static_cast<int>(i)) runs.push_back(static_cast<double>(x.record.end_ns - x.record.start_ns) / 1e9);
      const std::string kernel = fb.kernels()->Get(site.node->body_as_KernelOp()->kernel())->name()->str();
      if (runs.empty()) {
        r->skipped.push_back(site.name + ": did not run in the profiled launches");
        continue;
      }
      RooflinePoint p;
      p.name = site.name;
      p.place = site.place;
      p.kernel = kernel;
      p.seconds = summarize(runs).median;
      p.runs = a.launches ? (runs.size() + a.launches - 1) / a.launches : 1;
      auto m = measured.find(static_cast<int>(i));
      if (m != measured.end() && m->second.second > 0) {
        const double n = static_cast<double>(m->second.second);
        p.source = RooflinePoint::Source::Measured;
        p.bytes = m->second.first.dram_bytes / n;
        int best = 1;  // f32 unless another precision did more
        for (int q = 0; q < 3; ++q)
          if (m->second.first.flops[q] > m->second.first.flops[best]) best = q;
        p.precision = static_cast<Precision>(best);
        p.flops = m->second.first.flops[best] / n;
        r->points.push_back(std::move(p));
        continue;
      }
      CostLeaf leaf = [&](const expr::Instr& in) -> std::optional<double> {
        if (in.kind == expr::InstrKind::FamilyIndex) return site.member >= 0 ? std::optional<double>(site.member) : std::nullopt;
        return params(in);
      };
      const DeclaredCost c = declared_cost(fb, *site.node, leaf);
      if (!c.error.empty()) {
        r->skipped.push_back(site.name + ": " + c.error);
        continue;
      }
      if (!c.has_bytes || !c.has_flops) {
        r->skipped.push_back(site.name + ": no measured counters, and kernel `" + kernel + "` declares " +
                             (c.has_bytes ? "no `flops`" : c.has_flops ? "no `bytes`" : "no `cost`") +
                             " (e.g. `cost bytes 12 * n, flops 2 * n` on its declaration)");
        continue;
      }
      p.source = RooflinePoint::Source::Declared;
      p.bytes = c.bytes;
      p.flops = c.flops;
      p.precision = c.flops_type == orch::fb::ScalarType::F64   ? Precision::F64
                    : c.flops_type == orch::fb::ScalarType::F16 ? Precision::F16
                                                                : Precision::F32;
      r->points.push_back(std::move(p));
    }
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
  // --nodes, --trace, --roofline.
  std::unique_ptr<SiteTable> sites_;
  std::unique_ptr<Cupti> cupti_;
  bool trace_gpu_ = true;  // the GPU work can be traced (no device-launched graphs)
  std::vector<std::string> notes_;
  // What the run is doing, for --timeout's message (read by the watchdog's thread).
  std::atomic<const char*> phase_{"reading the pipeline"};
  // --timing.
  std::chrono::steady_clock::time_point timing_mark_;
  double load_ms_ = 0, instantiate_ms_ = 0, first_launch_ms_ = -1;
};

}  // namespace

int run(Options& options, std::ostream& out, std::ostream& err) {
  return Runner(options, out, err).run();
}

}  // namespace orch::run
