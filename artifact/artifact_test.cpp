// The envelope, the loader's robustness (every flipped byte, every truncation, random mutations
// under a valid checksum), the summary, the atomic write and orch-inspect.
#include <dirent.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>  // the linked libxxhash, to check our inline copy against

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "artifact/test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

namespace {

uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

void put_u32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A fresh, empty directory under the system temp dir; removed (with its files) by the destructor.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/orch-artifact-test.XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    ::chmod(path.c_str(), 0700);
    for (const std::string& name : entries()) ::unlink((path + "/" + name).c_str());
    ::rmdir(path.c_str());
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(name);
      }
      ::closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
  }
};

}  // namespace

TEST_CASE("xxh64 matches libxxhash") {
  std::mt19937_64 rng(7);
  std::string data;
  for (size_t size : {0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 100, 1000, 65537}) {
    data.resize(size);
    for (char& c : data) c = static_cast<char>(rng());
    CHECK(xxh64(data.data(), data.size()) == XXH64(data.data(), data.size(), 0));
  }
  CHECK(xxh64("", 0) == 0xEF46DB3751D8E999ull);  // the reference value for empty input
}

TEST_CASE("wrap_payload writes the documented envelope") {
  const std::string payload = sample_payload();
  const std::string file = wrap(payload);
  REQUIRE(file.size() == kHeaderSize + payload.size());
  CHECK(file.compare(0, 8, "ORCHPIPE") == 0);
  CHECK(file.substr(8, 4) == std::string({static_cast<char>(kFormatVersion), 0, 0, 0}));
  CHECK(file.substr(12, 4) == std::string(4, '\0'));
  CHECK(get_u64(file, 16) == payload.size());
  CHECK(get_u64(file, 24) == XXH64(payload.data(), payload.size(), 0));
  CHECK(file.compare(kHeaderSize, std::string::npos, payload) == 0);
  CHECK(file.compare(kHeaderSize + 4, 4, "ORCH") == 0);  // the FlatBuffers file identifier
  CHECK(kHeaderSize % kPayloadAlignment == 0);
}

TEST_CASE("the sample opens and reads back") {
  const std::string file = sample_artifact();
  const OpenResult r = open(file);
  REQUIRE_MESSAGE(r.ok(), r.error);
  CHECK(r.error.empty());
  const fb::Pipeline& p = *r.pipeline;
  CHECK(p.name()->str() == "sample");
  CHECK(p.compiler_version()->str() == "0.1.0-sample");
  REQUIRE(p.source_files()->size() == 2);
  CHECK(p.source_files()->Get(0)->str() == "sample.orch");
  CHECK(p.targets()->size() == 2);

  REQUIRE(p.params()->size() == 3);
  CHECK(p.params()->Get(0)->name()->str() == "n");
  CHECK(p.params()->Get(0)->type() == fb::ScalarType::U32);
  CHECK(p.params()->Get(0)->default_i() == (1 << 20));
  CHECK(p.params()->Get(1)->default_f() == static_cast<double>(1e-6f));  // a value of f32
  CHECK_FALSE(p.params()->Get(2)->has_default());
  CHECK(p.params()->Get(0)->loc()->line() == 2);

  REQUIRE(p.buffers()->size() == 5);
  CHECK(expr_to_string(p.buffers()->Get(0)->count(), p) == "n");
  CHECK(p.buffers()->Get(2)->host());
  CHECK(p.buffers()->Get(3)->count() == nullptr);
  CHECK(expr_to_string(p.buffers()->Get(4)->count(), p) == "ceil_div(n, 256) * 2");
  CHECK(p.comms()->Get(0)->name()->str() == "world");

  REQUIRE(p.kernels()->size() == 3);
  const fb::Kernel* scale = p.kernels()->Get(0);
  CHECK(scale->name()->str() == "scale");
  CHECK_FALSE(scale->generated());
  REQUIRE(scale->images()->size() == 2);
  CHECK(scale->images()->Get(0)->arch()->str() == "sm_90");
  CHECK(scale->images()->Get(0)->cubin()->size() == 64);
  CHECK(scale->images()->Get(0)->cubin()->Get(1) == 'E');
  CHECK(scale->ptx_arch()->str() == "compute_90");
  CHECK(scale->params()->Get(2)->access() == fb::Access::InOut);
  CHECK(p.kernels()->Get(1)->generated());

  REQUIRE(p.graphs()->size() == 3);
  CHECK(p.main_graph() == 0);
  CHECK(p.segments()->size() == 2);
  const fb::Graph* main = p.graphs()->Get(0);
  CHECK(main->name()->str() == "main");
  REQUIRE(main->nodes()->size() == 6);
  auto op = [&](const fb::Graph* g, uint32_t i) { return node_ref(p, *g, i).op; };
  CHECK(op_kind(*op(main, 0)) == NodeKind::Memcpy);
  CHECK(op(main, 0)->body_as_MemcpyOp()->src() == 2);
  CHECK(op_kind(*op(main, 1)) == NodeKind::Memset);
  CHECK(op(main, 1)->body_as_MemsetOp()->element_size() == 4);
  const fb::KernelOp* kernel = op(main, 2)->body_as_KernelOp();
  REQUIRE(kernel);
  CHECK(expr_to_string(kernel->grid()->Get(0), p) == "ceil_div(n, 256)");
  CHECK(expr_to_string(kernel->args()->Get(1)->value(), p) == "tol * 2.0");
  CHECK(main->nodes()->Get(2)->deps_end() - deps_begin(*main, 2) == 1);
  CHECK(main->nodes()->Get(2)->loc().line() == 12);
  const fb::ConditionalOp* cond = op(main, 4)->body_as_ConditionalOp();
  REQUIRE(cond);
  CHECK(cond->type() == fb::ConditionalType::If);
  REQUIRE(cond->bodies()->size() == 2);
  CHECK(op_kind(*op(cond->bodies()->Get(0), 0)) == NodeKind::Kernel);
  // The then body's scale launch and expert's are one op.
  CHECK(cond->bodies()->Get(0)->nodes()->Get(0)->op() == p.graphs()->Get(2)->nodes()->Get(0)->op());
  CHECK(p.ops()->size() == 11);
  CHECK(op_kind(*op(p.graphs()->Get(1), 1)) == NodeKind::Collective);
  CHECK(p.graphs()->Get(2)->device());
  CHECK(p.handles()->Get(0)->set_default());
  CHECK(p.bind_checks()->Get(0)->code()->str() == "E0410");
  CHECK(p.collective_hash() == 0x0123456789ABCDEFull);
}

TEST_CASE("describe_pipeline summarizes everything") {
  const std::string file = sample_artifact();
  const OpenResult r = open(file);
  REQUIRE(r.ok());
  const std::string text = describe_pipeline(*r.pipeline);
  const std::string version_line =
      "  format version " + std::to_string(kFormatVersion) + ", compiled by orchc 0.1.0-sample\n";
  for (const char* expected : {
           "pipeline 'sample'\n",
           version_line.c_str(),
           "  targets: sm_90, sm_100\n",
           "  [0] n: u32 = 1048576  at sample.orch:2:1\n",
           "  [1] tol: f32 = 1e-06  at sample.orch:3:1\n",
           "  [2] mode: i32 (no default, set at bind)  at sample.orch:4:1\n",
           "  [4] counts: i32[ceil_div(n, 256) * 2] device\n",
           "  [2] u_host: f32[n] host (pinned, mapped)\n",
           "images: sm_90 CUBIN 64 bytes, sm_100 CUBIN 64 bytes, PTX compute_90 49 bytes\n",
           "[1] __orch_cond_0  generated  symbol __orch_cond_0  uses the device runtime  waits at entry\n",
           "      code: module 0\n",
           "modules (1):\n  [0] 1 kernel\n      images: sm_90 CUBIN 64 bytes, PTX compute_90 51 bytes\n",
           "  [0] main  main  segment 0  (6 nodes)\n",
           "    node 2: kernel  \"scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, u)\"  deps [0]  at "
           "sample.orch:12:3\n",
           "        kernel scale  grid (ceil_div(n, 256), 1, 1)  block (256, 1, 1)\n",
           "    node 3: kernel  \"condition of: if flag == 0\"  deps [1, 2 programmatic]  at sample.orch:13:3\n",
           "        args: n as u32, tol * 2.0 as f32, buffer u\n",
           "        body 0 (then) 'then' (1 node):\n",
           "          node 0: memset  \"fill counts = -1\"  deps []  at sample.orch:16:5\n",
           "    launch budget: 1 fire-and-forget, 0 tail\n",
           "        allreduce sum on comm world: buffer u -> buffer u\n",
           "  [2] expert  device  (1 node)\n",
           "segments (launched in order): main main.1\n"
           "device graphs (instantiated in order): expert\n",
           "  [0] graph main  default 0 (assigned at every launch)\n",
           "  [0] E0410: require n % 256 == 0  else \"n must be a multiple of 256\"  at "
           "sample.orch:4:1\n",
           "collective hash: 0x0123456789abcdef\n",
           "memory plan: 2 buffers in one arena of 4227072 bytes at the defaults (4227072 bytes alone), alignment 256\n",
           "  [1] v: 4194304 bytes at 0; in use beside every other\n",
           "  [4] counts: 32768 bytes at 4194304; in use beside every other\n",
           "  device memory at the defaults: 8421380 bytes, 8421380 without the plan\n",
       }) {
    CHECK_MESSAGE(text.find(expected) != std::string::npos, "missing: " << expected);
  }
}

TEST_CASE("expr_to_string renders postfix as infix with minimal parentheses") {
  auto tree = sample_tree();
  auto render = [&](std::vector<fb::ExprInstr> code) {
    tree->buffers[0]->count->code = std::move(code);
    const std::string file = wrap(pack_payload(*tree));
    const OpenResult r = open(file);
    REQUIRE_MESSAGE(r.ok(), r.error);
    return expr_to_string(r.pipeline->buffers()->Get(0)->count(), *r.pipeline);
  };
  using Op = fb::ExprOp;
  static constexpr fb::ScalarType U32 = fb::ScalarType::U32, I32 = fb::ScalarType::I32, I64 = fb::ScalarType::I64,
                           Bool = fb::ScalarType::Bool;
  auto lit = [](int64_t v, fb::ScalarType t = fb::ScalarType::U32) { return fb::ExprInstr(Op::ConstInt, t, 0, v, 0); };
  auto par = [](int r) { return fb::ExprInstr(Op::Param, r == 2 ? I32 : U32, r, 0, 0); };
  auto op = [](Op o, fb::ScalarType t = fb::ScalarType::U32) { return fb::ExprInstr(o, t, 0, 0, 0); };
  CHECK(render({par(0), lit(1), lit(2), op(Op::Add), op(Op::Mul)}) == "n * (1 + 2)");
  CHECK(render({par(0), lit(1), op(Op::Add), lit(2), op(Op::Mul)}) == "(n + 1) * 2");
  CHECK(render({par(0), lit(1), op(Op::Sub), lit(2), op(Op::Sub)}) == "n - 1 - 2");
  CHECK(render({par(0), lit(1, I64), lit(2, I64), op(Op::Sub, I64), op(Op::Sub, I64)}) == "n - (1 - 2)");
  CHECK(render({lit(-1, I64), op(Op::Neg, I64)}) == "-(-1)");
  CHECK(render({par(0), lit(3), op(Op::Lt, Bool), par(2), lit(0, I32), op(Op::Ne, Bool), op(Op::And, Bool),
                op(Op::Not, Bool)}) == "!(n < 3 && mode != 0)");
  CHECK(render({par(0), par(2), op(Op::Max, I64), lit(1), op(Op::Shl, I64)}) == "max(n, mode) << 1");
  CHECK(render({fb::ExprInstr(Op::Rank, U32, 0, 0, 0), fb::ExprInstr(Op::WorldSize, U32, 0, 0, 0),
                op(Op::Mod)}) == "rank % world_size");
  CHECK(render({fb::ExprInstr(Op::ConstFloat, fb::ScalarType::F64, 0, 0, 0.1)}) == "0.1");
  CHECK(render({fb::ExprInstr(Op::FamilyIndex, U32, 0, 0, 0)}) == "family_index");
}

TEST_CASE("open_pipeline: envelope errors, in order") {
  const std::string good = sample_artifact();
  auto error = [](const std::string& file) { return open(file).error; };

  CHECK(error("") == "file too small to be an orch pipeline (0 bytes; the header alone is 32)");
  CHECK(open_pipeline(nullptr, 100).error ==
        "file too small to be an orch pipeline (100 bytes; the header alone is 32)");

  std::string bad = good;
  bad[0] = 'X';
  CHECK(error(bad) == "not an orch pipeline (bad magic)");

  bad = good;
  put_u32(bad, 8, kFormatVersion + 1);
  CHECK(error(bad) == "pipeline.bin format version " + std::to_string(kFormatVersion + 1) +
                          ", this runtime reads version " + std::to_string(kFormatVersion) +
                          "; recompile the pipeline with this orchc");

  // Format 4 to 8 files (before the memory plan; before collective priorities; before
  // NVSHMEM's fields; before ops became a union; before device_order and late arguments):
  // refused with the same message, not read as 9. golden_test.cpp opens a whole format 8 file.
  for (uint32_t older : {4u, 5u, 6u, 7u, 8u}) {
    bad = good;
    put_u32(bad, 8, older);
    CHECK(error(bad) == "pipeline.bin format version " + std::to_string(older) +
                            ", this runtime reads version 9; recompile the pipeline with this orchc");
  }

  bad = good;
  put_u32(bad, 12, 0x10);
  CHECK(error(bad) == "unsupported header flags 0x00000010 (format version " +
                          std::to_string(kFormatVersion) + " defines none)");

  bad = good + std::string(8, '\0');
  CHECK(error(bad) == "payload size mismatch: the header says " + std::to_string(good.size() - 32) +
                          " bytes, the file holds " + std::to_string(good.size() - 24) +
                          " after the header (truncated or padded file)");

  bad = good;
  bad[100] ^= 0x20;
  CHECK(error(bad) == "checksum mismatch: the file is corrupted");

  // Misaligned in memory: the same bytes one past an 8-byte boundary.
  std::string shifted = " " + good;
  CHECK(open_pipeline(bytes(shifted) + 1, good.size()).error ==
        "pipeline bytes must be 8-byte aligned in memory (load the file into aligned storage)");

  std::string payload = sample_payload();
  payload[4] = 'X';
  CHECK(error(wrap(payload)) ==
        "the payload is not an orch pipeline FlatBuffer (file identifier is not \"ORCH\")");
  CHECK(error(wrap(std::string(4, '\0'))) ==
        "the payload is not an orch pipeline FlatBuffer (file identifier is not \"ORCH\")");

  payload = sample_payload();
  payload[0] = static_cast<char>(0xF0);  // root offset past the end
  CHECK(error(wrap(payload)) ==
        "the payload is not a well-formed orch.fb.Pipeline (the FlatBuffers verifier rejected "
        "it: out-of-bounds offset, missing required field, or nested or shared too deeply)");
}

TEST_CASE("every flipped byte is rejected (XOR 0xFF and XOR 0x01)") {
  const std::string good = sample_artifact();
  REQUIRE(open(good).ok());
  size_t rejected = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int mask : {0xFF, 0x01}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      const OpenResult r = open(bad);
      if (r.ok() || r.error.empty() || r.error.find('\n') != std::string::npos) {
        FAIL_CHECK("byte " << i << " ^ " << mask << " was not rejected cleanly: " << r.error);
      } else {
        ++rejected;
      }
    }
  }
  CHECK(rejected == 2 * good.size());
  MESSAGE(rejected << " flipped files rejected");
}

TEST_CASE("every truncation is rejected") {
  const std::string good = sample_artifact();
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string cut = good.substr(0, n);
    const OpenResult r = open(cut);
    if (r.ok() || r.error.empty()) FAIL_CHECK("truncation to " << n << " bytes was accepted");
  }
}

TEST_CASE("mutated payloads under a valid checksum never crash") {
  // Each mutated payload is re-wrapped, so the checksum holds and the verifier and validate()
  // see it. Accepted or rejected are both fine; what counts is a result, without a sanitizer
  // report (ORCH_SANITIZE=ON builds run this under ASan and UBSan).
  const std::string good = sample_payload();
  std::mt19937 rng(20240601);
  size_t accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 5000; ++iteration) {
    std::string p = good;
    const int mutations = 1 + static_cast<int>(rng() % 8);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = rng() % p.size();
      switch (rng() % 6) {
        case 0:
          p[at] = static_cast<char>(rng());
          break;
        case 1:
          p[at] = static_cast<char>(p[at] ^ (1 << (rng() % 8)));
          break;
        case 2:
          p[at] = static_cast<char>(rng() % 2 ? 0x00 : 0xFF);
          break;
        case 3: {  // a small little-endian integer at a 4-byte boundary (indices, counts)
          const size_t aligned = at & ~size_t{3};
          if (aligned + 4 <= p.size()) put_u32(p, aligned, rng() % 16);
          break;
        }
        case 4: {  // copy a 4-byte word from elsewhere (a plausible offset)
          const size_t from = (rng() % p.size()) & ~size_t{3};
          const size_t to = at & ~size_t{3};
          if (from + 4 <= p.size() && to + 4 <= p.size()) p.replace(to, 4, p.substr(from, 4));
          break;
        }
        case 5:  // shrink or grow
          if (rng() % 2) {
            p.resize(p.size() - std::min<size_t>(p.size() - 8, rng() % 16));
          } else {
            p.append(rng() % 16, static_cast<char>(rng()));
          }
          break;
      }
    }
    const std::string file = wrap(p);
    const OpenResult r = open(file);
    if (r.ok()) {
      ++accepted;
      CHECK(!describe_pipeline(*r.pipeline).empty());
    } else {
      ++rejected;
      if (r.error.empty() || r.error.find('\n') != std::string::npos) {
        FAIL_CHECK("iteration " << iteration << ": unclear error '" << r.error << "'");
      }
    }
  }
  MESSAGE(accepted << " mutated pipelines accepted, " << rejected << " rejected");
  CHECK(rejected > 0);
  CHECK(accepted > 0);
}

TEST_CASE("write_file_atomically") {
  TempDir dir;
  const std::string path = dir.path + "/pipeline.bin";
  const std::string good = sample_artifact();
  std::string error;

  SUBCASE("writes a new file and replaces an old one") {
    REQUIRE(write_file_atomically(path, "old", &error));
    CHECK(read_all(path) == "old");
    REQUIRE(write_file_atomically(path, good, &error));
    CHECK(read_all(path) == good);
    CHECK(dir.entries() == std::vector<std::string>{"pipeline.bin"});
  }

  SUBCASE("a path that is a directory fails and leaves it alone") {
    const std::string sub = dir.path + "/sub";
    REQUIRE(::mkdir(sub.c_str(), 0700) == 0);
    CHECK_FALSE(write_file_atomically(sub, good, &error));
    CHECK(error == "refusing to write " + sub + ": it is a directory; the output must be a regular file");
    struct stat st;
    CHECK((::stat(sub.c_str(), &st) == 0 && S_ISDIR(st.st_mode)));
    CHECK(dir.entries() == std::vector<std::string>{"sub"});  // no temporary left behind
    ::rmdir(sub.c_str());
  }

  SUBCASE("a missing directory fails with a clear error") {
    CHECK_FALSE(write_file_atomically(dir.path + "/missing/pipeline.bin", good, &error));
    CHECK(error.find("cannot create a temporary file in " + dir.path + "/missing") == 0);
    CHECK(error.find("No such file or directory") != std::string::npos);
  }

  SUBCASE("a failed write keeps the old file and removes the temporary") {
    REQUIRE(write_file_atomically(path, good, &error));
    // Make write() itself fail part way: a file size limit below the new content's size.
    rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old_limit;
    small.rlim_cur = 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    const bool ok = write_file_atomically(path, std::string(4096, 'x'), &error);
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
    CHECK_FALSE(ok);
    CHECK(error.find("cannot write") == 0);
    CHECK(error.find("File too large") != std::string::npos);
    CHECK(read_all(path) == good);
    CHECK(dir.entries() == std::vector<std::string>{"pipeline.bin"});
  }

  SUBCASE("a directory that is not writable fails and keeps the old file") {
    REQUIRE(write_file_atomically(path, good, &error));
    REQUIRE(::chmod(dir.path.c_str(), 0500) == 0);
    if (::geteuid() == 0) {
      MESSAGE("running as root, which may write anywhere: the permission case is skipped");
    } else {
      CHECK_FALSE(write_file_atomically(path, "new", &error));
      CHECK(error.find("Permission denied") != std::string::npos);
    }
    ::chmod(dir.path.c_str(), 0700);
    CHECK(read_all(path) == good);
    CHECK(dir.entries() == std::vector<std::string>{"pipeline.bin"});
  }

  SUBCASE("a FIFO is refused without opening it, and stays a FIFO") {
    const std::string fifo = dir.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Opening a FIFO for writing with no reader would block: the refusal must come first.
    CHECK_FALSE(write_file_atomically(fifo, good, &error));
    CHECK(error == "refusing to write " + fifo + ": it is a FIFO (named pipe); the output must be a regular file");
    struct stat st;
    CHECK((::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
    CHECK(dir.entries() == std::vector<std::string>{"fifo"});
  }

  SUBCASE("a character device is refused and left alone") {
    // As root, rename() over /dev/null would replace the device with a regular file.
    CHECK_FALSE(write_file_atomically("/dev/null", good, &error));
    CHECK(error == "refusing to write /dev/null: it is a character device; the output must be a regular file");
    struct stat st;
    CHECK((::stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode)));
    CHECK(output_path_problem("/dev/zero") ==
          "refusing to write /dev/zero: it is a character device; the output must be a regular file");
  }

  SUBCASE("an input is refused, also through a symbolic or hard link") {
    const std::string input = dir.path + "/p.orch";
    const std::string soft = dir.path + "/soft.bin";
    const std::string hard = dir.path + "/hard.bin";
    REQUIRE(write_file_atomically(input, "pipeline p\n", &error));
    REQUIRE(::symlink(input.c_str(), soft.c_str()) == 0);
    REQUIRE(::link(input.c_str(), hard.c_str()) == 0);
    CHECK_FALSE(write_file_atomically(input, good, &error, {input}));
    CHECK(error == "refusing to write " + input + ": it is the input " + input);
    CHECK_FALSE(write_file_atomically(soft, good, &error, {input}));
    CHECK(error == "refusing to write " + soft + ": it is the input " + input +
                       " (the same file under another name)");
    CHECK_FALSE(write_file_atomically(hard, good, &error, {input}));
    CHECK(error.find("it is the input " + input) != std::string::npos);
    // The input is an input only when named: another file is fine.
    CHECK(output_path_problem(input, {path}) == "");
    CHECK(read_all(input) == "pipeline p\n");
    struct stat st;
    CHECK((::lstat(soft.c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
  }

  SUBCASE("a symbolic link to a regular file is written through, and stays a link") {
    const std::string target = dir.path + "/target.bin";
    const std::string link = dir.path + "/link.bin";
    REQUIRE(write_file_atomically(target, "old", &error));
    REQUIRE(::symlink("target.bin", link.c_str()) == 0);
    REQUIRE(write_file_atomically(link, good, &error));
    CHECK(read_all(target) == good);
    struct stat st;
    CHECK((::lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
    CHECK(dir.entries() == std::vector<std::string>{"link.bin", "target.bin"});
    // A dangling link is refused: where it points is not what the user named.
    const std::string dangling = dir.path + "/dangling.bin";
    REQUIRE(::symlink("missing/nowhere.bin", dangling.c_str()) == 0);
    CHECK_FALSE(write_file_atomically(dangling, good, &error));
    CHECK(error.find("cannot write " + dangling + " is a symbolic link that cannot be followed") == 0);
    // A link to a device is refused like the device.
    const std::string to_null = dir.path + "/null.bin";
    REQUIRE(::symlink("/dev/null", to_null.c_str()) == 0);
    CHECK_FALSE(write_file_atomically(to_null, good, &error));
    CHECK(error == "refusing to write " + to_null + ": it is a character device; the output must be a regular file");
  }

  SUBCASE("an empty path and a trailing slash are refused") {
    CHECK_FALSE(write_file_atomically("", good, &error));
    CHECK(error == "cannot write a file with an empty name");
    CHECK_FALSE(write_file_atomically(dir.path + "/", good, &error));
    CHECK(error == "cannot write " + dir.path + "/: the path names a directory");
    CHECK_FALSE(write_file_atomically(dir.path + "/", good, nullptr));  // error is optional
  }
}

#ifdef ORCH_INSPECT_PATH
namespace {

struct RunResult {
  int status = -1;
  std::string out, err;
};

RunResult run_inspect(const std::string& args) {
  TempDir dir;
  const std::string out = dir.path + "/out", err = dir.path + "/err";
  const std::string command =
      std::string("'") + ORCH_INSPECT_PATH + "' " + args + " >" + out + " 2>" + err;
  RunResult r;
  const int raw = std::system(command.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace

TEST_CASE("orch-inspect") {
  TempDir dir;
  const std::string good = dir.path + "/good.bin", bad = dir.path + "/bad.bin";
  std::string error;
  REQUIRE(write_file_atomically(good, sample_artifact(), &error));
  std::string corrupt = sample_artifact();
  corrupt[40] ^= 1;
  REQUIRE(write_file_atomically(bad, corrupt, &error));

  RunResult r = run_inspect(good);
  CHECK(r.status == 0);
  CHECK(r.out.find("pipeline 'sample'\n") == 0);
  CHECK(r.err.empty());

  r = run_inspect(bad);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "orch-inspect: " + bad + ": checksum mismatch: the file is corrupted\n");

  r = run_inspect(dir.path + "/missing.bin");
  CHECK(r.status == 1);
  CHECK(r.err ==
        "orch-inspect: " + dir.path + "/missing.bin: cannot open: No such file or directory\n");

  r = run_inspect(dir.path);
  CHECK(r.status == 1);
  CHECK(r.err == "orch-inspect: " + dir.path + ": is a directory, not a file\n");

  CHECK(run_inspect("").status == 2);
  CHECK(run_inspect(good + " extra").status == 2);
  CHECK(run_inspect("--bogus " + good).status == 2);
  r = run_inspect("--help");
  CHECK(r.status == 0);
  CHECK(r.out.find("Usage") != std::string::npos);
}
#endif
