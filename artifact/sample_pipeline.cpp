// The sample pipeline, written the way lowering writes one: with FlatBufferBuilder, children
// before parents. It touches every table and every node kind, so the golden bytes change when
// any part of the schema does. Nothing here may depend on time, addresses or the environment.
//
//   pipeline sample                      graphs: [0] main     (segment 0)
//   param n: u32 = 1 << 20                       [1] main.1   (segment 1, launches expert)
//   param tol: f32 = 1e-6                        [2] expert   (device, fire-and-forget)
//   param mode: i32                       handles: [0] owned by main, drives node 4
//                                         modules: [0] the code of __orch_cond_0
//                                         ops: one per node, but main's then body and expert
//                                           share one (the same scale launch)
//   buffer u, v: f32[n]; u_host: f32[n] host; flag: u32; counts: i32[ceil_div(n, 256) * 2]
//   memory plan: v and counts in one arena, conflicting (apart)
#include "artifact/sample_pipeline.h"

#include <vector>

namespace orch::artifact {

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;
using Code = std::vector<fb::ExprInstr>;

// Every instruction carries its value's type (n is u32, tol f32: the sample's params).
constexpr fb::ScalarType U32 = fb::ScalarType::U32, F32 = fb::ScalarType::F32, Bool = fb::ScalarType::Bool;
fb::ExprInstr lit(int64_t v) { return fb::ExprInstr(fb::ExprOp::ConstInt, U32, 0, v, 0.0); }
fb::ExprInstr flt(double v) { return fb::ExprInstr(fb::ExprOp::ConstFloat, F32, 0, 0, v); }
fb::ExprInstr param(int ref) { return fb::ExprInstr(fb::ExprOp::Param, ref == 1 ? F32 : U32, ref, 0, 0.0); }
fb::ExprInstr op(fb::ExprOp o, fb::ScalarType t = U32) { return fb::ExprInstr(o, t, 0, 0, 0.0); }

enum ParamIndex { kN = 0, kTol = 1, kMode = 2 };
enum BufferIndex { kU = 0, kV = 1, kUHost = 2, kFlag = 3, kCounts = 4 };
enum KernelIndex { kScale = 0, kSetFlag = 1, kLauncher = 2 };
enum GraphIndex { kMain = 0, kMainTail = 1, kExpert = 2 };

class SampleBuilder {
 public:
  std::string build() {
    const auto name = fbb_.CreateString("sample");
    const auto compiler = fbb_.CreateString("0.1.0-sample");
    const auto files = fbb_.CreateVectorOfStrings({"sample.orch", "kernels.cu"});
    const auto targets = fbb_.CreateVectorOfStrings({"sm_90", "sm_100"});
    const auto params = build_params();
    const auto buffers = build_buffers();
    const auto comms =
        fbb_.CreateVector(std::vector<Offset<fb::Comm>>{fb::CreateCommDirect(fbb_, "world")});
    const auto kernels = build_kernels();
    const auto modules = build_modules();
    const auto graphs = fbb_.CreateVector(
        std::vector<Offset<fb::Graph>>{build_main(), build_main_tail(), build_expert()});
    const auto segments = fbb_.CreateVector(std::vector<int32_t>{kMain, kMainTail});
    const auto handles = fbb_.CreateVector(std::vector<Offset<fb::ConditionalHandle>>{
        fb::CreateConditionalHandle(fbb_, kMain, 0, true)});
    const fb::SourceLoc check_loc(0, 4, 1);
    const auto checks =
        fbb_.CreateVector(std::vector<Offset<fb::BindCheck>>{fb::CreateBindCheckDirect(
            fbb_, "E0410", "n must be a multiple of 256",
            expr({param(kN), lit(256), op(fb::ExprOp::Mod), lit(0), op(fb::ExprOp::Eq, Bool)}),
            &check_loc)});
    const auto ops = fbb_.CreateVector(ops_);
    // v and counts in one arena, kept apart by a conflict: laid out at the defaults (n = 2^20).
    const std::vector<fb::ArenaSlot> slots = {fb::ArenaSlot(kV, 0, 4u << 20), fb::ArenaSlot(kCounts, 4u << 20, 32768)};
    const std::vector<fb::SlotPair> conflicts = {fb::SlotPair(0, 1)};
    const auto plan = fb::CreateMemoryPlanDirect(fbb_, 256, &slots, &conflicts, true, (4u << 20) + 32768);
    const auto device_order = fbb_.CreateVector(std::vector<int32_t>{kExpert});
    const auto root =
        fb::CreatePipeline(fbb_, name, compiler, files, targets, params, buffers, comms, kernels,
                           graphs, kMain, segments, handles, checks, 0x0123456789ABCDEFull,
                           /*status_sites=*/0, modules, ops, plan, /*nvshmem_version=*/0, device_order);
    fb::FinishPipelineBuffer(fbb_, root);
    return std::string(reinterpret_cast<const char*>(fbb_.GetBufferPointer()), fbb_.GetSize());
  }

 private:
  Offset<fb::Expr> expr(const Code& code) { return fb::CreateExprDirect(fbb_, &code); }

  Offset<flatbuffers::Vector<Offset<fb::Param>>> build_params() {
    const fb::SourceLoc n_loc(0, 2, 1), tol_loc(0, 3, 1), mode_loc(0, 4, 1);
    return fbb_.CreateVector(std::vector<Offset<fb::Param>>{
        fb::CreateParamDirect(fbb_, "n", fb::ScalarType::U32, true, 1 << 20, 0.0, &n_loc),
        fb::CreateParamDirect(fbb_, "tol", fb::ScalarType::F32, true, 0, static_cast<double>(1e-6f), &tol_loc),
        fb::CreateParamDirect(fbb_, "mode", fb::ScalarType::I32, false, 0, 0.0, &mode_loc),
    });
  }

  Offset<flatbuffers::Vector<Offset<fb::Buffer>>> build_buffers() {
    const fb::SourceLoc loc(0, 6, 1);
    std::vector<Offset<fb::Buffer>> v;
    v.push_back(
        fb::CreateBufferDirect(fbb_, "u", fb::ScalarType::F32, expr({param(kN)}), false, &loc));
    v.push_back(fb::CreateBufferDirect(fbb_, "v", fb::ScalarType::F32, expr({param(kN)})));
    v.push_back(
        fb::CreateBufferDirect(fbb_, "u_host", fb::ScalarType::F32, expr({param(kN)}), true));
    v.push_back(fb::CreateBufferDirect(fbb_, "flag", fb::ScalarType::U32));  // device scalar
    v.push_back(fb::CreateBufferDirect(
        fbb_, "counts", fb::ScalarType::I32,
        expr({param(kN), lit(256), op(fb::ExprOp::CeilDiv), lit(2), op(fb::ExprOp::Mul)})));
    return fbb_.CreateVector(v);
  }

  // A fake CUBIN: 64 bytes that start like an ELF file and are otherwise a counter.
  Offset<flatbuffers::Vector<uint8_t>> fake_cubin(uint8_t seed) {
    std::vector<uint8_t> bytes(64);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(seed + i);
    bytes[0] = 0x7F, bytes[1] = 'E', bytes[2] = 'L', bytes[3] = 'F';
    return fbb_.CreateVector(bytes);
  }

  Offset<fb::KernelImage> image(const char* arch, uint8_t seed) {
    const auto cubin = fake_cubin(seed);
    const auto arch_offset = fbb_.CreateString(arch);
    return fb::CreateKernelImage(fbb_, arch_offset, cubin);
  }

  Offset<flatbuffers::Vector<Offset<fb::Kernel>>> build_kernels() {
    std::vector<Offset<fb::Kernel>> v;
    {
      const fb::SourceLoc loc(1, 1, 1);
      const std::vector<Offset<fb::KernelImage>> images = {image("sm_90", 1), image("sm_100", 2)};
      const std::string ptx_text = "// fake PTX for scale\n.version 8.0\n.target sm_90\n";
      const std::vector<uint8_t> ptx(ptx_text.begin(), ptx_text.end());
      const std::vector<Offset<fb::KernelParam>> params = {
          fb::CreateKernelParamDirect(fbb_, "n", fb::KernelParamKind::Value, fb::ScalarType::U32),
          fb::CreateKernelParamDirect(fbb_, "a", fb::KernelParamKind::Value, fb::ScalarType::F32),
          fb::CreateKernelParamDirect(fbb_, "x", fb::KernelParamKind::Array, fb::ScalarType::F32,
                                      fb::Access::InOut),
      };
      v.push_back(fb::CreateKernelDirect(fbb_, "scale", "scale", false, &images, &ptx, "compute_90",
                                         &params, false, &loc));
    }
    {
      // Generated: its code is in module 0.
      const std::vector<Offset<fb::KernelParam>> params = {
          fb::CreateKernelParamDirect(fbb_, "flag", fb::KernelParamKind::Scalar,
                                      fb::ScalarType::U32, fb::Access::In),
          fb::CreateKernelParamDirect(fbb_, "cond", fb::KernelParamKind::Cond, fb::ScalarType::U32),
      };
      v.push_back(fb::CreateKernelDirect(fbb_, "__orch_cond_0", "__orch_cond_0", true, nullptr,
                                         nullptr, nullptr, &params, true, nullptr,
                                         /*launches_kernels=*/false, /*in_module=*/0,
                                         /*cost_flops_type=*/fb::ScalarType::F32,
                                         /*waits_at_entry=*/true));
    }
    {
      const fb::SourceLoc loc(1, 20, 1);
      const std::vector<Offset<fb::KernelImage>> images = {image("sm_90", 4)};
      const std::vector<Offset<fb::KernelParam>> params = {
          fb::CreateKernelParamDirect(fbb_, "x", fb::KernelParamKind::Array, fb::ScalarType::F32,
                                      fb::Access::In),
          fb::CreateKernelParamDirect(fbb_, "expert", fb::KernelParamKind::Graph,
                                      fb::ScalarType::U8),
      };
      v.push_back(fb::CreateKernelDirect(fbb_, "launcher", "_Z8launcherPKfP14CUgraphExec_st", false,
                                         &images, nullptr, nullptr, &params, true, &loc));
    }
    return fbb_.CreateVector(v);
  }

  // One module, holding the generated kernel's code: a CUBIN for sm_90 and PTX.
  Offset<flatbuffers::Vector<Offset<fb::Module>>> build_modules() {
    const std::vector<Offset<fb::KernelImage>> images = {image("sm_90", 3)};
    const std::string ptx_text = "// fake PTX for the generated kernels\n.version 8.0\n";
    const std::vector<uint8_t> ptx(ptx_text.begin(), ptx_text.end());
    return fbb_.CreateVector(
        std::vector<Offset<fb::Module>>{fb::CreateModuleDirect(fbb_, &images, &ptx, "compute_90")});
  }

  using ExprVec = Offset<flatbuffers::Vector<Offset<fb::Expr>>>;

  ExprVec shape(const Code& x) {
    return fbb_.CreateVector(
        std::vector<Offset<fb::Expr>>{expr(x), expr({lit(1)}), expr({lit(1)})});
  }

  // A node as the graph lists it: its op (an index into ops_), dependencies and their kinds
  // (empty: all Full), and statement.
  struct At {
    uint32_t op;
    std::vector<uint32_t> deps;
    fb::SourceLoc loc;
    std::vector<fb::EdgeKind> kinds = {};
  };
  uint32_t add_op(Offset<fb::Op> o) {
    ops_.push_back(o);
    return static_cast<uint32_t>(ops_.size() - 1);
  }
  template <class Body>
  uint32_t add_op(Offset<flatbuffers::String> what, Offset<Body> body) {
    return add_op(fb::CreateOp(fbb_, what, fb::OpBodyTraits<Body>::enum_value, body.Union()));
  }

  // scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, buffer)
  uint32_t scale_op(int buffer, const char* what) {
    const auto grid = shape({param(kN), lit(256), op(fb::ExprOp::CeilDiv)});
    const auto block = shape({lit(256)});
    const std::vector<Offset<fb::KernelArg>> args = {
        fb::CreateKernelArg(fbb_, fb::ArgKind::Value, fb::ScalarType::U32, expr({param(kN)})),
        fb::CreateKernelArg(fbb_, fb::ArgKind::Value, fb::ScalarType::F32,
                            expr({param(kTol), flt(2.0), op(fb::ExprOp::Mul, F32)})),
        fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::F32, 0, buffer),
    };
    const auto args_offset = fbb_.CreateVector(args);
    const auto what_offset = fbb_.CreateString(what);
    return add_op(what_offset, fb::CreateKernelOp(fbb_, kScale, nullptr, grid, block, 0, args_offset));
  }

  uint32_t memcpy_op(int src, int dst, const char* what) {
    const auto what_offset = fbb_.CreateString(what);
    return add_op(what_offset, fb::CreateMemcpyOp(fbb_, src, dst));
  }

  uint32_t memset_op(int dst, uint32_t value, uint8_t size, const char* what) {
    const auto what_offset = fbb_.CreateString(what);
    return add_op(what_offset, fb::CreateMemsetOp(fbb_, dst, value, size));
  }

  Offset<fb::Graph> graph(const char* name, const std::vector<At>& at, bool device = false,
                          uint64_t fire_and_forget = 0) {
    std::vector<fb::Node> nodes;
    std::vector<uint32_t> deps;
    std::vector<fb::EdgeKind> kinds;
    bool any_kinds = false;
    for (const At& a : at) {
      for (size_t j = 0; j < a.deps.size(); ++j) {
        deps.push_back(a.deps[j]);
        kinds.push_back(a.kinds.empty() ? fb::EdgeKind::Full : a.kinds[j]);
      }
      any_kinds |= !a.kinds.empty();
      nodes.emplace_back(a.op, static_cast<uint32_t>(deps.size()), a.loc);
    }
    const auto name_offset = name ? fbb_.CreateString(name) : Offset<flatbuffers::String>();
    const auto nodes_offset = fbb_.CreateVectorOfStructs(nodes);
    const auto deps_offset = fbb_.CreateVector(deps);
    const auto kinds_offset = any_kinds ? fbb_.CreateVector(kinds) : 0;
    return fb::CreateGraph(fbb_, name_offset, nodes_offset, deps_offset, kinds_offset, device, 0, fire_and_forget, 0);
  }

  Offset<fb::Graph> build_main() {
    std::vector<At> nodes;
    nodes.push_back({memcpy_op(kUHost, kU, "copy u_host -> u"), {}, {0, 10, 3}});
    nodes.push_back({memset_op(kFlag, 0, 4, "fill flag = 0"), {}, {0, 11, 3}});
    nodes.push_back({scale_op(kU, "scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, u)"), {0}, {0, 12, 3}});
    {
      // The generated condition kernel: sets handle 0 from `flag`. It waits at entry, so its
      // edge from the scale kernel is programmatic.
      const auto grid = shape({lit(1)});
      const auto block = shape({lit(1)});
      const std::vector<Offset<fb::KernelArg>> args = {
          fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::U32, 0, kFlag),
          fb::CreateKernelArg(fbb_, fb::ArgKind::CondHandle, fb::ScalarType::U32, 0, 0),
      };
      const auto shared = expr({lit(0)});
      const auto args_offset = fbb_.CreateVector(args);
      const auto what = fbb_.CreateString("condition of: if flag == 0");
      const uint32_t o = add_op(what, fb::CreateKernelOp(fbb_, kSetFlag, nullptr, grid, block, shared, args_offset));
      nodes.push_back({o, {1, 2}, {0, 13, 3}, {fb::EdgeKind::Full, fb::EdgeKind::Programmatic}});
    }
    {
      // The then body's scale node does what expert's does: one op serves both.
      scale_v_ = scale_op(kV, "scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, v)");
      const auto then_body = graph("then", {{scale_v_, {}, {0, 14, 5}}});
      const auto else_body = graph(nullptr, {{memset_op(kCounts, 0xFFFF, 2, "fill counts = -1"), {}, {0, 16, 5}}});
      const auto bodies = fbb_.CreateVector(std::vector<Offset<fb::Graph>>{then_body, else_body});
      const auto what = fbb_.CreateString("if flag == 0");
      const uint32_t o = add_op(what, fb::CreateConditionalOp(fbb_, fb::ConditionalType::If, 0, bodies));
      nodes.push_back({o, {3}, {0, 13, 3}});
    }
    nodes.push_back({add_op(Offset<flatbuffers::String>(), fb::CreateEmptyOp(fbb_)), {4}, {0, 0, 0}});
    return graph("main", nodes);
  }

  Offset<fb::Graph> build_main_tail() {
    std::vector<At> nodes;
    {
      // A launch shape of constants: one struct instead of expressions (format 3).
      const fb::LaunchShape launch(8, 1, 1, 32, 1, 1, 0);
      const std::vector<Offset<fb::KernelArg>> args = {
          fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::F32, 0, kU),
          fb::CreateKernelArg(fbb_, fb::ArgKind::GraphExec, fb::ScalarType::U8, 0, kExpert),
      };
      const auto args_offset = fbb_.CreateVector(args);
      const auto what = fbb_.CreateString("launcher<<<8, 32>>>(u, expert)");
      fb::KernelOpBuilder b(fbb_);
      b.add_kernel(kLauncher);
      b.add_args(args_offset);
      b.add_launch(&launch);
      nodes.push_back({add_op(what, b.Finish()), {}, {0, 18, 3}});
    }
    {
      const auto what = fbb_.CreateString("allreduce sum u on world");
      const uint32_t o = add_op(what, fb::CreateCollectiveOp(fbb_, fb::CollectiveKind::AllReduce, fb::ReduceOp::Sum,
                                                            0, kU, kU));
      nodes.push_back({o, {0}, {0, 19, 3}});
    }
    nodes.push_back({memcpy_op(kU, kUHost, "copy u -> u_host"), {1}, {0, 20, 3}});
    return graph("main.1", nodes, false, 1);
  }

  Offset<fb::Graph> build_expert() { return graph("expert", {{scale_v_, {}, {0, 24, 3}}}, true); }

  std::vector<Offset<fb::Op>> ops_;
  uint32_t scale_v_ = 0;
  FlatBufferBuilder fbb_{4096};
};

}  // namespace

std::string sample_payload() { return SampleBuilder().build(); }

std::string sample_artifact() {
  const std::string payload = sample_payload();
  return wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
}

namespace {

// Calls f(graph) for every graph of `p`: the top-level ones and every op's bodies.
template <class F>
void for_each_graph(fb::PipelineT& p, F&& f) {
  for (auto& g : p.graphs) f(*g);
  for (auto& op : p.ops)
    if (fb::ConditionalOpT* c = op->body.AsConditionalOp())
      for (auto& b : c->bodies) f(*b);
}

uint32_t deps_first(const fb::GraphT& g, uint32_t index) {
  return index == 0 ? 0 : g.nodes[index - 1].deps_end();
}

}  // namespace

void set_deps_end(fb::GraphT& g, uint32_t index, uint32_t end);

namespace {

// Rewrites node `index`'s dependency range [first, end) of g.deps with `deps` (and the kinds).
void splice_deps(fb::GraphT& g, uint32_t index, const std::vector<uint32_t>& deps,
                 const std::vector<fb::EdgeKind>& kinds) {
  const uint32_t first = deps_first(g, index), end = g.nodes[index].deps_end();
  const bool any_kind = !kinds.empty() || !g.dep_kinds.empty();
  if (any_kind && g.dep_kinds.empty()) g.dep_kinds.assign(g.deps.size(), fb::EdgeKind::Full);
  g.deps.erase(g.deps.begin() + first, g.deps.begin() + end);
  g.deps.insert(g.deps.begin() + first, deps.begin(), deps.end());
  if (any_kind) {
    g.dep_kinds.erase(g.dep_kinds.begin() + first, g.dep_kinds.begin() + end);
    std::vector<fb::EdgeKind> k = kinds.empty() ? std::vector<fb::EdgeKind>(deps.size(), fb::EdgeKind::Full) : kinds;
    g.dep_kinds.insert(g.dep_kinds.begin() + first, k.begin(), k.end());
  }
  const int64_t shift = static_cast<int64_t>(deps.size()) - static_cast<int64_t>(end - first);
  for (uint32_t i = index; i < g.nodes.size(); ++i)
    set_deps_end(g, i, static_cast<uint32_t>(g.nodes[i].deps_end() + shift));
}

}  // namespace

fb::OpT& own_op(fb::PipelineT& p, fb::GraphT& g, uint32_t index) {
  const uint32_t op = g.nodes[index].op();
  uint32_t users = 0;
  for_each_graph(p, [&](fb::GraphT& each) {
    for (const fb::Node& n : each.nodes) users += n.op() == op;
  });
  if (users <= 1) return *p.ops[op];
  p.ops.push_back(std::make_unique<fb::OpT>(*p.ops[op]));
  set_op(g, index, static_cast<uint32_t>(p.ops.size() - 1));
  return *p.ops.back();
}

const fb::OpT& op_of(const fb::PipelineT& p, const fb::GraphT& g, uint32_t index) {
  return *p.ops[g.nodes[index].op()];
}

std::vector<uint32_t> deps_of(const fb::GraphT& g, uint32_t index) {
  return std::vector<uint32_t>(g.deps.begin() + deps_first(g, index), g.deps.begin() + g.nodes[index].deps_end());
}

void set_deps(fb::GraphT& g, uint32_t index, const std::vector<uint32_t>& deps, const std::vector<fb::EdgeKind>& kinds) {
  splice_deps(g, index, deps, kinds);
}

// fb::Node is an immutable struct: each setter writes a new one.
void set_loc(fb::GraphT& g, uint32_t index, const fb::SourceLoc& loc) {
  const fb::Node& n = g.nodes[index];
  g.nodes[index] = fb::Node(n.op(), n.deps_end(), loc);
}

void set_op(fb::GraphT& g, uint32_t index, uint32_t op) {
  const fb::Node& n = g.nodes[index];
  g.nodes[index] = fb::Node(op, n.deps_end(), n.loc());
}

void set_deps_end(fb::GraphT& g, uint32_t index, uint32_t end) {
  const fb::Node& n = g.nodes[index];
  g.nodes[index] = fb::Node(n.op(), end, n.loc());
}

uint32_t add_node(fb::GraphT& g, uint32_t op, const std::vector<uint32_t>& deps, const fb::SourceLoc& loc) {
  g.nodes.emplace_back(op, static_cast<uint32_t>(g.deps.size()), loc);
  const uint32_t index = static_cast<uint32_t>(g.nodes.size() - 1);
  splice_deps(g, index, deps, {});
  return index;
}

uint32_t add_node(fb::PipelineT& p, fb::GraphT& g, std::unique_ptr<fb::OpT> op, const std::vector<uint32_t>& deps,
                  const fb::SourceLoc& loc) {
  p.ops.push_back(std::move(op));
  return add_node(g, static_cast<uint32_t>(p.ops.size() - 1), deps, loc);
}

void remove_node(fb::GraphT& g, uint32_t index) {
  splice_deps(g, index, {}, {});
  g.nodes.erase(g.nodes.begin() + index);
}

void drop_unused_ops(fb::PipelineT& p) {
  // Ops reachable from the top-level graphs, through the bodies of reachable ops.
  std::vector<bool> used(p.ops.size(), false);
  std::vector<const fb::GraphT*> todo;
  for (auto& g : p.graphs) todo.push_back(g.get());
  while (!todo.empty()) {
    const fb::GraphT* g = todo.back();
    todo.pop_back();
    for (const fb::Node& n : g->nodes) {
      if (n.op() >= used.size() || used[n.op()]) continue;
      used[n.op()] = true;
      if (const fb::ConditionalOpT* c = p.ops[n.op()]->body.AsConditionalOp())
        for (auto& b : c->bodies) todo.push_back(b.get());
    }
  }
  std::vector<uint32_t> index(p.ops.size(), 0);
  std::vector<std::unique_ptr<fb::OpT>> kept;
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (used[i]) {
      index[i] = static_cast<uint32_t>(kept.size());
      kept.push_back(std::move(p.ops[i]));
    }
  p.ops = std::move(kept);
  for_each_graph(p, [&](fb::GraphT& g) {
    for (uint32_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op() < index.size()) set_op(g, i, index[g.nodes[i].op()]);
  });
}

std::string pack_payload(const fb::PipelineT& pipeline) {
  FlatBufferBuilder fbb(4096);
  fb::FinishPipelineBuffer(fbb, fb::Pipeline::Pack(fbb, &pipeline));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace orch::artifact
