#include "tools/orch_run/runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>

#include "artifact/artifact.h"
#include "orch/runtime.h"
#include "tools/orch_run/nodes.h"

namespace orch::run {

namespace {

// Reads a whole file into 8-byte aligned storage (the artifact reader needs the alignment).
bool read_file(const std::string& path, std::vector<uint64_t>* storage, size_t* size,
               std::string* error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  const std::streamoff n = in.tellg();
  if (n < 0) {
    *error = "cannot read";
    return false;
  }
  storage->assign((static_cast<size_t>(n) + 7) / 8, 0);
  in.seekg(0);
  if (n > 0 && !in.read(reinterpret_cast<char*>(storage->data()), n)) {
    *error = std::string("cannot read: ") + std::strerror(errno);
    return false;
  }
  *size = static_cast<size_t>(n);
  return true;
}

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
    // 1. The artifact, checked exactly as the runtime checks it, with no GPU involved.
    std::string error;
    if (!read_file(o_.pipeline, &storage_, &size_, &error)) return fail(o_.pipeline + ": " + error);
    const auto opened =
        orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(storage_.data()), size_);
    if (!opened.ok()) return fail(o_.pipeline + ": " + opened.error);
    const orch::fb::Pipeline& fb = *opened.pipeline;
    if (o_.list) {
      out_ << list_pipeline(fb);
      return kExitOk;
    }

    // 2. Names and values against the declarations; the fill files.
    error = check_against_pipeline(&o_, fb);
    if (!error.empty()) return fail(error);
    if (fb.comms() && fb.comms()->size() > 0)
      return fail("pipeline " + fb.name()->str() + " has communicator `" +
                  fb.comms()->Get(0)->name()->str() +
                  "`: orch-run runs single-process pipelines only (collectives need NCCL "
                  "communicators that the application creates and binds)");
    if (o_.nodes && uses_device_graphs(fb))
      return fail("--nodes: pipeline " + fb.name()->str() +
                  " launches graphs from the device, and its launches fail while CUPTI traces "
                  "them (seen with driver 580, CUDA 13.0); per-node times are not available "
                  "for it, run without --nodes");
    for (const FillArg& f : o_.fills)
      if (f.kind == FillArg::Kind::File) {
        std::vector<uint64_t> data;
        size_t n = 0;
        if (!read_file(f.text, &data, &n, &error))
          return fail("--fill " + f.name + "=" + f.spec + ": " + error);
        file_data_[f.name] = {std::move(data), n};
      }

    // 3. The GPU.
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
    auto pipeline = orch::Pipeline::load(o_.pipeline, load_options);
    if (!pipeline) return fail(pipeline.error());
    StreamOwner stream;
    if ((e = cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking)) != cudaSuccess)
      return fail("cannot create a stream: " + cuda_text(e));
    orch::Bindings bindings;
    for (const ParamArg& p : o_.params) bindings.set_param(p.name, p.parsed);
    auto exec = (*pipeline)->instantiate(bindings, stream.s);
    if (!exec) return fail(exec.error());
    orch::Executable& x = *exec.value();
    SyncOnExit sync_on_exit{stream.s};

    out_ << "pipeline " << (*pipeline)->name() << " on device " << o_.device << " ("
         << prop.name << ", sm_" << prop.major << prop.minor << "): " << (*pipeline)->image()
         << "\n";
    if (fb.params() && fb.params()->size() > 0) {
      out_ << "params:";
      for (const auto* p : *fb.params()) {
        auto v = x.param_as_double(p->name()->string_view());
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.9g", v ? *v : 0.0);
        out_ << " " << p->name()->str() << "=" << (v ? buf : "?");
      }
      out_ << "\n";
    }

    // 5. Fill.
    for (const FillArg& f : o_.fills) {
      const int rc = fill(x, f);
      if (rc != kExitOk) return rc;
    }

    // 6. Warm up, then time each launch with a pair of events.
    for (unsigned i = 0; i < o_.warmup; ++i) {
      orch::Status s = x.launch(stream.s);
      if (!s) return fail(s.error());
    }
    if ((e = cudaStreamSynchronize(stream.s)) != cudaSuccess)
      return fail("a warm-up launch failed on the GPU: " + cuda_text(e));

    std::vector<double> ms;
    ms.reserve(o_.repeat);
    constexpr unsigned kBatch = 1024;  // events are reused, batch by batch
    std::vector<EventOwner> starts(std::min(o_.repeat, kBatch)), stops(starts.size());
    for (size_t i = 0; i < starts.size(); ++i)
      if ((e = cudaEventCreate(&starts[i].e)) != cudaSuccess ||
          (e = cudaEventCreate(&stops[i].e)) != cudaSuccess)
        return fail("cannot create CUDA events: " + cuda_text(e));
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
    out_ << "launches: " << o_.repeat << " timed after " << o_.warmup << " warm-up\n"
         << "per launch (CUDA events): median " << format_ms(s.median) << ", p90 "
         << format_ms(s.p90) << ", min " << format_ms(s.min) << ", max " << format_ms(s.max)
         << ", mean " << format_ms(s.mean) << "\n"
         << "wall clock: " << format_ms(wall_ms) << " for " << o_.repeat << " launches ("
         << format_ms(wall_ms / o_.repeat) << " per launch, event records included)\n";
    out_.flush();
    if (o_.nodes) {
      const int rc = profile_nodes(x, fb, stream.s, s);
      if (rc != kExitOk) return rc;
    }

    // 7. Dump.
    for (const DumpArg& d : o_.dumps) {
      const int rc = dump(x, d);
      if (rc != kExitOk) return rc;
    }
    // Everything launched has finished (synchronized above), so the Executable may go.
    return kExitOk;
  }

 private:
  int fail(const std::string& message) {
    err_ << "orch-run: " << message << "\n";
    return kExitError;
  }
  int fail(const orch::Error& error) { return fail(error.to_string()); }

  // --nodes: --repeat more launches, each synchronized and its CUPTI records taken.
  int profile_nodes(orch::Executable& x, const orch::fb::Pipeline& fb, cudaStream_t stream,
                    const Summary& launch) {
    std::string error;
    auto profiler = NodeProfiler::create(&error);
    if (!profiler) return fail("--nodes: " + error);
    std::vector<std::vector<NodeRecord>> launches;
    for (unsigned i = 0; i < o_.repeat; ++i) {
      orch::Status s = x.launch(stream);
      if (!s) return fail(s.error());
      cudaError_t e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return fail("a launch failed on the GPU: " + cuda_text(e));
      launches.push_back(profiler->take(&error));
      if (!error.empty()) return fail("--nodes: " + error);
    }
    const auto rows = aggregate_nodes(launches);
    out_ << format_node_table(fb, rows, [&](const std::string& name) { return x.buffer_bytes(name); },
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
      case FillArg::Kind::Random:
        host = random_bytes(f.type, count, o_.seed, f.name, f.range);
        src = host.data();
        break;
      case FillArg::Kind::Constant:
        host = repeat_element(f.element, count);
        src = host.data();
        break;
      case FillArg::Kind::File: {
        const auto& [data, n] = file_data_.at(f.name);
        if (n != bytes)
          return fail("--fill " + f.name + "=" + f.spec + ": the file has " + std::to_string(n) +
                      " bytes; `" + f.name + "` is " + type_name(f.type) + "[" +
                      std::to_string(count) + "] = " + std::to_string(bytes) + " bytes");
        src = data.data();
        break;
      }
    }
    if (bytes == 0) return kExitOk;
    cudaError_t e = cudaMemcpy(ptr, src, bytes, cudaMemcpyDefault);
    if (e != cudaSuccess) return fail("--fill " + f.name + ": cudaMemcpy: " + cuda_text(e));
    return kExitOk;
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
    if (!orch::artifact::write_file_atomically(d.path, data, &error))
      return fail("--dump " + d.name + "=" + d.path + ": " + error);
    out_ << "dumped " << d.name << " (" << format_bytes(bytes) << ") to " << d.path << "\n";
    return kExitOk;
  }

  Options& o_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<uint64_t> storage_;
  size_t size_ = 0;
  std::map<std::string, std::pair<std::vector<uint64_t>, size_t>> file_data_;
};

}  // namespace

int run(Options& options, std::ostream& out, std::ostream& err) {
  return Runner(options, out, err).run();
}

}  // namespace orch::run
