// A profile: what one run of a compiled pipeline measured on a GPU, per statement of its source
// (`orch-run --profile FILE` writes it, `orchc --profile FILE` reads it; docs/observe.md,
// "--profile"). A JSON document, versioned ("format": "orch-profile", "version": 1); each node
// is keyed by the statement it ran for (file, line, column) and, for a kernel statement, the
// kernel's name, since that is what the compiler can find again in the source: the unrolled
// copies of a statement and the kernels orchc generates for it are one node.
//
// Plain data and JSON, no CUDA and no compiler: orch-run links it without the lowering.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

namespace orch::lowering {

// A kernel launch as it ran: CUPTI's kernel activity record. Where a node ran several launches
// (copies of an unrolled loop), each field is the largest measured: the shape least likely to
// fit in one wave.
struct MeasuredLaunch {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t registers = 0;  // per thread
  uint32_t static_shared_bytes = 0, dynamic_shared_bytes = 0;  // per block
  uint64_t blocks() const { return uint64_t{grid[0]} * grid[1] * grid[2]; }
  uint64_t threads() const { return uint64_t{block[0]} * block[1] * block[2]; }
  uint64_t shared_bytes() const { return uint64_t{static_shared_bytes} + dynamic_shared_bytes; }
};

struct ProfileNode {
  // The key: the statement and, for a kernel statement, its kernel's name ("" for every other
  // statement: copies, fills, scalar updates, conditions, and the kernels orchc writes for them).
  std::string file;
  uint32_t line = 0, column = 0;
  std::string kernel;
  std::string what;        // the statement as orch-run names it, for people
  uint64_t launches = 0;   // times it ran over the profiled launches (each copy, each iteration)
  uint64_t median_ns = 0;  // GPU time of one of them (CUPTI's start to end)
  uint64_t min_ns = 0;
  std::optional<MeasuredLaunch> launch;  // kernels
  std::optional<uint64_t> bytes;         // copies and memsets: bytes moved or set
};

// A param's value: as its type holds it; text for a float that JSON cannot write ("inf", "nan").
using ProfileValue = std::variant<uint64_t, int64_t, double, bool, std::string>;

struct Profile {
  static constexpr const char* kFormat = "orch-profile";
  static constexpr uint32_t kVersion = 1;

  // The GPU.
  std::string device;                  // cudaDeviceProp::name
  uint32_t sms = 0;                    // multiProcessorCount
  uint32_t compute_capability = 0;     // 90 for 9.0, as targets/*.yaml write it
  std::string driver;                  // "580.159.04" ("" unknown)
  uint32_t cuda_driver_version = 0;    // cudaDriverGetVersion: 13000 for CUDA 13.0 (0 unknown)
  std::string date;                    // UTC, ISO 8601
  // The artifact: its pipeline's name, orchc's version, the source files its nodes name, and the
  // XXH64 of its payload (exactly which pipeline.bin ran; informational).
  std::string pipeline;
  std::string compiler_version;
  std::vector<std::string> sources;
  std::string artifact_checksum;
  std::vector<std::pair<std::string, ProfileValue>> params;  // the values the run used
  uint64_t pipeline_launches = 0;                           // profiled launches of the pipeline
  std::vector<ProfileNode> nodes;
};

// The document, one node per line. Deterministic for a given Profile.
std::string profile_json(const Profile& profile);

// Why a document is not a valid profile: a message and the byte offset in the text it is about
// (the value that is wrong, else the nearest enclosing one; 0 for the whole document).
struct ProfileError {
  std::string message;
  size_t offset = 0;
};

// Parses and validates a profile. Every way a document can be wrong is an error, never an
// exception or a crash: malformed JSON, another format or version, a missing field, a value of
// the wrong type or range, two nodes with one key. Keys it does not know are ignored.
std::optional<Profile> parse_profile(std::string_view text, ProfileError* error);

// The byte offset of the value at `path` (object keys and array indices) in the JSON `text`,
// which must be valid JSON; where the path ends early, its deepest value that exists.
using JsonPath = std::vector<std::variant<std::string, size_t>>;
size_t json_offset(std::string_view text, const JsonPath& path);

// The last component of a path ("a/b/fills.orch" -> "fills.orch").
std::string_view file_name(std::string_view path);

}  // namespace orch::lowering
