// CPU tests of the multi-GPU pieces that need no GPU: the NCCL loader and its errors, the
// NCCL types orch declares itself, comm bindings, and orch::ranks (launcher environments, the
// unique id file, spawning rank processes).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "orch/orch.h"
#include "orch/ranks.h"
#include "orch/runtime.h"
#include "runtime/src/nccl.h"
#include "runtime/src/plan.h"
#include "runtime/tests/test_util.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
// orch declares NCCL's types itself (no header needed to build); they must be NCCL's.
static_assert(sizeof(ncclUniqueId) == sizeof(orch::rt::nccl::UniqueId), "ncclUniqueId");
static_assert(NCCL_UNIQUE_ID_BYTES == orch::rt::nccl::kUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES");
static_assert(int(ncclSuccess) == int(orch::rt::nccl::kSuccess) && int(ncclInProgress) == int(orch::rt::nccl::kInProgress), "ncclResult_t");
static_assert(int(ncclInt8) == int(orch::rt::nccl::kInt8) && int(ncclUint8) == int(orch::rt::nccl::kUint8) &&
                  int(ncclInt32) == int(orch::rt::nccl::kInt32) && int(ncclUint32) == int(orch::rt::nccl::kUint32) &&
                  int(ncclInt64) == int(orch::rt::nccl::kInt64) && int(ncclUint64) == int(orch::rt::nccl::kUint64) &&
                  int(ncclFloat16) == int(orch::rt::nccl::kFloat16) && int(ncclFloat32) == int(orch::rt::nccl::kFloat32) &&
                  int(ncclFloat64) == int(orch::rt::nccl::kFloat64) && int(ncclBfloat16) == int(orch::rt::nccl::kBfloat16),
              "ncclDataType_t");
static_assert(int(ncclSum) == int(orch::rt::nccl::kSum) && int(ncclProd) == int(orch::rt::nccl::kProd) && int(ncclMax) == int(orch::rt::nccl::kMax) &&
                  int(ncclMin) == int(orch::rt::nccl::kMin) && int(ncclAvg) == int(orch::rt::nccl::kAvg),
              "ncclRedOp_t");
static_assert(ORCH_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "orch.h's unique id size");
#define ORCH_TEST_HAVE_NCCL_H 1
#endif

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) {
      had = true;
      old = v;
    }
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("nccl loader: a missing library is a clear error value") {
  auto r = orch::rt::nccl::open("/nonexistent/libnccl.so.2");
  REQUIRE(!r.ok());
  CHECK(r.error().code() == orch::ErrorCode::Nccl);
  CHECK(contains(r.error().message(), "cannot load NCCL from '/nonexistent/libnccl.so.2'"));

  // Through the public calls, with the path from ORCH_NCCL_LIBRARY.
  ScopedEnv env("ORCH_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  auto id = orch::nccl_unique_id();
  REQUIRE(!id.ok());
  CHECK(id.error().code() == orch::ErrorCode::Nccl);
  CHECK(contains(id.error().message(), "/nonexistent/libnccl.so.2"));
  CHECK(contains(id.error().message(), "ORCH_NCCL_LIBRARY"));
  auto v = orch::nccl_version();
  CHECK(!v.ok());
  unsigned char out[ORCH_NCCL_UNIQUE_ID_BYTES];
  orch_error* e = orch_nccl_unique_id(out);
  REQUIRE(e != nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_NCCL);
  orch_error_destroy(e);
  e = orch_nccl_unique_id(nullptr);
  REQUIRE(e != nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  orch_error_destroy(e);
}

TEST_CASE("nccl loader: a library that is not NCCL names the missing symbol") {
  auto r = orch::rt::nccl::open("libm.so.6");
  REQUIRE(!r.ok());
  CHECK(r.error().code() == orch::ErrorCode::Nccl);
  CHECK(r.error().message() == "'libm.so.6' is not a usable NCCL library: it has no symbol ncclGetVersion");
}

TEST_CASE("nccl loader: the installed NCCL, where there is one") {
  ScopedEnv env("ORCH_NCCL_LIBRARY", nullptr);
  auto api = orch::rt::nccl::api();
  if (!api.ok()) {
    MESSAGE("SKIPPED (no NCCL here): ", api.error().message());
    CHECK(contains(api.error().message(), "libnccl.so.2"));
    CHECK(contains(api.error().message(), "ORCH_NCCL_LIBRARY"));
    return;
  }
  const orch::rt::nccl::Api& a = **api;
  CHECK(a.version >= 21000);
  auto v = orch::nccl_version();
  ORCH_REQUIRE_OK(v);
  CHECK(*v == a.version_string() + " from " + a.path);
  MESSAGE("NCCL ", *v);
#ifdef ORCH_TEST_HAVE_NCCL_H
  // The library need not be the one whose header this was built with (no link-time tie).
  if (a.version != NCCL_VERSION_CODE)
    MESSAGE("built with nccl.h ", NCCL_VERSION_CODE, ", running with ", a.version);
#endif
  // Loaded once: the same table again.
  auto again = orch::rt::nccl::api();
  REQUIRE(again.ok());
  CHECK(*again == *api);
  CHECK(a.describe(orch::rt::nccl::kInProgress).rfind("ncclInProgress", 0) == 0);
}

TEST_CASE("bindings: comms from the application or from a unique id") {
  orch::Bindings b;
  int fake = 0;
  b.comm("world", &fake, 1, 2);
  REQUIRE(b.comms().size() == 1);
  CHECK(b.comms()[0].handle == &fake);
  CHECK(b.comms()[0].rank == 1);
  CHECK(b.comms()[0].world_size == 2);
  CHECK(!b.comms()[0].from_unique_id);

  b.comm("world", &fake);  // rank and size from the communicator
  REQUIRE(b.comms().size() == 1);
  CHECK(b.comms()[0].rank == -1);
  CHECK(b.comms()[0].world_size == -1);

  std::array<char, 128> id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 3 + 1);
  b.comm_from_unique_id("world", id.data(), 0, 4);
  REQUIRE(b.comms().size() == 1);
  CHECK(b.comms()[0].from_unique_id);
  CHECK(b.comms()[0].handle == nullptr);
  CHECK(b.comms()[0].unique_id == id);
  CHECK(b.comms()[0].rank == 0);
  CHECK(b.comms()[0].world_size == 4);

  b.comm_from_unique_id("other", nullptr, 0, 1);  // a null id stays zeros; instantiate refuses it
  REQUIRE(b.comms().size() == 2);
  CHECK(b.comms()[1].unique_id == std::array<char, 128>{});

  // Binding a handle again clears the unique id.
  b.comm("world", &fake, 0, 4);
  CHECK(!b.comms()[0].from_unique_id);

  orch_bindings* cb = orch_bindings_create();
  CHECK(orch_bindings_comm_from_unique_id(cb, "world", id.data(), 1, 2) == nullptr);
  CHECK(orch_bindings_comm(cb, "x", &fake, -1, -1) == nullptr);
  orch_error* e = orch_bindings_comm_from_unique_id(nullptr, "world", id.data(), 1, 2);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  orch_error_destroy(e);
  orch_bindings_destroy(cb);
  CHECK(orch_executable_comm(nullptr, "world") == nullptr);
  CHECK(orch_executable_rank(nullptr) == -1);
  CHECK(orch_executable_world_size(nullptr) == -1);
}

TEST_CASE("error codes for NCCL and rank mismatches") {
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::Nccl)) == "Nccl");
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::RankMismatch)) == "RankMismatch");
  CHECK(static_cast<int>(orch::ErrorCode::Nccl) == ORCH_ERROR_NCCL);
  CHECK(static_cast<int>(orch::ErrorCode::RankMismatch) == ORCH_ERROR_RANK_MISMATCH);
}

TEST_CASE("ranks: the launcher's environment") {
  auto from = [](std::map<std::string, std::string> vars) {
    return orch::ranks::from_environment([vars](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  };
  auto none = from({});
  ORCH_REQUIRE_OK(none);
  CHECK(none->rank == 0);
  CHECK(none->world_size == 1);
  CHECK(none->source.empty());

  auto ompi = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ORCH_REQUIRE_OK(ompi);
  CHECK(ompi->rank == 3);
  CHECK(ompi->world_size == 8);
  CHECK(ompi->local_rank == 1);
  CHECK(ompi->source == "OMPI_COMM_WORLD_RANK");

  auto pmi = from({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  ORCH_REQUIRE_OK(pmi);
  CHECK(pmi->rank == 1);
  CHECK(pmi->local_rank == 1);  // no local variable: one host
  CHECK(pmi->source == "PMI_RANK");

  auto slurm = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  ORCH_REQUIRE_OK(slurm);
  CHECK(slurm->rank == 5);
  CHECK(slurm->world_size == 16);
  CHECK(slurm->local_rank == 1);

  // orch's own variables win, then Open MPI's over Slurm's (mpirun inside an allocation).
  auto both = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  ORCH_REQUIRE_OK(both);
  CHECK(both->source == "OMPI_COMM_WORLD_RANK");
  auto orch_env = from({{"ORCH_RANK", "1"}, {"ORCH_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  ORCH_REQUIRE_OK(orch_env);
  CHECK(orch_env->source == "ORCH_RANK");
  CHECK(orch_env->world_size == 2);

  auto bad = from({{"PMI_RANK", "one"}, {"PMI_SIZE", "2"}});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message() == "PMI_RANK='one' is not a rank (a whole number >= 0)");
  bad = from({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message() == "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
  bad = from({{"OMPI_COMM_WORLD_RANK", "0"}});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message() == "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  bad = from({{"ORCH_RANK", "0"}, {"ORCH_WORLD_SIZE", "0"}});
  REQUIRE(!bad.ok());
  bad = from({{"ORCH_RANK", "0"}, {"ORCH_WORLD_SIZE", "2"}, {"ORCH_LOCAL_RANK", "-1"}});
  REQUIRE(!bad.ok());
}

TEST_CASE("ranks: NVLink multicast is off unless asked for") {
  {
    ScopedEnv env("NCCL_NVLS_ENABLE", nullptr);
    orch::ranks::default_nccl_environment();
    REQUIRE(std::getenv("NCCL_NVLS_ENABLE") != nullptr);
    CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "0");
  }
  ScopedEnv env("NCCL_NVLS_ENABLE", "1");
  orch::ranks::default_nccl_environment();
  CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "1");
}

TEST_CASE("ranks: the unique id through a file") {
  const std::string dir = orch::test::temp_dir() + "/ids";
  std::filesystem::create_directories(dir);
  std::array<char, 128> id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(255 - i);
  ORCH_REQUIRE_OK(orch::ranks::write_unique_id(dir + "/a", id));
  CHECK((std::filesystem::status(dir + "/a").permissions() & std::filesystem::perms::others_read) ==
        std::filesystem::perms::none);
  auto back = orch::ranks::read_unique_id(dir + "/a", std::chrono::milliseconds(100));
  ORCH_REQUIRE_OK(back);
  CHECK(*back == id);

  auto t0 = std::chrono::steady_clock::now();
  auto missing = orch::ranks::read_unique_id(dir + "/never", std::chrono::milliseconds(200));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  REQUIRE(!missing.ok());
  CHECK(contains(missing.error().message(), "no NCCL unique id appeared at"));

  std::ofstream(dir + "/short") << "abc";
  auto wrong = orch::ranks::read_unique_id(dir + "/short", std::chrono::milliseconds(100));
  REQUIRE(!wrong.ok());
  CHECK(contains(wrong.error().message(), "does not hold a 128-byte NCCL unique id"));

  CHECK(!orch::ranks::write_unique_id("/nonexistent/dir/id", id).ok());
  // Rank 1 only reads: it never needs NCCL.
  auto r1 = orch::ranks::share_unique_id(dir + "/a", 1, std::chrono::milliseconds(100));
  ORCH_REQUIRE_OK(r1);
  CHECK(*r1 == id);
}

TEST_CASE("ranks: spawn starts one process per rank with its variables") {
  const std::string logs = orch::test::temp_dir() + "/spawn-logs";
  std::filesystem::create_directories(logs);
  ScopedEnv nvls("NCCL_NVLS_ENABLE", nullptr);
  orch::ranks::SpawnOptions o;
  o.log_dir = logs;
  o.timeout = std::chrono::seconds(60);
  o.env = {{"EXTRA", "yes"}};
  auto exits = orch::ranks::spawn(
      3,
      {"/bin/sh", "-c",
       "echo rank=$ORCH_RANK of $ORCH_WORLD_SIZE local=$ORCH_LOCAL_RANK nvls=$NCCL_NVLS_ENABLE extra=$EXTRA; "
       "test -n \"$ORCH_NCCL_ID_FILE\" && test -d \"$(dirname \"$ORCH_NCCL_ID_FILE\")\""},
      o);
  ORCH_REQUIRE_OK(exits);
  REQUIRE(exits->size() == 3);
  for (const orch::ranks::Exit& x : *exits) {
    INFO(x.describe());
    CHECK(x.ok());
    CHECK(read_file(x.log) == "rank=" + std::to_string(x.rank) + " of 3 local=" + std::to_string(x.rank) +
                                  " nvls=0 extra=yes\n");
  }
}

TEST_CASE("ranks: spawn stops the other ranks when one fails or time runs out") {
  auto t0 = std::chrono::steady_clock::now();
  auto exits = orch::ranks::spawn(2, {"/bin/sh", "-c", "if [ $ORCH_RANK = 1 ]; then exit 3; fi; exec sleep 60"});
  ORCH_REQUIRE_OK(exits);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  CHECK((*exits)[1].exit_code == 3);
  CHECK(!(*exits)[0].ok());
  CHECK((*exits)[0].killed);
  CHECK((*exits)[0].describe() == "rank 0: killed by signal 15 (stopped because another rank failed)");

  orch::ranks::SpawnOptions o;
  o.timeout = std::chrono::seconds(1);
  exits = orch::ranks::spawn(2, {"/bin/sh", "-c", "exec sleep 60"}, o);
  ORCH_REQUIRE_OK(exits);
  for (const orch::ranks::Exit& x : *exits) {
    CHECK(x.timed_out);
    CHECK(!x.ok());
  }

  exits = orch::ranks::spawn(1, {"/nonexistent/program"});
  ORCH_REQUIRE_OK(exits);
  CHECK((*exits)[0].exit_code == 127);
  CHECK(!orch::ranks::spawn(0, {"/bin/true"}).ok());
  CHECK(!orch::ranks::spawn(1, {}).ok());
}
