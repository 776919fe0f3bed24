// libFuzzer target for the C API: each input is a program of up to 96 calls, every orch_*
// function (orch_artifact_* and the bindings' helpers included) with arguments drawn from the input: live, destroyed, foreign, NULL and made-up
// handles; names from the pipelines, made-up and NULL; values of every range; pipelines from the
// input's bytes, the sample artifact, absurd sizes, and paths that are directories, FIFOs,
// devices and missing files. No GPU is needed: without one, loading stops at "no CUDA device"
// after the artifact is verified, and everything before that is exercised. Fails on any crash,
// sanitizer report, leak, and on a broken rule of orch.h (an error code out of range, an `out`
// left set after an error, a message that is empty or longer than one line, a destroyed handle
// that still works). scripts/fuzz-runtime builds and runs it.
//
// Safe on a machine with a GPU too: bound pointers and communicators are never ones NCCL or a
// kernel would dereference (communicators are NULL, unique ids all zeros, which instantiate
// refuses before NCCL sees them).
#include <fuzzer/FuzzedDataProvider.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/orch.h"

namespace {

std::string g_dir;           // paths of every kind, made once
std::string g_sample;        // a valid pipeline.bin
std::vector<std::string> g_paths;

void fail(const char* why) {
  std::fprintf(stderr, "c_api_fuzzer: broken rule: %s\n", why);
  __builtin_trap();
}

// Destroyed handles stay in these lists: later calls must recognize them.
struct State {
  std::vector<orch_pipeline*> pipelines;
  std::vector<orch_bindings*> bindings;
  std::vector<orch_executable*> executables;
  std::vector<orch_artifact*> artifacts;
  std::vector<orch_error*> errors;  // live and destroyed
  std::vector<orch_error*> live_errors;
  char host[256] = {};  // memory a binding may name (never reached without a GPU)
};

// Checks an error a call returned and keeps it for later calls.
void take(State& s, orch_error* e) {
  if (!e) return;
  const int code = orch_error_code(e);
  if (code < ORCH_ERROR_INVALID_ARGUMENT || code > ORCH_ERROR_BUFFERS_OVERLAP) fail("error code out of range");
  const char* m = orch_error_message(e);
  if (!m || !*m) fail("empty error message");
  if (std::strchr(m, '\n')) fail("error message longer than one line");
  if (!orch_error_where(e)) fail("null where");
  s.errors.push_back(e);
  s.live_errors.push_back(e);
}

template <class T>
T* pick(FuzzedDataProvider& d, const std::vector<T*>& live, State& s) {
  switch (d.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return nullptr;
    case 1: {  // a handle of another kind
      if (!s.bindings.empty()) return reinterpret_cast<T*>(s.bindings[d.ConsumeIntegralInRange<size_t>(0, s.bindings.size() - 1)]);
      if (!s.errors.empty()) return reinterpret_cast<T*>(s.errors[d.ConsumeIntegralInRange<size_t>(0, s.errors.size() - 1)]);
      return nullptr;
    }
    case 2: return reinterpret_cast<T*>(d.ConsumeIntegral<uintptr_t>());  // made up
    default:
      if (live.empty()) return nullptr;
      return live[d.ConsumeIntegralInRange<size_t>(0, live.size() - 1)];
  }
}

const char* name(FuzzedDataProvider& d, std::string& keep) {
  static const char* const known[] = {"n", "a", "x", "y", "tol", "mode", "u", "v", "u_host", "flag", "counts", "world", "",
                                      "x_host"};
  switch (d.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return nullptr;
    case 1: keep = d.ConsumeRandomLengthString(24); return keep.c_str();
    default: return known[d.ConsumeIntegralInRange<size_t>(0, sizeof known / sizeof known[0] - 1)];
  }
}

size_t size(FuzzedDataProvider& d) {
  switch (d.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return 0;
    case 1: return std::numeric_limits<size_t>::max() - d.ConsumeIntegralInRange<size_t>(0, 8);
    case 2: return d.ConsumeIntegralInRange<size_t>(0, 1 << 20);
    default: return d.ConsumeIntegral<size_t>();
  }
}

void* pointer(FuzzedDataProvider& d, State& s) {
  switch (d.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return nullptr;
    case 1: return s.host;
    default: return reinterpret_cast<void*>(d.ConsumeIntegral<uintptr_t>());
  }
}

void step(FuzzedDataProvider& d, State& s) {
  std::string k1, k2;
  switch (d.ConsumeIntegralInRange<int>(0, 36)) {
    case 0: {
      orch_bindings* b = orch_bindings_create();
      if (b) s.bindings.push_back(b);
      break;
    }
    case 1: orch_bindings_destroy(pick(d, s.bindings, s)); break;
    case 2: take(s, orch_bindings_param_u32(pick(d, s.bindings, s), name(d, k1), d.ConsumeIntegral<uint32_t>())); break;
    case 3: take(s, orch_bindings_param_i32(pick(d, s.bindings, s), name(d, k1), d.ConsumeIntegral<int32_t>())); break;
    case 4: take(s, orch_bindings_param_u64(pick(d, s.bindings, s), name(d, k1), d.ConsumeIntegral<uint64_t>())); break;
    case 5: take(s, orch_bindings_param_i64(pick(d, s.bindings, s), name(d, k1), d.ConsumeIntegral<int64_t>())); break;
    case 6: take(s, orch_bindings_param_f32(pick(d, s.bindings, s), name(d, k1), d.ConsumeFloatingPoint<float>())); break;
    case 7: take(s, orch_bindings_param_f64(pick(d, s.bindings, s), name(d, k1), d.ConsumeFloatingPoint<double>())); break;
    case 8: take(s, orch_bindings_buffer(pick(d, s.bindings, s), name(d, k1), pointer(d, s), size(d))); break;
    case 9: take(s, orch_bindings_allow_overlap(pick(d, s.bindings, s), name(d, k1), name(d, k2))); break;
    case 10:
      take(s, orch_bindings_comm(pick(d, s.bindings, s), name(d, k1), nullptr, d.ConsumeIntegral<int>(),
                                 d.ConsumeIntegral<int>()));
      break;
    case 11: {
      static const char zeros[ORCH_NCCL_UNIQUE_ID_BYTES] = {};
      take(s, orch_bindings_comm_from_unique_id(pick(d, s.bindings, s), name(d, k1), d.ConsumeBool() ? zeros : nullptr,
                                                d.ConsumeIntegral<int>(), d.ConsumeIntegral<int>()));
      break;
    }
    case 12: take(s, orch_nccl_unique_id(nullptr)); break;  // a real id would start NCCL's bootstrap
    case 13: {
      orch_pipeline* p = reinterpret_cast<orch_pipeline*>(1);
      const bool with_out = d.ConsumeIntegralInRange<int>(0, 7) != 0;
      const char* path = nullptr;
      if (d.ConsumeIntegralInRange<int>(0, 7) != 0) path = g_paths[d.ConsumeIntegralInRange<size_t>(0, g_paths.size() - 1)].c_str();
      orch_error* e = orch_pipeline_load(path, with_out ? &p : nullptr);
      if (with_out && e && p) fail("out set after an error");
      if (with_out && !e) s.pipelines.push_back(p);
      take(s, e);
      break;
    }
    case 14: {
      std::vector<uint8_t> bytes;
      const void* data = nullptr;
      size_t n = 0;
      switch (d.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: data = g_sample.data(); n = g_sample.size(); break;
        case 1:
          bytes = d.ConsumeBytes<uint8_t>(d.ConsumeIntegralInRange<size_t>(0, 4096));
          data = bytes.data();
          n = bytes.size();
          break;
        case 2: {  // the sample with a few bytes changed
          bytes.assign(g_sample.begin(), g_sample.end());
          for (int i = d.ConsumeIntegralInRange<int>(1, 4); i > 0; --i)
            bytes[d.ConsumeIntegralInRange<size_t>(0, bytes.size() - 1)] ^= d.ConsumeIntegral<uint8_t>();
          data = bytes.data();
          n = bytes.size();
          break;
        }
        default: break;
      }
      // Sizes past what `data` holds only where they are refused before anything is read.
      if (d.ConsumeBool()) n = d.ConsumeBool() ? std::numeric_limits<size_t>::max() : orch::artifact::kMaxFileSize + 1;
      else if (n > 0) n = d.ConsumeIntegralInRange<size_t>(0, n);
      orch_pipeline* p = reinterpret_cast<orch_pipeline*>(1);
      const bool with_out = d.ConsumeIntegralInRange<int>(0, 7) != 0;
      orch_error* e = orch_pipeline_load_from_memory(data, n, with_out ? &p : nullptr);
      if (with_out && e && p) fail("out set after an error");
      if (with_out && !e) s.pipelines.push_back(p);
      take(s, e);
      break;
    }
    case 15:
      if (!orch_pipeline_name(pick(d, s.pipelines, s))) fail("null pipeline name");
      break;
    case 16: orch_pipeline_destroy(pick(d, s.pipelines, s)); break;
    case 17: {
      orch_executable* x = reinterpret_cast<orch_executable*>(1);
      const bool with_out = d.ConsumeIntegralInRange<int>(0, 7) != 0;
      orch_error* e = orch_instantiate(pick(d, s.pipelines, s), pick(d, s.bindings, s), nullptr, with_out ? &x : nullptr);
      if (with_out && e && x) fail("out set after an error");
      if (with_out && !e) s.executables.push_back(x);
      take(s, e);
      break;
    }
    case 18: take(s, orch_launch(pick(d, s.executables, s), nullptr)); break;
    case 19: take(s, orch_set_param_u32(pick(d, s.executables, s), name(d, k1), d.ConsumeIntegral<uint32_t>())); break;
    case 20: take(s, orch_set_param_i32(pick(d, s.executables, s), name(d, k1), d.ConsumeIntegral<int32_t>())); break;
    case 21: take(s, orch_set_param_u64(pick(d, s.executables, s), name(d, k1), d.ConsumeIntegral<uint64_t>())); break;
    case 22: take(s, orch_set_param_i64(pick(d, s.executables, s), name(d, k1), d.ConsumeIntegral<int64_t>())); break;
    case 23: take(s, orch_set_param_f32(pick(d, s.executables, s), name(d, k1), d.ConsumeFloatingPoint<float>())); break;
    case 24: take(s, orch_set_param_f64(pick(d, s.executables, s), name(d, k1), d.ConsumeFloatingPoint<double>())); break;
    case 25: take(s, orch_rebind(pick(d, s.executables, s), name(d, k1), pointer(d, s), size(d))); break;
    case 26: {
      orch_executable* x = pick(d, s.executables, s);
      (void)orch_executable_buffer(x, name(d, k1));
      (void)orch_executable_comm(x, name(d, k2));
      (void)orch_executable_rank(x);
      (void)orch_executable_world_size(x);
      break;
    }
    case 27: orch_executable_destroy(pick(d, s.executables, s)); break;
    case 28: {
      orch_error* e = pick(d, s.errors, s);
      (void)orch_error_code(e);
      if (!orch_error_message(e) || !orch_error_where(e)) fail("null error text");
      (void)orch_error_cuda(e);
      break;
    }
    case 29: {
      orch_error* e = pick(d, s.errors, s);
      orch_error_destroy(e);
      // A destroyed error is recognized as dead (unless it is the preallocated one).
      if (e && orch_error_code(e) != ORCH_ERROR_INVALID_ARGUMENT && orch_error_code(e) != ORCH_ERROR_OUT_OF_MEMORY)
        fail("a destroyed error still has its code");
      break;
    }
    case 30: {  // destroy twice
      orch_bindings* b = pick(d, s.bindings, s);
      orch_bindings_destroy(b);
      orch_bindings_destroy(b);
      orch_error* e = orch_bindings_param_u32(b, "n", 1);
      if (!e) fail("a destroyed bindings still works");
      take(s, e);
      break;
    }
    case 31: {  // an artifact, described without a GPU: from the sample, the input's bytes, or a path
      orch_artifact* a = reinterpret_cast<orch_artifact*>(1);
      const bool with_out = d.ConsumeIntegralInRange<int>(0, 7) != 0;
      orch_error* e = nullptr;
      if (d.ConsumeBool()) {
        std::vector<uint8_t> bytes(g_sample.begin(), g_sample.end());
        if (d.ConsumeBool())
          for (int i = d.ConsumeIntegralInRange<int>(1, 4); i > 0; --i)
            bytes[d.ConsumeIntegralInRange<size_t>(0, bytes.size() - 1)] ^= d.ConsumeIntegral<uint8_t>();
        size_t n = d.ConsumeBool() ? bytes.size() : d.ConsumeIntegralInRange<size_t>(0, bytes.size());
        if (d.ConsumeIntegralInRange<int>(0, 7) == 0) n = orch::artifact::kMaxFileSize + 1;  // refused before reading
        e = orch_artifact_open(d.ConsumeIntegralInRange<int>(0, 7) ? bytes.data() : nullptr, n, with_out ? &a : nullptr);
      } else {
        const char* path = nullptr;
        if (d.ConsumeIntegralInRange<int>(0, 7) != 0) path = g_paths[d.ConsumeIntegralInRange<size_t>(0, g_paths.size() - 1)].c_str();
        e = orch_artifact_read(path, with_out ? &a : nullptr);
      }
      if (with_out && e && a) fail("out set after an error");
      if (with_out && !e) s.artifacts.push_back(a);
      take(s, e);
      break;
    }
    case 32: {
      orch_artifact* a = pick(d, s.artifacts, s);
      if (!orch_artifact_name(a) || !orch_artifact_describe(a)) fail("null artifact text");
      take(s, orch_artifact_check(a, pick(d, s.bindings, s)));
      break;
    }
    case 33: orch_artifact_destroy(pick(d, s.artifacts, s)); break;
    case 34: {
      orch_executable* x = pick(d, s.executables, s);
      (void)orch_executable_buffer_bytes(x, name(d, k1));
      orch_stats st;
      orch_error* e = orch_executable_stats(x, d.ConsumeBool() ? &st : nullptr);
      take(s, e);
      orch_pipeline* p = pick(d, s.pipelines, s);
      if (!orch_pipeline_image(p)) fail("null pipeline image");
      (void)orch_pipeline_device(p);
      break;
    }
    case 35: {  // never a stream CUDA would dereference: only the same one twice, or the null stream
      take(s, orch_stream_wait(nullptr, nullptr));
      int type = 0, device = 0;
      take(s, orch_memory_info(pointer(d, s), d.ConsumeBool() ? &type : nullptr, d.ConsumeBool() ? &device : nullptr));
      break;
    }
    default: {
      orch_executable* x = pick(d, s.executables, s);
      orch_executable_destroy(x);
      orch_error* e = orch_launch(x, nullptr);
      if (x && !e) fail("a destroyed executable still launches");
      take(s, e);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/orch-c-api-fuzz-XXXXXX";
  if (!mkdtemp(tmpl)) std::abort();
  g_dir = tmpl;
  g_sample = orch::artifact::sample_artifact();
  std::ofstream(g_dir + "/sample.bin", std::ios::binary) << g_sample;
  std::ofstream(g_dir + "/empty.bin").close();
  ::mkfifo((g_dir + "/fifo").c_str(), 0600);
  ::mkdir((g_dir + "/dir").c_str(), 0700);
  g_paths = {g_dir + "/sample.bin", g_dir + "/empty.bin", g_dir + "/fifo", g_dir + "/dir", g_dir,
             g_dir + "/missing.bin", "/dev/null", "/dev/zero", "/proc/self/status", ""};
  std::atexit([] {
    std::remove((g_dir + "/sample.bin").c_str());
    std::remove((g_dir + "/empty.bin").c_str());
    std::remove((g_dir + "/fifo").c_str());
    ::rmdir((g_dir + "/dir").c_str());
    ::rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size_in) {
  FuzzedDataProvider d(data, size_in);
  State s;
  for (int i = 0; i < 96 && d.remaining_bytes() > 0; ++i) step(d, s);
  // Everything made is destroyed, twice: nothing may leak, nothing may crash.
  for (int twice = 0; twice < 2; ++twice) {
    for (orch_executable* x : s.executables) orch_executable_destroy(x);
    for (orch_pipeline* p : s.pipelines) orch_pipeline_destroy(p);
    for (orch_bindings* b : s.bindings) orch_bindings_destroy(b);
    for (orch_artifact* a : s.artifacts) orch_artifact_destroy(a);
    for (orch_error* e : s.live_errors) orch_error_destroy(e);
  }
  return 0;
}
