// Helpers of the GPU tests that edit a compiled artifact before loading it (gpu_test.cpp and
// gpu_device_launch_test.cpp): for what the checker refuses, to drive the runtime's handling
// of errors that only happen on the GPU.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"
#include "orch/runtime.h"
#include "runtime/tests/test_util.h"

namespace orch::test {

// The ops of main's kernel nodes, each made its node's own (own_op), for edits of one node at a
// time.
inline std::vector<orch::fb::KernelOpT*> main_kernels(orch::fb::PipelineT& t) {
  std::vector<orch::fb::KernelOpT*> out;
  orch::fb::GraphT& main = *t.graphs[t.main_graph];
  for (uint32_t i = 0; i < main.nodes.size(); ++i)
    if (orch::artifact::op_kind(orch::artifact::op_of(t, main, i)) == orch::artifact::NodeKind::Kernel)
      out.push_back(orch::artifact::own_op(t, main, i).body.AsKernelOp());
  return out;
}

// The same, with its artifact changed by `edit` before loading: for what the checker refuses,
// to drive the runtime's handling of errors that only happen on the GPU.
inline std::unique_ptr<orch::Pipeline> load_edited(
    const std::string& name, const std::string& source,
    const std::function<void(orch::fb::PipelineT&)>& edit) {
  std::string log;
  std::string path = orch::test::compile_source(name, source, &log);
  INFO(log);
  REQUIRE(!path.empty());
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto opened =
      orch::artifact::open_pipeline(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  INFO(opened.error);
  REQUIRE(opened.ok());
  std::unique_ptr<orch::fb::PipelineT> tree(opened.pipeline->UnPack());
  edit(*tree);
  const std::string payload = orch::artifact::pack_payload(*tree);
  const std::string edited = orch::artifact::wrap_payload(
      reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  auto p = orch::Pipeline::load_from_memory(edited.data(), edited.size());
  ORCH_REQUIRE_OK(p);
  return std::move(p.value());
}

inline int graph_index(const orch::fb::PipelineT& t, const std::string& name) {
  for (size_t g = 0; g < t.graphs.size(); ++g)
    if (t.graphs[g]->name == name) return static_cast<int>(g);
  FAIL("no graph " << name);
  return -1;
}

}  // namespace orch::test
