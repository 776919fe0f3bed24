// `orchc --emit=cuda` run on the GPU: every example and bundled pipeline is ejected, built
// with nvcc (-arch=sm_90 -rdc=true -lcudadevrt, and NCCL for a pipeline with a `comm`), and its
// main's harness runs on random inputs that respect the example's meaning; orch-run (the
// runtime) runs the same artifact on the same inputs and params, and every buffer must come out
// with the same bytes. Two buffers are compared otherwise, because their bytes legitimately
// differ between two runs of one program: moe's `order` (route hands out slots with shared-memory
// atomics, in scheduling order: each expert's slice is compared as a set) and bucket_dispatch's
// `total` (a float sum of atomicAdds in scheduling order: within 1e-3 relative).
//
// The CPU case builds one ejected program here (nvcc needs no GPU) and checks what its harness
// refuses before touching the GPU.
//
// nvcc: $ORCH_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc. NCCL: the library
// the runtime loads ($ORCH_NCCL_LIBRARY, else libnccl.so.2 through the dynamic loader) and
// nccl.h beside it (../include), in $CUDA_HOME/include or /usr/include; without them the
// pipelines with a `comm` are skipped, with the reason.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "artifact/artifact.h"
#include "artifact/expr_code.h"
#include "tools/orch_run/values.h"
#include "tools/tests/test_util.h"

using namespace orch::tools_test;

namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string cuda_home() { return env_or("CUDA_HOME", "/usr/local/cuda"); }
std::string nvcc_path() { return env_or("ORCH_NVCC", cuda_home() + "/bin/nvcc"); }

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Shell {
  int rc = -1;
  std::string output;  // stdout and stderr
};

// Runs `cmd` with sh (its own redirections kept), its output in a file beside `log_base`.
Shell shell(const std::string& cmd, const std::string& log_base) {
  const std::string log = log_base + ".log";
  Shell r;
  const int status = std::system(("(" + cmd + ") >" + quote(log) + " 2>&1").c_str());
  r.rc = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = "$ " + cmd + "\n" + read_all(log);
  return r;
}

// NCCL for a pipeline with a `comm`: where its header and library are, or why not.
struct Nccl {
  std::string include_dir, library, why_not;
};

const Nccl& nccl() {
  static const Nccl found = [] {
    Nccl n;
    n.library = env_or("ORCH_NCCL_LIBRARY", "");
    if (n.library.empty()) {
      // The library the runtime would load: ask the dynamic loader where it found it.
      if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL)) {
        Dl_info info{};
        void* sym = dlsym(h, "ncclGetVersion");
        std::error_code ec;
        if (sym && dladdr(sym, &info) && info.dli_fname) n.library = fs::canonical(info.dli_fname, ec).string();
      }
    }
    if (n.library.empty() || !fs::exists(n.library)) {
      n.why_not = "no NCCL library (set ORCH_NCCL_LIBRARY, or put libnccl.so.2 where the loader finds it)";
      return n;
    }
    const fs::path lib_dir = fs::path(n.library).parent_path();
    for (const fs::path& dir : {lib_dir.parent_path() / "include", fs::path(cuda_home()) / "include",
                                fs::path("/usr/include"), fs::path("/usr/local/include")})
      if (fs::exists(dir / "nccl.h")) {
        n.include_dir = dir.string();
        break;
      }
    if (n.include_dir.empty()) n.why_not = "no nccl.h beside " + n.library + " or in the usual places";
    return n;
  }();
  return found;
}

struct Ejected {
  std::string exe;     // empty when not built
  std::string log;     // orchc's and nvcc's output
  std::string skipped; // why it was not built, when that is not a failure
};

// Ejects `orch_file` and builds it with nvcc into `dir`.
Ejected eject_and_build(const std::string& orch_file, const std::string& dir) {
  Ejected e;
  const std::string stem = fs::path(orch_file).stem().string();
  const std::string cu = dir + "/" + stem + ".cu";
  Shell ej = shell(quote(orchc_path()) + " --emit=cuda " + quote(orch_file) + " >" + quote(cu), dir + "/" + stem + ".eject");
  e.log = ej.output;
  if (ej.rc != 0) return e;
  std::string extra;
  if (read_all(cu).find("#include <nccl.h>") != std::string::npos) {
    const Nccl& n = nccl();
    if (!n.why_not.empty()) {
      e.skipped = n.why_not;
      return e;
    }
    // -lnccl needs a libnccl.so: a link to the library in a folder of its own; the program
    // finds the library itself through its runpath.
    const std::string link_dir = dir + "/nccl-" + stem;
    fs::create_directories(link_dir);
    std::error_code ec;
    fs::remove(link_dir + "/libnccl.so", ec);
    fs::create_symlink(n.library, link_dir + "/libnccl.so");
    extra = " -I" + quote(n.include_dir) + " -L" + quote(link_dir) + " -lnccl -Xlinker -rpath=" +
            quote(fs::path(n.library).parent_path().string());
  }
  e.exe = dir + "/" + stem;
  Shell build = shell(quote(nvcc_path()) + " -arch=sm_90 -rdc=true " + quote(cu) + " -lcudadevrt" + extra +
                          " -o " + quote(e.exe),
                      dir + "/" + stem + ".nvcc");
  e.log += build.output;
  if (build.rc != 0) e.exe.clear();
  return e;
}

// Every example and bundled pipeline but those that use NVSHMEM (symmetric buffers), which
// orchc does not eject and the runtime does not load yet (issue 23).
std::vector<std::string> all_pipelines() {
  std::vector<std::string> out;
  // A line `buffer ... symmetric ...` declares one.
  auto symmetric = [](const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("buffer ", 0) == 0 && line.find(" symmetric") != std::string::npos) return true;
    return false;
  };
  for (const std::string& dir : {examples_dir(), pipelines_dir()})
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".orch") continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      if (!symmetric(text)) out.push_back(entry.path().string());
    }
  std::sort(out.begin(), out.end());
  return out;
}

// Every pipeline ejected and built once, a few nvcc at a time.
const std::map<std::string, Ejected>& ejected() {
  static const std::map<std::string, Ejected> built = [] {
    const std::string dir = temp_dir() + "/ejected";
    fs::create_directories(dir);
    const std::vector<std::string> files = all_pipelines();
    std::map<std::string, Ejected> out;
    const size_t workers = std::max(2u, std::min(8u, std::thread::hardware_concurrency()));
    for (size_t first = 0; first < files.size(); first += workers) {
      std::vector<std::future<Ejected>> running;
      for (size_t i = first; i < std::min(files.size(), first + workers); ++i)
        running.push_back(std::async(std::launch::async, eject_and_build, files[i], dir));
      for (size_t i = 0; i < running.size(); ++i)
        out[fs::path(files[first + i]).stem().string()] = running[i].get();
    }
    return out;
  }();
  return built;
}

std::string pipeline_path(const std::string& name) {
  for (const std::string& f : all_pipelines())
    if (fs::path(f).stem() == name) return f;
  return "";
}

// A buffer of the compiled pipeline, with its size for the params given.
struct BufferInfo {
  std::string name;
  orch::fb::ScalarType type = orch::fb::ScalarType::U8;
  size_t count = 0;
  bool host = false;
  // In the memory plan's arena: its bytes after a launch may be another buffer's, so there is
  // nothing to compare (docs/performance.md, "Memory: the memory plan").
  bool scratch = false;
};

std::vector<BufferInfo> buffers_of(const std::string& bin, const std::map<std::string, uint64_t>& params) {
  orch::artifact::FileBytes file;
  std::string error;
  REQUIRE_MESSAGE(orch::artifact::read_file(bin, orch::artifact::kMaxFileSize, &file, &error), error);
  auto opened = orch::artifact::open_pipeline(file.data(), file.size);
  REQUIRE_MESSAGE(opened.ok(), opened.error);
  const orch::fb::Pipeline& p = *opened.pipeline;
  std::vector<BufferInfo> out;
  std::vector<bool> in_arena(p.buffers()->size(), false);
  if (p.memory_plan() && p.memory_plan()->slots())
    for (const orch::fb::ArenaSlot* slot : *p.memory_plan()->slots()) in_arena[slot->buffer()] = true;
  for (uint32_t index = 0; index < p.buffers()->size(); ++index) {
    const orch::fb::Buffer* b = p.buffers()->Get(index);
    // The compiler's own buffers (an unrolled loop's guard slots, "orch.guard.N") are not the
    // pipeline's inputs or outputs; --emit=cuda, which does not patch user kernels, may not unroll.
    if (b->name()->str().rfind("orch.", 0) == 0) continue;
    BufferInfo info;
    info.name = b->name()->str();
    info.type = b->type();
    info.host = b->host();
    info.scratch = in_arena[index];
    info.count = 1;
    if (b->count()) {
      const auto leaf = [&](const orch::expr::Instr& in) -> std::optional<orch::expr::Value> {
        switch (in.kind) {
          case orch::expr::InstrKind::Param: {
            const orch::fb::Param& q = *p.params()->Get(static_cast<flatbuffers::uoffset_t>(in.ref));
            auto given = params.find(q.name()->str());
            if (given != params.end()) return orch::expr::Value::of_uint(in.type, given->second);
            REQUIRE_MESSAGE(q.has_default(), "param " << q.name()->str() << " has no default: give it");
            return orch::artifact::default_of(q);
          }
          case orch::expr::InstrKind::Rank: return orch::expr::Value::of_uint(in.type, 0);
          case orch::expr::InstrKind::WorldSize: return orch::expr::Value::of_uint(in.type, 1);
          case orch::expr::InstrKind::FamilyIndex:
          case orch::expr::InstrKind::DeviceScalar:
          case orch::expr::InstrKind::Const:
          case orch::expr::InstrKind::Operator: break;
        }
        return std::nullopt;
      };
      orch::expr::Evaluation v = orch::expr::evaluate(orch::artifact::to_expr(b->count()), leaf);
      REQUIRE_MESSAGE(v.known(), "the size of " << info.name << ": " << v.message);
      info.count = static_cast<size_t>(v.value.u64());
    }
    out.push_back(info);
  }
  return out;
}

using Bytes = std::vector<uint8_t>;

template <class T>
T element(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void set_element(Bytes& b, size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

// How one example runs: the params both sides get (integers), launches, variants (each its
// own random inputs), and the inputs that must hold meaning rather than any random bytes.
struct Example {
  std::map<std::string, uint64_t> params;
  unsigned launches = 1;
  int variants = 1;
  // Adjusts the random inputs of variant `v` (buffers by name).
  std::function<void(std::map<std::string, Bytes>& inputs, const std::vector<BufferInfo>& buffers, int v,
                     std::mt19937_64& rng)>
      meaning;
  // Compares a buffer whose bytes may legitimately differ (returns "" when they agree).
  std::map<std::string, std::function<std::string(const std::map<std::string, Bytes>& ejected,
                                                   const std::map<std::string, Bytes>& runtime)>>
      compare;
};

size_t count_of(const std::vector<BufferInfo>& buffers, const std::string& name) {
  for (const BufferInfo& b : buffers)
    if (b.name == name) return b.count;
  FAIL("no buffer " << name);
  return 0;
}

std::map<std::string, Example> examples() {
  std::map<std::string, Example> e;
  e["saxpy"].launches = 2;
  // mode picks the switch's body (0, 1, default); variant 1 puts an infinity into g, so the
  // overflow check takes the `if`.
  e["branch"].variants = 3;
  e["branch"].launches = 2;
  e["branch"].meaning = [](auto& in, const auto& buffers, int v, std::mt19937_64& rng) {
    set_element<uint32_t>(in["mode"], 0, static_cast<uint32_t>(v));
    if (v == 1) set_element<float>(in["g"], rng() % count_of(buffers, "g"), INFINITY);
  };
  e["countdown"].launches = 2;
  e["jacobi"].params = {{"n", 65536}, {"max_iters", 400}};
  // Tokens only for some experts: experts without tokens are never launched.
  e["moe"].meaning = [](auto& in, const auto& buffers, int, std::mt19937_64& rng) {
    std::vector<int32_t> experts;
    for (int32_t x = 0; x < 8; ++x)
      if (rng() % 3 != 0) experts.push_back(x);
    if (experts.empty()) experts.push_back(3);
    const size_t tokens = count_of(buffers, "expert_of");
    for (size_t t = 0; t < tokens; ++t) set_element<int32_t>(in["expert_of"], t, experts[rng() % experts.size()]);
  };
  // route writes each expert's tokens into its slice of `order` in the order the threads'
  // atomics ran: the same tokens per slice, in any order.
  e["moe"].compare["order"] = [](const auto& a, const auto& b) -> std::string {
    const Bytes &oa = a.at("order"), &ob = b.at("order");
    if (oa.size() != ob.size()) return "sizes differ";
    if (a.at("counts") != b.at("counts") || a.at("offsets") != b.at("offsets"))
      return "counts or offsets differ (compared on their own)";
    size_t covered = 0;
    for (size_t x = 0; x < 8; ++x) {
      const size_t first = static_cast<size_t>(element<int32_t>(a.at("offsets"), x));
      const size_t n = static_cast<size_t>(element<int32_t>(a.at("counts"), x));
      if ((first + n) * 4 > oa.size()) return "expert " + std::to_string(x) + "'s slice is out of range";
      std::vector<int32_t> sa(n), sb(n);
      for (size_t i = 0; i < n; ++i) {
        sa[i] = element<int32_t>(oa, first + i);
        sb[i] = element<int32_t>(ob, first + i);
      }
      std::sort(sa.begin(), sa.end());
      std::sort(sb.begin(), sb.end());
      if (sa != sb) return "expert " + std::to_string(x) + "'s tokens differ";
      covered += n;
    }
    return covered * 4 == oa.size() ? "" : "the slices cover " + std::to_string(covered) + " tokens";
  };
  e["scheduler"].launches = 2;
  e["dp_step"].params = {{"n", 1 << 20}};
  e["dp_step"].launches = 2;
  // bucket_dispatch's sum adds each block's partial sum with atomicAdd, in scheduling order.
  // Values in [0, 1): the total has no cancellation, so the tolerance below means something.
  e["bucket_dispatch"].meaning = [](auto& in, const auto& buffers, int, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    const size_t n = count_of(buffers, "values");
    for (size_t i = 0; i < n; ++i) set_element<float>(in["values"], i, unit(rng));
  };
  e["bucket_dispatch"].compare["total"] = [](const auto& a, const auto& b) -> std::string {
    const float x = element<float>(a.at("total"), 0), y = element<float>(b.at("total"), 0);
    if (std::fabs(x - y) <= 1e-3 * std::max(1.0f, std::fabs(y))) return "";
    return "ejected " + std::to_string(x) + ", runtime " + std::to_string(y);
  };
  // Variant 1: a non-finite gradient, so every rank skips the update.
  e["guarded_step"].variants = 2;
  e["guarded_step"].params = {{"n", 1 << 20}};
  e["guarded_step"].meaning = [](auto& in, const auto& buffers, int v, std::mt19937_64& rng) {
    if (v == 1) set_element<float>(in["x"], rng() % count_of(buffers, "x"), NAN);
  };
  e["heat_diffusion"].params = {{"nx", 192}, {"ny", 160}, {"max_steps", 600}};
  e["work_queue"].launches = 2;
  return e;
}

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE_MESSAGE(out.good(), "cannot write " << path);
}

Bytes read_bytes(const std::string& path) {
  const std::string s = read_all(path);
  return Bytes(s.begin(), s.end());
}

std::string first_difference(const Bytes& a, const Bytes& b, orch::fb::ScalarType type, const std::string& a_name) {
  if (a.size() != b.size()) return std::to_string(a.size()) + " bytes against " + std::to_string(b.size());
  const size_t size = std::max<size_t>(1, orch::run::type_size(type));
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < a.size(); i += size)
    if (std::memcmp(a.data() + i, b.data() + i, std::min(size, a.size() - i)) != 0 && differ++ == 0) first = i / size;
  if (differ == 0) return "";
  std::string s = std::to_string(differ) + " of " + std::to_string(a.size() / size) + " elements differ; first [" +
                  std::to_string(first) + "]";
  if (type == orch::fb::ScalarType::F32)
    s += ": " + a_name + " " + std::to_string(element<float>(a, first)) + ", runtime " +
         std::to_string(element<float>(b, first));
  else if (size == 4)
    s += ": " + a_name + " " + std::to_string(element<uint32_t>(a, first)) + ", runtime " +
         std::to_string(element<uint32_t>(b, first));
  return s;
}

// One side of a comparison: runs the pipeline on the inputs in `in` (one file per buffer,
// NAME.bin) and writes every buffer to `out`; returns orch-run's or the program's output, with
// *ok telling whether it ran.
using Side = std::function<std::string(const std::string& in, const std::string& out, bool* ok)>;

// orch-run on `bin` (in-process), with `params`, `launches` launches and every buffer filled
// from `in` and dumped to `out`.
Side runtime_side(const std::string& bin, const std::vector<BufferInfo>& buffers, const std::vector<std::string>& params,
                  unsigned launches) {
  return [=](const std::string& in, const std::string& out, bool* ok) {
    std::vector<std::string> args = {bin, "--warmup", "0", "--repeat", std::to_string(launches)};
    for (const std::string& p : params) args.insert(args.end(), {"--param", p});
    for (const BufferInfo& b : buffers)
      args.insert(args.end(), {"--fill", b.name + "=file:" + in + "/" + b.name + ".bin", "--dump",
                               b.name + "=" + out + "/" + b.name + ".bin"});
    RunOutput r = orch_run(args);
    *ok = r.exit_code == 0;
    return "orch-run: " + r.out + r.err;
  };
}

// Runs one pipeline two ways (`a` named `a_name`, `b` the runtime with orchc's defaults) on the
// same random inputs for every variant, and compares every buffer byte for byte (but those the
// example compares its own way, whose bytes may legitimately differ).
void compare_sides(const std::string& name, const std::string& a_name, const std::string& bin, const Side& a) {
  const std::map<std::string, Example> all = examples();
  const Example ex = all.count(name) ? all.at(name) : Example{};
  const std::vector<BufferInfo> buffers = buffers_of(bin, ex.params);
  std::vector<std::string> params;
  for (const auto& [p, value] : ex.params) params.push_back(p + "=" + std::to_string(value));
  const Side b = runtime_side(bin, buffers, params, ex.launches);
  std::mt19937_64 rng(std::random_device{}());
  for (int v = 0; v < ex.variants; ++v) {
    CAPTURE(v);
    const uint64_t seed = rng();
    const std::string dir = temp_dir() + "/run-" + name + "-" + a_name + "-" + std::to_string(v);
    for (const char* sub : {"in", "a", "b"}) fs::create_directories(dir + "/" + sub);
    // Random contents for every buffer: floats in [-1, 1), integers over their whole range.
    std::map<std::string, Bytes> inputs;
    for (const BufferInfo& buf : buffers) {
      std::optional<orch::run::RandomRange> range;
      if (orch::run::is_float_type(buf.type)) {
        orch::run::RandomRange r;
        std::string error;
        REQUIRE(orch::run::parse_range("-1:1", buf.type, &r, &error));
        range = r;
      }
      inputs[buf.name] = orch::run::random_bytes(buf.type, buf.count, seed, buf.name, range);
    }
    std::mt19937_64 meaning_rng(seed);
    if (ex.meaning) ex.meaning(inputs, buffers, v, meaning_rng);
    for (const BufferInfo& buf : buffers) write_file(dir + "/in/" + buf.name + ".bin", inputs[buf.name]);
    bool ok = false;
    const std::string a_log = a(dir + "/in", dir + "/a", &ok);
    INFO(a_name << ": " << a_log);
    REQUIRE(ok);
    const std::string b_log = b(dir + "/in", dir + "/b", &ok);
    INFO(b_log);
    REQUIRE(ok);

    std::map<std::string, Bytes> got_a, got_b;
    for (const BufferInfo& buf : buffers) {
      got_a[buf.name] = read_bytes(dir + "/a/" + buf.name + ".bin");
      got_b[buf.name] = read_bytes(dir + "/b/" + buf.name + ".bin");
      REQUIRE_MESSAGE(got_a[buf.name].size() == buf.count * orch::run::type_size(buf.type), buf.name);
    }
    size_t same_bytes = 0, scratch = 0;
    for (const BufferInfo& buf : buffers) {
      CAPTURE(buf.name);
      if (buf.scratch) {
        ++scratch;
        continue;
      }
      auto special = ex.compare.find(buf.name);
      if (special != ex.compare.end()) {
        const std::string why = special->second(got_a, got_b);
        CHECK_MESSAGE(why.empty(), buf.name << ": " << why);
        continue;
      }
      const std::string diff = first_difference(got_a[buf.name], got_b[buf.name], buf.type, a_name);
      CHECK_MESSAGE(diff.empty(), buf.name << ": " << diff);
      if (diff.empty()) same_bytes += got_a[buf.name].size();
    }
    MESSAGE(name << " (variant " << v << ", " << ex.launches << " launch(es)): " << buffers.size()
                 << " buffers, " << same_bytes << " bytes of the " << a_name << " run identical to the runtime's"
                 << (scratch ? " (" + std::to_string(scratch) + " in the runtime's arena not compared: scratch)" : ""));
  }
}

// The runtime's result with orchc's default options, `bin`.
std::string default_artifact(const std::string& path) {
  std::string log;
  const std::string bin = compiled(path, &log, "");
  REQUIRE_MESSAGE(!bin.empty(), log);
  return bin;
}

// The ejected CUDA program (built by nvcc) against the runtime: the same graph by hand.
void run_both(const std::string& name) {
  const std::string path = pipeline_path(name);
  REQUIRE_MESSAGE(!path.empty(), "no pipeline " << name);
  REQUIRE_MESSAGE(access(nvcc_path().c_str(), X_OK) == 0,
                  "no nvcc at " << nvcc_path() << " (set ORCH_NVCC or CUDA_HOME)");
  const Ejected& ej = ejected().at(name);
  if (!ej.skipped.empty()) {
    MESSAGE("SKIPPED: the ejected " << name << " needs NCCL: " << ej.skipped);
    return;
  }
  REQUIRE_MESSAGE(!ej.exe.empty(), ej.log);
  std::string log;
  // The ejected program allocates every buffer alone: so does the runtime side here, and every
  // buffer compares (planned against unplanned is run_plain_and_default's).
  const char* env = std::getenv("ORCH_ORCHC_OPTIONS");
  const std::string options = std::string(env ? env : "") + " --no-memory-plan";
  const std::string bin = compiled(path, &log, options.c_str());
  REQUIRE_MESSAGE(!bin.empty(), log);
  const std::map<std::string, Example> all = examples();
  const Example ex = all.count(name) ? all.at(name) : Example{};
  const std::string exe = ej.exe;
  compare_sides(name, "ejected", bin, [=](const std::string& in, const std::string& out, bool* ok) {
    std::string cmd = quote(exe) + " --in " + quote(in) + " --out " + quote(out) + " --launches " +
                      std::to_string(ex.launches);
    for (const auto& [p, value] : ex.params) cmd += " --param " + quote(p + "=" + std::to_string(value));
    Shell run = shell(cmd, out + "-run");
    *ok = run.rc == 0;
    return run.output;
  });
}

// The differential test of the speed passes (issue 20) and of the memory plan (issue 24): the
// same pipeline compiled with `--no-pdl --unroll 1 --no-memory-plan` (no programmatic edges, no
// unrolling, no patched kernels, every buffer alone) and with orchc's defaults, run by the
// runtime on the same inputs: every buffer the same bytes, but those in the default's arena,
// whose bytes after a launch may be another buffer's.
void run_plain_and_default(const std::string& name) {
  const std::string path = pipeline_path(name);
  REQUIRE_MESSAGE(!path.empty(), "no pipeline " << name);
  const std::string bin = default_artifact(path);
  std::string log;
  const std::string plain = compiled(path, &log, "--no-pdl --unroll 1 --no-memory-plan");
  REQUIRE_MESSAGE(!plain.empty(), log);
  const std::map<std::string, Example> all = examples();
  const Example ex = all.count(name) ? all.at(name) : Example{};
  std::vector<std::string> params;
  for (const auto& [p, value] : ex.params) params.push_back(p + "=" + std::to_string(value));
  compare_sides(name, "--no-pdl --unroll 1 --no-memory-plan", bin,
                runtime_side(plain, buffers_of(plain, ex.params), params, ex.launches));
}

}  // namespace

TEST_CASE("eject: an ejected program builds with nvcc, and its harness refuses bad input before the GPU") {
  if (access(nvcc_path().c_str(), X_OK) != 0) {
    MESSAGE("SKIPPED: no nvcc at " << nvcc_path() << " (set ORCH_NVCC or CUDA_HOME)");
    return;
  }
  const std::string dir = temp_dir() + "/eject-cpu";
  fs::create_directories(dir + "/in");
  Ejected ej = eject_and_build(examples_dir() + "/saxpy.orch", dir);
  REQUIRE_MESSAGE(!ej.exe.empty(), ej.log);
  const std::string exe = quote(ej.exe);
  Shell r = shell(exe + " --bogus 1", dir + "/bogus");
  CHECK(r.rc == 2);
  CHECK(r.output.find("unknown argument: --bogus") != std::string::npos);
  r = shell(exe + " --param n=-1", dir + "/negative");
  CHECK(r.rc == 2);
  CHECK(r.output.find("--param n=-1: no such param, or a value its type cannot hold") != std::string::npos);
  r = shell(exe + " --param m=1", dir + "/unknown");
  CHECK(r.rc == 2);
  r = shell(exe + " --launches", dir + "/incomplete");
  CHECK(r.rc == 2);
  // An input of the wrong size names the file and both sizes.
  write_file(dir + "/in/x.bin", Bytes(100));
  r = shell(exe + " --param n=1024 --in " + quote(dir + "/in"), dir + "/size");
  CHECK(r.rc == 1);
  CHECK(r.output.find("in/x.bin: 100 bytes; buffer x has 4096") != std::string::npos);
  // The sizes follow the params: 1024 f32 elements is 4096 bytes.
  write_file(dir + "/in/x.bin", Bytes(4096));
  r = shell(exe + " --param n=1024 --in " + quote(dir + "/in"), dir + "/right-size");
  CHECK(r.output.find("in/x.bin") == std::string::npos);
}

TEST_CASE("eject: every example and bundled pipeline has a GPU case below") {
  const std::vector<std::string> covered = {"saxpy", "branch", "countdown", "jacobi", "moe", "scheduler",
                                            "dp_step", "bucket_dispatch", "guarded_step", "heat_diffusion",
                                            "work_queue"};
  for (const std::string& f : all_pipelines()) {
    const std::string stem = fs::path(f).stem().string();
    CHECK_MESSAGE(std::find(covered.begin(), covered.end(), stem) != covered.end(),
                  f << " has no eject case: add one below (and its inputs' meaning in examples())");
  }
}

TEST_SUITE("gpu") {

TEST_CASE("eject: saxpy runs on the GPU and equals the runtime") { run_both("saxpy"); }
TEST_CASE("eject: branch runs on the GPU and equals the runtime, every branch") { run_both("branch"); }
TEST_CASE("eject: countdown runs on the GPU and equals the runtime") { run_both("countdown"); }
TEST_CASE("eject: jacobi runs on the GPU and equals the runtime") { run_both("jacobi"); }
TEST_CASE("eject: moe runs on the GPU and equals the runtime") { run_both("moe"); }
TEST_CASE("eject: scheduler runs on the GPU and equals the runtime") { run_both("scheduler"); }
TEST_CASE("eject: dp_step runs on the GPU and equals the runtime (NCCL, one rank)") { run_both("dp_step"); }
TEST_CASE("eject: bucket_dispatch runs on the GPU and equals the runtime") { run_both("bucket_dispatch"); }
TEST_CASE("eject: guarded_step runs on the GPU and equals the runtime (NCCL, one rank)") { run_both("guarded_step"); }
TEST_CASE("eject: heat_diffusion runs on the GPU and equals the runtime") { run_both("heat_diffusion"); }
TEST_CASE("eject: work_queue runs on the GPU and equals the runtime") { run_both("work_queue"); }

// Every example and bundled pipeline with and without the speed passes (issue 20).
TEST_CASE("speed passes differential: every example and pipeline gives the same bytes with and without them") {
  for (const std::string& f : all_pipelines()) {
    const std::string name = fs::path(f).stem().string();
    SUBCASE(name.c_str()) { run_plain_and_default(name); }
  }
}

}  // TEST_SUITE("gpu")
