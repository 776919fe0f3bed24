// One test per validate() rule: start from the valid sample, break one thing, and check the exact
// one-line error. docs/format.md lists the same rules.
// Split by what the rules check, as validate*.cpp are; this file holds the pipeline-level ones
// (the tables, the walk's budget, misaligned structs). validate_test_util.h has the helpers.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

TEST_CASE("validate: the unmodified sample packs and opens") {
  auto tree = sample_tree();
  CHECK(open_error(*tree) == "");
  // The object API and the builder agree byte for byte is not required, only that both open.
}

TEST_CASE("validate: pipeline, params, buffers, comms") {
  run({
      {"pipeline name", [](fb::PipelineT& t) { t.name = ""; }, "the pipeline has an empty name"},
      {"param name", [](fb::PipelineT& t) { t.params[1]->name = ""; }, "param 1 has an empty name"},
      {"param duplicate", [](fb::PipelineT& t) { t.params[2]->name = "n"; },
       "param 'n' is declared twice (params 0 and 2)"},
      {"param type", [](fb::PipelineT& t) { t.params[0]->type = fb::ScalarType(13); },
       "param 'n' has unknown type 13"},
      {"param loc",
       [](fb::PipelineT& t) { t.params[0]->loc = std::make_unique<fb::SourceLoc>(2, 1, 1); },
       "param 'n': source location refers to file 2, but the pipeline lists 2 source files"},
      {"buffer duplicate", [](fb::PipelineT& t) { t.buffers[4]->name = "u"; },
       "buffer 'u' is declared twice (buffers 0 and 4)"},
      {"buffer name", [](fb::PipelineT& t) { t.buffers[3]->name = ""; },
       "buffer 3 has an empty name"},
      {"buffer type", [](fb::PipelineT& t) { t.buffers[1]->type = fb::ScalarType(200); },
       "buffer 'v' has unknown type 200"},
      {"buffer loc",
       [](fb::PipelineT& t) { t.buffers[0]->loc = std::make_unique<fb::SourceLoc>(9, 1, 1); },
       "buffer 'u': source location refers to file 9, but the pipeline lists 2 source files"},
      {"buffer symmetric and host", [](fb::PipelineT& t) { t.buffers[2]->symmetric = true; },
       "buffer 'u_host' is both symmetric and host memory"},
      {"symmetric device buffer", [](fb::PipelineT& t) { t.buffers[3]->symmetric = true; }, ""},
      {"comm name", [](fb::PipelineT& t) { t.comms[0]->name = ""; }, "comm 0 has an empty name"},
      {"comm duplicate",
       [](fb::PipelineT& t) {
         t.comms.push_back(std::make_unique<fb::CommT>());
         t.comms.back()->name = "world";
       },
       "comm 'world' is declared twice (comms 0 and 1)"},
  });
}

namespace {

// A pipeline of `node_count` kernel nodes: with `shared_op`, all run one op; else each its own op,
// the ops sharing one grid vector, one block vector and one argument vector, each pointing at the
// same long expression: a few kilobytes that would expand to many megabytes if walked naively.
// `big` is the expression's length.
std::string shared_pipeline(int big, int node_count, bool shared_op = false) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<fb::ExprInstr> code;
  code.push_back(lit(1));
  for (int i = 1; i < big; i += 2) {
    code.push_back(lit(1));
    code.push_back(op(Op::Add));
  }
  const auto e = fb::CreateExprDirect(fbb, &code);
  const auto grid = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::Expr>>{e, e, e});
  const auto arg = fb::CreateKernelArg(fbb, fb::ArgKind::Value, fb::ScalarType::U32, e);
  const auto args = fbb.CreateVector(std::vector<flatbuffers::Offset<fb::KernelArg>>{arg});
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  std::vector<fb::Node> nodes;
  for (int i = 0; i < node_count; ++i) {
    if (!shared_op || i == 0)
      ops.push_back(fb::CreateOp(fbb, 0, fb::OpBody::KernelOp,
                                 fb::CreateKernelOp(fbb, 0, nullptr, grid, grid, e, args).Union()));
    nodes.emplace_back(static_cast<uint32_t>(ops.size() - 1), 0, fb::SourceLoc());
  }
  const auto main = fb::CreateGraph(fbb, fbb.CreateString("main"), fbb.CreateVectorOfStructs(nodes));
  const std::vector<uint8_t> cubin(16, 1);
  const std::vector<flatbuffers::Offset<fb::KernelImage>> images = {
      fb::CreateKernelImageDirect(fbb, "sm_90", &cubin)};
  const std::vector<flatbuffers::Offset<fb::KernelParam>> params = {
      fb::CreateKernelParamDirect(fbb, "x", fb::KernelParamKind::Value, fb::ScalarType::U32)};
  const std::vector<flatbuffers::Offset<fb::Kernel>> kernels = {
      fb::CreateKernelDirect(fbb, "k", "k", false, &images, nullptr, nullptr, &params)};
  const std::vector<flatbuffers::Offset<fb::Graph>> graphs = {main};
  fb::FinishPipelineBuffer(
      fbb, fb::CreatePipelineDirect(fbb, "shared", nullptr, nullptr, nullptr, nullptr, nullptr,
                                    nullptr, &kernels, &graphs, 0, nullptr, nullptr, nullptr, 0, nullptr,
                                    nullptr, &ops));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace

TEST_CASE("validate: one op shared by many nodes is checked once") {
  // 20,000 nodes running one op with three 4,001-instruction expressions: walked per node, that
  // would be 20,000 times the op; checked once per graph, it fits the budget with room to spare.
  const std::string payload = shared_pipeline(4001, 20000, /*shared_op=*/true);
  CHECK(open(wrap(payload)).error == "");
}

TEST_CASE("validate: an op no node runs is refused") {
  auto tree = sample_tree();
  tree->ops.push_back(empty_node());
  CHECK(open_error(*tree) == "op " + std::to_string(tree->ops.size() - 1) + " is used by no node");
}

TEST_CASE("validate: shared sub-tables cannot blow up the walk") {
  const std::string modest = shared_pipeline(3, 50);  // sharing a short expression is fine
  CHECK(open(wrap(modest)).error == "");

  const std::string bomb = shared_pipeline(4001, 200);
  CHECK(bomb.size() < 200000);
  CHECK(open(wrap(bomb)).error ==
        "the pipeline expands to more than 4 times its size through shared sub-tables; refusing "
        "to walk it");
}

namespace {

// A vector of one T that starts 4 bytes off an 8-byte boundary: something FlatBufferBuilder never
// writes and the verifier does not check (it checks a vector's length field, not its structs'
// alignment). The vector is made to point into a [uint] vector so that one element reads as the
// length, the next ones as one T.
template <class T>
flatbuffers::Offset<flatbuffers::Vector<const T*>> misaligned_vector(flatbuffers::FlatBufferBuilder& fbb) {
  static_assert(sizeof(T) <= 6 * 4, "the [uint] vector holds a length and six words");
  const auto words = fbb.CreateVector(std::vector<uint32_t>{1, 1, 0, 0, 0, 0, 0, 0});
  // Builder offsets count from the end of the finished (8-byte aligned) buffer, so a struct at
  // builder offset d is misaligned exactly when d % 8 == 4. The pseudo vector starting at word
  // k has its data at o - 4k - 4.
  const uint32_t o = words.o;
  const uint32_t k = (o - 4) % 8 == 4 ? 0 : 1;
  return flatbuffers::Offset<flatbuffers::Vector<const T*>>(o - 4 * k);
}

// A pipeline with one empty node; `misaligned` says which vector starts 4 bytes off: the code of
// its one buffer's count, or its memory plan's slots.
enum class Misaligned { ExprCode, ArenaSlots };
std::string misaligned_pipeline(Misaligned what) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fb::Buffer>> buffers;
  flatbuffers::Offset<fb::MemoryPlan> plan = 0;
  if (what == Misaligned::ExprCode) {
    const auto count = fb::CreateExpr(fbb, misaligned_vector<fb::ExprInstr>(fbb));
    buffers.push_back(fb::CreateBuffer(fbb, fbb.CreateString("b"), fb::ScalarType::U8, count));
  } else {
    plan = fb::CreateMemoryPlan(fbb, 256, misaligned_vector<fb::ArenaSlot>(fbb));
  }
  const std::vector<flatbuffers::Offset<fb::Op>> ops = {
      fb::CreateOp(fbb, 0, fb::OpBody::EmptyOp, fb::CreateEmptyOp(fbb).Union())};
  const std::vector<fb::Node> nodes = {fb::Node(0, 0, fb::SourceLoc())};
  const std::vector<flatbuffers::Offset<fb::Graph>> graphs = {
      fb::CreateGraph(fbb, fbb.CreateString("main"), fbb.CreateVectorOfStructs(nodes))};
  fb::FinishPipelineBuffer(
      fbb, fb::CreatePipelineDirect(fbb, "misaligned", nullptr, nullptr, nullptr, nullptr, &buffers,
                                    nullptr, nullptr, &graphs, 0, nullptr, nullptr, nullptr,
                                    // a 64-bit field: the builder then pads the buffer to 8 bytes
                                    /*collective_hash=*/1, nullptr, nullptr, &ops, plan));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace

TEST_CASE("validate: a misaligned expression is refused before it is read") {
  const std::string payload = misaligned_pipeline(Misaligned::ExprCode);
  REQUIRE(payload.size() % 8 == 0);
  CHECK(open(wrap(payload)).error == "buffer 'b' count: expression code is not 8-byte aligned");
}

// Found by scripts/fuzz-artifact: the slots were read (8-byte structs) before this check.
TEST_CASE("validate: misaligned memory plan slots are refused before they are read") {
  const std::string payload = misaligned_pipeline(Misaligned::ArenaSlots);
  REQUIRE(payload.size() % 8 == 0);
  CHECK(open(wrap(payload)).error == "memory plan: slots are not 8-byte aligned");
}
