// validate()'s rules for the memory plan (validate_plan.cpp); see validate_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

// The sample's plan: v (4 MiB at 0) and counts (32 KiB at 4 MiB), conflicting.
TEST_CASE("validate: memory plan") {
  using Slot = fb::ArenaSlot;
  run({
      {"no plan at all", [](fb::PipelineT& t) { t.memory_plan.reset(); }, ""},
      {"the two slots may share once the conflict is gone: the layout may overlap them",
       [](fb::PipelineT& t) {
         t.memory_plan->conflicts.clear();
         t.memory_plan->slots[1] = Slot(4, 0, 32768);
         t.memory_plan->arena_bytes = 4u << 20;
       },
       ""},
      {"alignment", [](fb::PipelineT& t) { t.memory_plan->alignment = 100; },
       "memory plan: alignment 100 is not a power of two from 256 to 2^30"},
      {"alignment too small", [](fb::PipelineT& t) { t.memory_plan->alignment = 128; },
       "memory plan: alignment 128 is not a power of two from 256 to 2^30"},
      {"slot buffer out of range", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(9, 4u << 20, 32768); },
       "memory plan slot 1: buffer index 9 is out of range (the pipeline has 5 buffers)"},
      {"slots out of order", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(4, 0, 4u << 20); },
       "memory plan slot 1: buffers are not in increasing order"},
      {"host slot", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(2, 0, 4u << 20); },
       "memory plan slot 0: buffer 'u_host' is host memory, which never shares an arena"},
      {"symmetric slot", [](fb::PipelineT& t) { t.buffers[t.memory_plan->slots[0].buffer()]->symmetric = true; },
       "memory plan slot 0: buffer 'v' is on NVSHMEM's symmetric heap, which never shares an arena"},
      {"scalar slot", [](fb::PipelineT& t) { t.memory_plan->slots[0] = Slot(3, 0, 4); },
       "memory plan slot 0: buffer 'flag' is a device scalar, which never shares an arena"},
      {"conflict reversed", [](fb::PipelineT& t) { t.memory_plan->conflicts[0] = fb::SlotPair(1, 0); },
       "memory plan conflict 0 (1, 0) is not two slots, lower first, of the 2"},
      {"conflict past the slots", [](fb::PipelineT& t) { t.memory_plan->conflicts[0] = fb::SlotPair(0, 2); },
       "memory plan conflict 0 (0, 2) is not two slots, lower first, of the 2"},
      {"conflict repeated", [](fb::PipelineT& t) { t.memory_plan->conflicts.push_back(fb::SlotPair(0, 1)); },
       "memory plan conflict 1 is out of order or repeated"},
      {"conflicting slots overlap", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(4, 4u << 19, 32768); },
       "memory plan: slots 0 and 1 may be in use at the same time but share bytes"},
      {"offset not aligned", [](fb::PipelineT& t) { t.memory_plan->slots[1] = Slot(4, (4u << 20) + 8, 32768); },
       "memory plan: slot 1 is at offset 4194312, not a multiple of 256"},
      {"slot past the arena", [](fb::PipelineT& t) { t.memory_plan->arena_bytes = 4u << 20; },
       "memory plan: slot 1 (32768 bytes at 4194304) ends past the arena's 4194304 bytes"},
      {"not laid out, yet placed", [](fb::PipelineT& t) { t.memory_plan->laid_out = false; },
       "memory plan slot 0 has an offset or size, but the plan is not laid out"},
      {"not laid out, arena size set",
       [](fb::PipelineT& t) {
         t.memory_plan->laid_out = false;
         t.memory_plan->slots = {Slot(1, 0, 0), Slot(4, 0, 0)};
       },
       "memory plan: arena_bytes is set, but the plan is not laid out"},
      {"not laid out", [](fb::PipelineT& t) {
         t.memory_plan->laid_out = false;
         t.memory_plan->slots = {Slot(1, 0, 0), Slot(4, 0, 0)};
         t.memory_plan->arena_bytes = 0;
       },
       ""},
  });
}
