// orch-run --profile FILE: the profiled launches' records, per statement of the source, as the
// profile orchc --profile reads (lowering/profile.h). No CUDA here: tested without a GPU.
#pragma once

#include "lowering/profile.h"
#include "tools/orch_run/attribution.h"
#include "tools/orch_run/sites.h"

namespace orch::run {

// Adds a node to `profile` per statement (file, line, column, and a kernel statement's kernel)
// that the attributed records of `a` ran: every site of the statement together (the copies of an
// unrolled loop, the kernels orchc writes for it), with how often it ran, its median and least
// GPU time, the largest launch of its kernel records and the most bytes of its copies and
// memsets. Records of no statement (no site, or a site without a location) are left out.
void add_profile_nodes(const SiteTable& sites, const Attribution& a, lowering::Profile* profile);

}  // namespace orch::run
