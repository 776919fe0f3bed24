// What the speed passes take from a profile (lowering/profile.h, `orchc --profile FILE`):
// reading it into orchc with clang-style diagnostics (E0006 for a profile that is not valid,
// W0006 for one of another pipeline or GPU, which is ignored), finding a statement's node, and
// the launch each pass decides on: as it ran where the profile measured it, else the guess at
// the params' defaults (lowering/launch_shape.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "compiler/program.h"
#include "lowering/mir.h"
#include "lowering/launch_shape.h"
#include "lowering/lir.h"
#include "lowering/profile.h"
#include "support/diagnostics.h"

namespace orch::lowering {

// A profile bound to one compile's sources: each node found by its statement.
class BoundProfile {
 public:
  BoundProfile(Profile profile, uint32_t profile_file) : p_(std::move(profile)), file_(profile_file) {}
  const Profile& profile() const { return p_; }
  uint32_t file() const { return file_; }  // the profile's own SourceManager id, for messages
  // Maps the nodes' files onto `sources`: the same path, else the one file of the same name
  // (the profile may have been measured from another folder). Returns the nodes that found one.
  size_t bind(const SourceManager& sources);
  // The node of the statement at `loc` (its file, line and column) for `kernel` (a kernel
  // statement's kernel name, "" for any other statement); nullptr where it has none.
  const ProfileNode* find(const SourceRange& loc, const std::string& kernel) const;

 private:
  Profile p_;
  uint32_t file_ = 0;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, std::string>, size_t> index_;
};

// What PassOptions carries (lowering/passes.h): the profile, if any.
struct ProfileUse {
  std::shared_ptr<const BoundProfile> profile;  // null: decide from the static guess alone
};

// Reads `path` as a profile for a compile of `program`: E0004/E0005 where it cannot be read,
// E0006 where it is not a valid profile (at the place in the file that is wrong), W0006 and
// null where it belongs to another pipeline or GPU or none of its nodes is a statement of
// `program`. The file joins `sources` (for the messages, and so that no output replaces it).
std::shared_ptr<const BoundProfile> load_profile(const std::string& path, const ir::Program& program,
                                                 SourceManager& sources, DiagnosticEngine& diags);
// The parse alone (E0004-E0006), for a compile that stops before the program is checked.
std::optional<Profile> read_profile(const std::string& path, SourceManager& sources, DiagnosticEngine& diags,
                                    uint32_t* file = nullptr);
// The warnings of load_profile for an already parsed profile; null where it is ignored.
std::shared_ptr<const BoundProfile> match_profile(Profile profile, uint32_t file, const ir::Program& program,
                                                  const SourceManager& sources, DiagnosticEngine& diags);

// A launch as a speed pass decides on it.
struct Launch {
  LaunchShape shape;
  Residency residency;                    // what shape.resident counts against
  const ProfileNode* measured = nullptr;  // the profile's node of the statement, if it has one
  bool measured_shape = false;            // shape is the profile's (its grid, block, registers, shared memory)
  // `subject` + " has 4096 blocks of 256 threads, more than ...", or where measured
  // "from the profile: " + `subject` + " ran 4096 blocks of 256 threads (32 registers ...), ...".
  std::string says(const std::string& subject) const;
};
// A kernel node of the lowered program (programmatic_edges) and a node of the IR (unroll_loops):
// measured where the profile has the statement's launch (user kernels; fills and copies by their
// measured bytes), else launch_shape() at the params' defaults.
Launch launch_of(const lir::Program& p, const lir::Node& n, const Residency& r, const ProfileUse& u);
Launch launch_of(const mir::Program& p, const mir::Node& n, const Residency& r, const ProfileUse& u);

// A measured launch as a LaunchShape on `r` (the target's per-SM limits with the profiled GPU's
// SMs): its blocks and threads, and how many are resident at once with the registers and static
// and dynamic shared memory it ran with (resident_blocks, lowering/launch_shape.h).
LaunchShape measured_shape(const MeasuredLaunch& l, const Residency& r);


// "1.23 us", "456 ns", "7.89 ms".
std::string format_ns(uint64_t ns);

}  // namespace orch::lowering
