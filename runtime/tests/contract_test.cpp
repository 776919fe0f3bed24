// The runtime's contract under careless and hostile use, where no GPU is needed: files that are
// not pipelines, sizes no allocation could hold, Result::value() on an error, exceptions that
// must not escape, sticky CUDA errors, the range and overlap rules for bound memory, and the C
// API's rule for NULL, destroyed and foreign handles, checked for every function.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/orch.h"
#include "orch/runtime.h"
#include "runtime/src/binding_checks.h"
#include "runtime/src/internal.h"
#include "runtime/tests/test_util.h"

namespace fb = orch::fb;

namespace {

using Opened = orch::test::OpenedExample;
using orch::test::open_example;

std::string message_of(orch_error* e) {
  std::string m = orch_error_message(e);
  orch_error_destroy(e);
  return m;
}

}  // namespace

TEST_SUITE("contract") {

TEST_CASE("load: a directory, a FIFO, a device or an empty file is an error value, and nothing blocks") {
  const std::string dir = orch::test::temp_dir();
  auto r = orch::Pipeline::load(dir);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == orch::ErrorCode::Io);
  CHECK(r.error().message() == dir + ": is a directory, not a file");

  // Nobody writes to this FIFO: opening it for reading would wait forever.
  const std::string fifo = dir + "/contract.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  r = orch::Pipeline::load(fifo);
  CHECK(r.error().code() == orch::ErrorCode::Io);
  CHECK(r.error().message() == fifo + ": is a FIFO (named pipe), not a regular file");

  r = orch::Pipeline::load("/dev/null");
  CHECK(r.error().code() == orch::ErrorCode::Io);
  CHECK(r.error().message() == "/dev/null: is a character device, not a regular file");

  const std::string empty = dir + "/empty.bin";
  std::ofstream(empty).close();
  r = orch::Pipeline::load(empty);
  CHECK(r.error().code() == orch::ErrorCode::InvalidArtifact);
  CHECK(r.error().message().find(empty + ": file too small") == 0);

  r = orch::Pipeline::load("");
  CHECK(r.error().code() == orch::ErrorCode::Io);
  CHECK(r.error().message() == ": cannot open: No such file or directory");

  // The same through the C API, which used to end the process on a directory.
  orch_pipeline* p = reinterpret_cast<orch_pipeline*>(8);
  orch_error* e = orch_pipeline_load(dir.c_str(), &p);
  CHECK(p == nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_IO);
  CHECK(message_of(e) == dir + ": is a directory, not a file");
}

TEST_CASE("read_file: sizes past the limit are refused without reading them") {
  const std::string path = orch::test::temp_dir() + "/ten.bin";
  std::ofstream(path, std::ios::binary) << "0123456789";
  orch::artifact::FileBytes f;
  std::string why;
  CHECK_FALSE(orch::artifact::read_file(path, 9, &f, &why));
  CHECK(why == "is 10 bytes, larger than the 9 bytes it may have");
  CHECK(f.storage == nullptr);
  REQUIRE(orch::artifact::read_file(path, 10, &f, &why));
  CHECK(f.size == 10);
  CHECK(std::memcmp(f.data(), "0123456789", 10) == 0);
  CHECK(reinterpret_cast<uintptr_t>(f.data()) % 8 == 0);
  // A file whose size stat does not tell (procfs says 0) is read to its end.
  REQUIRE(orch::artifact::read_file("/proc/self/status", 1 << 20, &f, &why));
  CHECK(f.size > 0);
  CHECK(std::string(reinterpret_cast<const char*>(f.data()), 5) == "Name:");
}

TEST_CASE("load_from_memory: absurd sizes are refused before anything is allocated or read") {
  const char small[16] = {};
  for (size_t size : {orch::artifact::kMaxFileSize + 1, size_t(1) << 40, std::numeric_limits<size_t>::max(),
                      std::numeric_limits<size_t>::max() - 6}) {
    CAPTURE(size);
    auto r = orch::Pipeline::load_from_memory(small, size);  // reads nothing past `small`
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == orch::ErrorCode::InvalidArtifact);
    CHECK(r.error().message() == "a pipeline of " + std::to_string(size) +
                                     " bytes is larger than any pipeline.bin can be (" +
                                     std::to_string(orch::artifact::kMaxFileSize) + " bytes)");
  }
  auto r = orch::Pipeline::load_from_memory(nullptr, 0);
  CHECK(r.error().code() == orch::ErrorCode::InvalidArgument);
  r = orch::Pipeline::load_from_memory(small, 0);
  CHECK(r.error().code() == orch::ErrorCode::InvalidArtifact);
  orch_pipeline* p = nullptr;
  orch_error* e = orch_pipeline_load_from_memory(small, std::numeric_limits<size_t>::max(), &p);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARTIFACT);
  CHECK(p == nullptr);
  orch_error_destroy(e);
}

TEST_CASE("Result::value() on an error throws BadResultAccess, which carries the error") {
  orch::Result<int> bad(orch::Error(orch::ErrorCode::Io, "cannot open", "x.orch:1:2"));
  CHECK_FALSE(bad.ok());
  CHECK(bad.error().message() == "cannot open");  // error() never throws
  try {
    (void)bad.value();
    FAIL("value() returned");
  } catch (const orch::BadResultAccess& e) {
    CHECK(e.error().code() == orch::ErrorCode::Io);
    CHECK(std::string(e.what()) == "orch::Result::value() called on an error: x.orch:1:2: error: cannot open");
  }
  CHECK_THROWS_AS((void)*bad, orch::BadResultAccess);
  const orch::Result<int>& cbad = bad;
  CHECK_THROWS_AS((void)cbad.value(), orch::BadResultAccess);
  CHECK_THROWS_AS((void)std::move(bad).value(), orch::BadResultAccess);
  orch::Result<std::string> s(orch::Error(orch::ErrorCode::Unbound, "no"));
  CHECK_THROWS_AS((void)s->size(), orch::BadResultAccess);
  CHECK_THROWS_AS((void)s.value(), std::logic_error);  // what it derives from

  orch::Result<int> good(7);
  CHECK(good.value() == 7);
  CHECK(good.error().ok());
  CHECK(&good.error() == &orch::Result<int>(8).error());  // the one Ok error, no copy
}

TEST_CASE("exceptions never leave the runtime's calls: guarded turns them into errors") {
  using orch::Status;
  Status s = orch::rt::guarded([]() -> Status { throw std::bad_alloc(); });
  CHECK(s.error().code() == orch::ErrorCode::OutOfMemory);
  CHECK(s.error().message() == "out of memory");
  s = orch::rt::guarded([]() -> Status { throw std::length_error("vector::_M_fill_insert"); });
  CHECK(s.error().code() == orch::ErrorCode::OutOfMemory);
  s = orch::rt::guarded([]() -> Status { throw std::runtime_error("boom"); });
  CHECK(s.error().code() == orch::ErrorCode::InvalidArgument);
  CHECK(s.error().message() == "unexpected exception in the runtime: boom");
  s = orch::rt::guarded([]() -> Status { throw 42; });
  CHECK(s.error().message() == "unexpected exception in the runtime");
  orch::Result<int> r = orch::rt::guarded([]() -> orch::Result<int> { return 3; });
  CHECK(r.value() == 3);
}

TEST_CASE("bindings: allow_overlap is recorded; a complete set of bindings is not marked incomplete") {
  orch::Bindings b;
  b.param("n", 1u).buffer("x", nullptr, 4).allow_overlap("x", "y").allow_overlap("y", "z");
  REQUIRE(b.allowed_overlaps().size() == 2);
  CHECK(b.allowed_overlaps()[0] == std::make_pair(std::string("x"), std::string("y")));
  CHECK_FALSE(b.incomplete());
}

TEST_CASE("sticky CUDA errors say the context is lost, and point at no statement") {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert, cudaErrorIllegalInstruction,
                        cudaErrorMisalignedAddress, cudaErrorInvalidPc, cudaErrorHardwareStackError,
                        cudaErrorInvalidAddressSpace, cudaErrorLaunchTimeout, cudaErrorECCUncorrectable,
                        cudaErrorContained, cudaErrorTensorMemoryLeak, cudaErrorExternalDevice,
                        cudaErrorMpsClientTerminated}) {
    CAPTURE(cudaGetErrorName(e));
    CHECK(orch::rt::is_sticky(e));
    orch::Error err = orch::rt::cuda_error(e, "`saxpy` in graph 'main': cannot set the node's parameters", "s.orch:3:1");
    CHECK(err.code() == orch::ErrorCode::ContextLost);
    CHECK(err.cuda_error() == static_cast<int>(e));
    CHECK(err.where().empty());
    CHECK(err.message().find(std::string("the CUDA context is lost: ") + cudaGetErrorName(e)) == 0);
    CHECK(err.message().find("here: `saxpy` in graph 'main': cannot set the node's parameters") != std::string::npos);
    CHECK(err.message().find("CUDA does not say which kernel faulted") != std::string::npos);
    CHECK(orch::rt::no_device_error(e).code() == orch::ErrorCode::ContextLost);
  }
  for (cudaError_t e : {cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorInvalidPtx,
                        cudaErrorStreamCaptureUnsupported, cudaErrorNotReady, cudaErrorLaunchOutOfResources}) {
    CAPTURE(cudaGetErrorName(e));
    CHECK_FALSE(orch::rt::is_sticky(e));
    orch::Error err = orch::rt::cuda_error(e, "what", "s.orch:3:1");
    CHECK(err.code() == orch::ErrorCode::Cuda);
    CHECK(err.where() == "s.orch:3:1");
  }
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::ContextLost)) == "ContextLost");
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::OutOfMemory)) == "OutOfMemory");
  CHECK(std::string(orch::error_code_name(orch::ErrorCode::BuffersOverlap)) == "BuffersOverlap");
  CHECK(static_cast<int>(orch::ErrorCode::OutOfMemory) == ORCH_ERROR_OUT_OF_MEMORY);
  CHECK(static_cast<int>(orch::ErrorCode::ContextLost) == ORCH_ERROR_CONTEXT_LOST);
  CHECK(static_cast<int>(orch::ErrorCode::BuffersOverlap) == ORCH_ERROR_BUFFERS_OVERLAP);
}

TEST_CASE("bound ranges: inside one allocation, without overflow") {
  using orch::rt::range_inside;
  CHECK(range_inside(0x1000, 4096, 0x1000, 4096));
  CHECK(range_inside(0x1400, 3072, 0x1000, 4096));
  CHECK_FALSE(range_inside(0x1400, 3073, 0x1000, 4096));
  CHECK_FALSE(range_inside(0x1000, 64 << 20, 0x1000, 4096));  // the 4 KiB bound as 64 MiB
  CHECK_FALSE(range_inside(0x0fff, 1, 0x1000, 4096));          // starts before
  CHECK(range_inside(0x2000, 0, 0x1000, 4096));                 // empty, at the end
  CHECK_FALSE(range_inside(0x2001, 0, 0x1000, 4096));
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  CHECK_FALSE(range_inside(0x1000, max, 0x1000, 4096));
  CHECK_FALSE(range_inside(max, 2, 0x1000, max - 0x1000));  // ptr + bytes would wrap
  CHECK(range_inside(max - 1, 1, 0, max));
}

TEST_CASE("written buffers come from every node's declared access") {
  Opened staged = open_example("saxpy");  // x_host, y_host, x, y: copies in, saxpy, copy out
  CHECK(orch::rt::written_buffers(*staged.p) == std::vector<bool>{false, true, true, true});
  Opened branch = open_example("branch");
  const std::vector<bool> w = orch::rt::written_buffers(*branch.p);
  REQUIRE(w.size() == branch.p->buffers()->size());
  for (uint32_t i = 0; i < w.size(); ++i) {
    const std::string name = branch.p->buffers()->Get(i)->name()->str();
    CAPTURE(name);
    // branch.orch: `mode` is only read (by the condition kernels); the rest is written in a body.
    CHECK(w[i] == (name != "mode"));
  }
  // The C API's describe says the same per buffer, for the language bindings (issue 21).
  orch_artifact* a = nullptr;
  REQUIRE(orch_artifact_open(staged.storage.data(), staged.size, &a) == nullptr);
  const std::string json = orch_artifact_describe(a);
  CHECK(json.find("\"name\": \"x_host\", \"type\": \"f32\", \"element_size\": 4, \"count\": \"n\", "
                  "\"scalar\": false, \"host\": true, \"written\": false") != std::string::npos);
  CHECK(json.find("\"name\": \"y\", \"type\": \"f32\", \"element_size\": 4, \"count\": \"n\", "
                  "\"scalar\": false, \"host\": false, \"written\": true") != std::string::npos);
  orch_artifact_destroy(a);
}

TEST_CASE("bound memory: an address not aligned to the element size is refused before CUDA is asked") {
  Opened staged = open_example("saxpy");
  alignas(16) static unsigned char memory[64];
  for (uint32_t index : {2u, 3u}) {  // x and y, f32
    for (size_t off : {size_t{1}, size_t{2}, size_t{6}}) {
      CAPTURE(index);
      CAPTURE(off);
      orch::rt::BoundMemory out;
      orch::Status s = orch::rt::check_bound_memory(*staged.p, index, memory + off, 16, &out);
      REQUIRE_FALSE(s.ok());
      CHECK(s.error().code() == orch::ErrorCode::InvalidArgument);
      CHECK(s.error().message().find("which is not a multiple of 4 bytes, its element size") != std::string::npos);
      CHECK(s.error().where().find("saxpy.orch:") != std::string::npos);
    }
  }
}

TEST_CASE("overlapping buffers are refused where one is written, unless allowed") {
  Opened o = open_example("saxpy");  // x_host (only read), y_host, x, y (written)
  const auto written = orch::rt::written_buffers(*o.p);
  using orch::rt::Span;
  orch::Bindings none;
  // Separate memory, adjacent included.
  CHECK(orch::rt::check_overlaps(*o.p, {{0x1000, 400}, {0x1190, 400}, {0x2000, 400}, {0x3000, 400}}, written, none).ok());
  // x (written) and y (written) share 200 bytes.
  orch::Status s = orch::rt::check_overlaps(*o.p, {{0x1000, 400}, {0x5000, 400}, {0x2000, 400}, {0x20c8, 400}},
                                            written, none);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(s.error().message() ==
        "buffers 'x' (400 bytes at 0x2000) and 'y' (400 bytes at 0x20c8) share 200 bytes, and the pipeline "
        "writes 'x'; bind separate memory, or Bindings::allow_overlap(\"x\", \"y\") if the overlap is meant");
  CHECK(s.error().where().find("saxpy.orch:") != std::string::npos);
  // One inside the other, x_host (only read) inside y_host (written): the writer is named.
  s = orch::rt::check_overlaps(*o.p, {{0x1100, 16}, {0x1000, 400}, {0, 0}, {0, 0}}, written, none);
  CHECK(s.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(s.error().message().find("share 16 bytes, and the pipeline writes 'y_host'") != std::string::npos);
  // Allowed, in either order.
  orch::Bindings allowed;
  allowed.allow_overlap("y", "x");
  CHECK(orch::rt::check_overlaps(*o.p, {{0x1000, 400}, {0x5000, 400}, {0x2000, 400}, {0x20c8, 400}}, written,
                                 allowed)
            .ok());
  // Another pair is still refused.
  s = orch::rt::check_overlaps(*o.p, {{0x2000, 400}, {0x5000, 400}, {0x2000, 400}, {0x20c8, 400}}, written, allowed);
  CHECK(s.error().code() == orch::ErrorCode::BuffersOverlap);
  CHECK(s.error().message().find("buffers 'x_host' (400 bytes at 0x2000) and 'x'") == 0);
  // Two buffers that are only read may share memory (here x_host twice over, as if the
  // pipeline read it under two names): nothing to refuse.
  std::vector<bool> read_only(4, false);
  CHECK(orch::rt::check_overlaps(*o.p, {{0x1000, 400}, {0x1000, 400}, {0x1000, 400}, {0x1000, 400}}, read_only, none)
            .ok());
  // An allowed pair that names no buffer is an error.
  orch::Bindings typo;
  typo.allow_overlap("x", "yy");
  s = orch::rt::check_overlaps(*o.p, {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, written, typo);
  CHECK(s.error().code() == orch::ErrorCode::UnknownName);
  CHECK(s.error().message() == "allow_overlap(\"x\", \"yy\"): pipeline 'saxpy' has no buffer 'yy'");
}

// ---- the C API's rule, function by function ----------------------------------------------

TEST_CASE("C API: NULL, destroyed and foreign handles, NULL names and outs, for every function") {
  auto invalid = [](orch_error* e, const std::string& text) {
    CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
    CHECK(message_of(e) == text);
  };
  orch_bindings* live = orch_bindings_create();
  REQUIRE(live != nullptr);
  orch_bindings* dead = orch_bindings_create();
  orch_bindings_destroy(dead);
  orch_bindings_destroy(dead);  // twice: nothing happens
  // Handles of another type, and made-up ones: recognized, never dereferenced.
  auto* foreign_exec = reinterpret_cast<orch_executable*>(live);
  auto* foreign_pipeline = reinterpret_cast<const orch_pipeline*>(live);
  auto* made_up = reinterpret_cast<orch_executable*>(uintptr_t(0xdeadbeef));

  const std::string not_live = " (destroyed already, or never one)";
  // orch_bindings_*: the handle, then the name.
  invalid(orch_bindings_param_u32(nullptr, "n", 1), "orch_bindings_param_u32: `bindings` is NULL");
  invalid(orch_bindings_param_i32(dead, "n", 1), "orch_bindings_param_i32: `bindings` is not a live orch_bindings" + not_live);
  invalid(orch_bindings_param_u64(reinterpret_cast<orch_bindings*>(made_up), "n", 1),
          "orch_bindings_param_u64: `bindings` is not a live orch_bindings" + not_live);
  invalid(orch_bindings_param_i64(live, nullptr, 1), "orch_bindings_param_i64: `name` is NULL");
  invalid(orch_bindings_param_f32(live, nullptr, 1), "orch_bindings_param_f32: `name` is NULL");
  invalid(orch_bindings_param_f64(dead, "a", 1), "orch_bindings_param_f64: `bindings` is not a live orch_bindings" + not_live);
  invalid(orch_bindings_buffer(nullptr, "x", nullptr, 0), "orch_bindings_buffer: `bindings` is NULL");
  invalid(orch_bindings_buffer(live, nullptr, nullptr, 0), "orch_bindings_buffer: `name` is NULL");
  invalid(orch_bindings_allow_overlap(dead, "x", "y"),
          "orch_bindings_allow_overlap: `bindings` is not a live orch_bindings" + not_live);
  invalid(orch_bindings_allow_overlap(live, nullptr, "y"), "orch_bindings_allow_overlap: `a` is NULL");
  invalid(orch_bindings_allow_overlap(live, "x", nullptr), "orch_bindings_allow_overlap: `b` is NULL");
  invalid(orch_bindings_comm(nullptr, "w", nullptr, 0, 1), "orch_bindings_comm: `bindings` is NULL");
  invalid(orch_bindings_comm(live, nullptr, nullptr, 0, 1), "orch_bindings_comm: `name` is NULL");
  const char id[ORCH_NCCL_UNIQUE_ID_BYTES] = {1};
  invalid(orch_bindings_comm_from_unique_id(dead, "w", id, 0, 1),
          "orch_bindings_comm_from_unique_id: `bindings` is not a live orch_bindings" + not_live);
  invalid(orch_bindings_comm_from_unique_id(live, nullptr, id, 0, 1), "orch_bindings_comm_from_unique_id: `name` is NULL");
  invalid(orch_bindings_comm_from_unique_id(live, "w", nullptr, 0, 1),
          "orch_bindings_comm_from_unique_id: `unique_id` is NULL");
  // A live bindings takes every call.
  CHECK(orch_bindings_param_u32(live, "n", 1) == nullptr);
  CHECK(orch_bindings_param_i32(live, "n", -1) == nullptr);
  CHECK(orch_bindings_param_u64(live, "n", 1) == nullptr);
  CHECK(orch_bindings_param_i64(live, "n", 1) == nullptr);
  CHECK(orch_bindings_param_f32(live, "a", 1) == nullptr);
  CHECK(orch_bindings_param_f64(live, "a", 1) == nullptr);
  CHECK(orch_bindings_buffer(live, "x", nullptr, 4) == nullptr);  // the pointer is checked at instantiate
  CHECK(orch_bindings_allow_overlap(live, "x", "y") == nullptr);
  CHECK(orch_bindings_comm(live, "w", nullptr, 0, 1) == nullptr);
  CHECK(orch_bindings_comm_from_unique_id(live, "w", id, 0, 1) == nullptr);

  // Loading: every out is NULL after an error, set first.
  orch_pipeline* p = reinterpret_cast<orch_pipeline*>(8);
  invalid(orch_pipeline_load(nullptr, &p), "orch_pipeline_load: `path` is NULL");
  CHECK(p == nullptr);
  invalid(orch_pipeline_load("x.bin", nullptr), "orch_pipeline_load: `out` is NULL");
  p = reinterpret_cast<orch_pipeline*>(8);
  invalid(orch_pipeline_load_from_memory(nullptr, 0, &p), "orch_pipeline_load_from_memory: `bytes` is NULL");
  CHECK(p == nullptr);
  invalid(orch_pipeline_load_from_memory("x", 1, nullptr), "orch_pipeline_load_from_memory: `out` is NULL");
  CHECK(std::string(orch_pipeline_name(nullptr)).empty());
  CHECK(std::string(orch_pipeline_name(foreign_pipeline)).empty());
  orch_pipeline_destroy(nullptr);
  orch_pipeline_destroy(const_cast<orch_pipeline*>(foreign_pipeline));  // not a pipeline: ignored
  CHECK(orch_bindings_param_u32(live, "n", 2) == nullptr);           // and the bindings survive it

  // Instantiate: pipeline, bindings, out.
  orch_executable* x = reinterpret_cast<orch_executable*>(8);
  invalid(orch_instantiate(nullptr, live, nullptr, &x), "orch_instantiate: `pipeline` is NULL");
  CHECK(x == nullptr);
  invalid(orch_instantiate(foreign_pipeline, live, nullptr, &x),
          "orch_instantiate: `pipeline` is not a live orch_pipeline" + not_live);
  invalid(orch_instantiate(foreign_pipeline, nullptr, nullptr, &x),
          "orch_instantiate: `pipeline` is not a live orch_pipeline" + not_live);
  invalid(orch_instantiate(nullptr, live, nullptr, nullptr), "orch_instantiate: `pipeline` is NULL");

  // Executables: launch, set_param, rebind, and the accessors.
  invalid(orch_launch(nullptr, nullptr), "orch_launch: `exec` is NULL");
  invalid(orch_launch(foreign_exec, nullptr), "orch_launch: `exec` is not a live orch_executable" + not_live);
  invalid(orch_launch(made_up, nullptr), "orch_launch: `exec` is not a live orch_executable" + not_live);
  invalid(orch_set_param_u32(nullptr, "n", 1), "orch_set_param_u32: `exec` is NULL");
  invalid(orch_set_param_i32(foreign_exec, "n", 1), "orch_set_param_i32: `exec` is not a live orch_executable" + not_live);
  invalid(orch_set_param_u64(made_up, "n", 1), "orch_set_param_u64: `exec` is not a live orch_executable" + not_live);
  invalid(orch_set_param_i64(nullptr, nullptr, 1), "orch_set_param_i64: `exec` is NULL");
  invalid(orch_set_param_f32(foreign_exec, nullptr, 1), "orch_set_param_f32: `exec` is not a live orch_executable" + not_live);
  invalid(orch_set_param_f64(nullptr, "a", 1), "orch_set_param_f64: `exec` is NULL");
  invalid(orch_rebind(nullptr, "x", nullptr, 0), "orch_rebind: `exec` is NULL");
  invalid(orch_rebind(foreign_exec, "x", nullptr, 0), "orch_rebind: `exec` is not a live orch_executable" + not_live);
  CHECK(orch_executable_buffer(nullptr, "x") == nullptr);
  CHECK(orch_executable_buffer(foreign_exec, "x") == nullptr);
  CHECK(orch_executable_buffer(made_up, nullptr) == nullptr);
  CHECK(orch_executable_comm(nullptr, "w") == nullptr);
  CHECK(orch_executable_comm(foreign_exec, nullptr) == nullptr);
  CHECK(orch_executable_rank(nullptr) == -1);
  CHECK(orch_executable_rank(foreign_exec) == -1);
  CHECK(orch_executable_world_size(made_up) == -1);
  orch_executable_destroy(nullptr);
  orch_executable_destroy(foreign_exec);  // a bindings handle: not destroyed by this
  orch_executable_destroy(made_up);
  CHECK(orch_bindings_param_u32(live, "n", 3) == nullptr);

  invalid(orch_nccl_unique_id(nullptr), "orch_nccl_unique_id: `out` is NULL");

  // The additions for language bindings: the same rule.
  CHECK(std::string(orch_pipeline_image(nullptr)).empty());
  CHECK(std::string(orch_pipeline_image(foreign_pipeline)).empty());
  CHECK(orch_pipeline_device(nullptr) == -1);
  CHECK(orch_pipeline_device(foreign_pipeline) == -1);
  CHECK(orch_executable_buffer_bytes(nullptr, "x") == 0);
  CHECK(orch_executable_buffer_bytes(foreign_exec, "x") == 0);
  CHECK(orch_executable_buffer_bytes(made_up, nullptr) == 0);
  orch_stats stats;
  std::memset(&stats, 0xFF, sizeof stats);
  invalid(orch_executable_stats(nullptr, &stats), "orch_executable_stats: `exec` is NULL");
  CHECK(stats.nodes_patched_in_place == 0);  // zeroed first
  CHECK(stats.segments_rebuilt == 0);
  invalid(orch_executable_stats(foreign_exec, &stats),
          "orch_executable_stats: `exec` is not a live orch_executable" + not_live);
  invalid(orch_executable_stats(made_up, nullptr), "orch_executable_stats: `exec` is not a live orch_executable" + not_live);
  int type = 7, device = 7;
  invalid(orch_memory_info(nullptr, nullptr, &device), "orch_memory_info: `type` is NULL");
  CHECK(device == -1);
  invalid(orch_memory_info(nullptr, &type, nullptr), "orch_memory_info: `device` is NULL");
  CHECK(type == 0);
  CHECK(orch_stream_wait(nullptr, nullptr) == nullptr);  // the same stream: nothing to do, no CUDA call
  auto* foreign_artifact = reinterpret_cast<orch_artifact*>(live);
  orch_artifact* a = reinterpret_cast<orch_artifact*>(8);
  invalid(orch_artifact_open(nullptr, 0, &a), "orch_artifact_open: `bytes` is NULL");
  CHECK(a == nullptr);
  invalid(orch_artifact_open("x", 1, nullptr), "orch_artifact_open: `out` is NULL");
  a = reinterpret_cast<orch_artifact*>(8);
  invalid(orch_artifact_read(nullptr, &a), "orch_artifact_read: `path` is NULL");
  CHECK(a == nullptr);
  invalid(orch_artifact_read("x.bin", nullptr), "orch_artifact_read: `out` is NULL");
  CHECK(std::string(orch_artifact_name(nullptr)).empty());
  CHECK(std::string(orch_artifact_name(foreign_artifact)).empty());
  CHECK(std::string(orch_artifact_describe(nullptr)).empty());
  CHECK(std::string(orch_artifact_describe(foreign_artifact)).empty());
  invalid(orch_artifact_check(nullptr, live), "orch_artifact_check: `artifact` is NULL");
  invalid(orch_artifact_check(foreign_artifact, live), "orch_artifact_check: `artifact` is not a live orch_artifact" + not_live);
  orch_artifact_destroy(nullptr);
  orch_artifact_destroy(foreign_artifact);  // a bindings handle: ignored
  CHECK(orch_bindings_param_u32(live, "n", 2) == nullptr);

  // Errors: NULL is "no error"; a destroyed one is recognized; destroying twice is harmless.
  orch_error* e = orch_launch(nullptr, nullptr);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(orch_error_where(e)).empty());
  CHECK(orch_error_cuda(e) == 0);
  orch_error_destroy(e);
  orch_error_destroy(e);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(orch_error_message(e)) == "not a live orch_error" + not_live);
  CHECK(std::string(orch_error_where(e)).empty());
  CHECK(orch_error_cuda(e) == 0);
  CHECK(orch_error_code(nullptr) == ORCH_OK);
  CHECK(std::string(orch_error_message(nullptr)).empty());
  CHECK(std::string(orch_error_where(nullptr)).empty());
  CHECK(orch_error_cuda(nullptr) == 0);
  orch_error_destroy(nullptr);
  orch_error_destroy(reinterpret_cast<orch_error*>(live));  // a bindings handle: ignored
  CHECK(orch_bindings_param_u32(live, "n", 4) == nullptr);

  orch_bindings_destroy(live);
  orch_bindings_destroy(live);
  invalid(orch_bindings_param_u32(live, "n", 5), "orch_bindings_param_u32: `bindings` is not a live orch_bindings" + not_live);
  // A new object never takes a destroyed handle's place.
  orch_bindings* fresh = orch_bindings_create();
  CHECK(fresh != live);
  CHECK(fresh != dead);
  orch_bindings_destroy(fresh);
}

TEST_CASE("C API: an artifact verified and described without a GPU, bindings checked against it") {
  const std::string bytes = orch::artifact::sample_artifact();
  orch_artifact* a = nullptr;
  REQUIRE(orch_artifact_open(bytes.data(), bytes.size(), &a) == nullptr);
  REQUIRE(a != nullptr);
  CHECK(std::string(orch_artifact_name(a)) == "sample");
  const std::string json = orch_artifact_describe(a);
  CHECK(json.find("\"params\": [") != std::string::npos);
  CHECK(json.find("{\"name\": \"n\", \"type\": \"u32\", \"default\": \"1048576\", \"where\": \"sample.orch:2:1\"}") !=
        std::string::npos);
  CHECK(json.find("{\"name\": \"mode\", \"type\": \"i32\", \"default\": null") != std::string::npos);
  CHECK(json.find("{\"name\": \"counts\", \"type\": \"i32\", \"element_size\": 4, \"count\": \"ceil_div(n, 256) * 2\", "
                  "\"scalar\": false, \"host\": false") != std::string::npos);
  CHECK(json.find("{\"name\": \"flag\", \"type\": \"u32\", \"element_size\": 4, \"count\": \"1\", \"scalar\": true") !=
        std::string::npos);
  CHECK(json.find("\"host\": true") != std::string::npos);  // u_host
  CHECK(json.find("\"comms\": [{\"name\": \"world\"}]") != std::string::npos);
  CHECK(json.find("\"segment\": true") != std::string::npos);

  // Bindings checked as instantiate checks them before CUDA: params, comms, sizes.
  orch_bindings* b = orch_bindings_create();
  orch_error* e = orch_artifact_check(a, b);
  CHECK(orch_error_code(e) == ORCH_ERROR_UNBOUND);  // mode has no default
  orch_error_destroy(e);
  REQUIRE(orch_bindings_param_i32(b, "mode", 1) == nullptr);
  REQUIRE(orch_bindings_comm(b, "world", nullptr, 0, 1) == nullptr);
  CHECK(orch_artifact_check(a, b) == nullptr);
  REQUIRE(orch_bindings_param_u32(b, "n", 100) == nullptr);  // not a multiple of 256: the bind check
  e = orch_artifact_check(a, b);
  CHECK(orch_error_code(e) == ORCH_ERROR_BIND_CHECK_FAILED);
  CHECK(std::string(orch_error_where(e)) == "sample.orch:4:1");
  orch_error_destroy(e);
  REQUIRE(orch_bindings_param_u32(b, "n", 512) == nullptr);
  char memory[16];
  REQUIRE(orch_bindings_buffer(b, "u", memory, 512 * 4 - 1) == nullptr);
  e = orch_artifact_check(a, b);
  CHECK(orch_error_code(e) == ORCH_ERROR_BUFFER_TOO_SMALL);
  CHECK(std::string(orch_error_message(e)).find("buffer 'u'") == 0);
  CHECK(std::string(orch_error_where(e)) == "sample.orch:6:1");
  orch_error_destroy(e);
  REQUIRE(orch_bindings_buffer(b, "u", memory, 512 * 4) == nullptr);  // pointers are not looked at
  CHECK(orch_artifact_check(a, b) == nullptr);
  REQUIRE(orch_bindings_buffer(b, "nope", memory, 16) == nullptr);
  e = orch_artifact_check(a, b);
  CHECK(orch_error_code(e) == ORCH_ERROR_UNKNOWN_NAME);
  orch_error_destroy(e);
  orch_bindings_destroy(b);

  // Bad bytes and files: the verifier's line; sizes refused before anything is read.
  orch_artifact* bad = reinterpret_cast<orch_artifact*>(8);
  e = orch_artifact_open(bytes.data(), bytes.size() - 1, &bad);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARTIFACT);
  CHECK(bad == nullptr);
  orch_error_destroy(e);
  e = orch_artifact_open(bytes.data(), orch::artifact::kMaxFileSize + 1, &bad);
  CHECK(orch_error_code(e) == ORCH_ERROR_INVALID_ARTIFACT);
  orch_error_destroy(e);
  e = orch_artifact_read("/nonexistent/p.bin", &bad);
  CHECK(orch_error_code(e) == ORCH_ERROR_IO);
  CHECK(std::string(orch_error_message(e)).find("/nonexistent/p.bin: ") == 0);
  orch_error_destroy(e);
  e = orch_artifact_read("/tmp", &bad);
  CHECK(orch_error_code(e) == ORCH_ERROR_IO);
  orch_error_destroy(e);

  orch_artifact_destroy(a);
  orch_artifact_destroy(a);
  CHECK(std::string(orch_artifact_name(a)).empty());
  e = orch_artifact_check(a, nullptr);
  CHECK(std::string(orch_error_message(e)) == "orch_artifact_check: `artifact` is not a live orch_artifact (destroyed already, or never one)");
  orch_error_destroy(e);
}

}  // TEST_SUITE("contract")

TEST_CASE("an error message is one line: control characters a caller's name brings are escaped") {
  // A param name with a newline echoed back ("has no param '...'") broke the C API's rule that a
  // message is one line (scripts/fuzz-runtime found it).
  const orch::Error e(orch::ErrorCode::UnknownName, "pipeline 'p' has no param 'a\nb\t\x01\x7f'", "x.orch:1:2\n");
  CHECK(e.message() == "pipeline 'p' has no param 'a\\nb\\t\\x01\\x7f'");
  CHECK(e.where() == "x.orch:1:2\\n");
  CHECK(e.to_string().find('\n') == std::string::npos);
  const orch::Error clean(orch::ErrorCode::UnknownName, "pipeline 'p' has no param 'größe'");
  CHECK(clean.message() == "pipeline 'p' has no param 'größe'");  // UTF-8 stays as it is
}
