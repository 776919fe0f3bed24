// The sample pipeline, written the way lowering writes one: with FlatBufferBuilder, children
// before parents. It touches every table and every node kind, so the golden bytes change when
// any part of the schema does. Nothing here may depend on time, addresses or the environment.
//
//   pipeline sample                      graphs: [0] main     (segment 0)
//   param n: u32 = 1 << 20                       [1] main.1   (segment 1, launches expert)
//   param tol: f32 = 1e-6                        [2] expert   (device, fire-and-forget)
//   param mode: i32                       handles: [0] owned by main, drives node 4
//                                         modules: [0] the code of __orch_cond_0
//   buffer u, v: f32[n]; u_host: f32[n] host; flag: u32; counts: i32[ceil_div(n, 256) * 2]
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
    const auto root =
        fb::CreatePipeline(fbb_, name, compiler, files, targets, params, buffers, comms, kernels,
                           graphs, kMain, segments, handles, checks, 0x0123456789ABCDEFull,
                           /*status_sites=*/0, modules);
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

  // scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, buffer)
  Offset<fb::Node> scale_node(int buffer, std::vector<uint32_t> deps, fb::SourceLoc loc,
                              const char* what) {
    const auto grid = shape({param(kN), lit(256), op(fb::ExprOp::CeilDiv)});
    const auto block = shape({lit(256)});
    const std::vector<Offset<fb::KernelArg>> args = {
        fb::CreateKernelArg(fbb_, fb::ArgKind::Value, fb::ScalarType::U32, expr({param(kN)})),
        fb::CreateKernelArg(fbb_, fb::ArgKind::Value, fb::ScalarType::F32,
                            expr({param(kTol), flt(2.0), op(fb::ExprOp::Mul, F32)})),
        fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::F32, 0, buffer),
    };
    const auto args_offset = fbb_.CreateVector(args);
    const auto deps_offset = fbb_.CreateVector(deps);
    const auto what_offset = fbb_.CreateString(what);
    return fb::CreateNode(fbb_, fb::NodeKind::Kernel, deps_offset, &loc, what_offset, kScale, grid,
                          block, 0, args_offset);
  }

  Offset<fb::Node> memcpy_node(int src, int dst, std::vector<uint32_t> deps, fb::SourceLoc loc,
                               const char* what) {
    const auto deps_offset = fbb_.CreateVector(deps);
    const auto what_offset = fbb_.CreateString(what);
    return fb::CreateNode(fbb_, fb::NodeKind::Memcpy, deps_offset, &loc, what_offset, -1, 0, 0, 0,
                          0, src, dst);
  }

  Offset<fb::Node> memset_node(int dst, uint32_t value, uint8_t size, std::vector<uint32_t> deps,
                               fb::SourceLoc loc, const char* what) {
    const auto deps_offset = fbb_.CreateVector(deps);
    const auto what_offset = fbb_.CreateString(what);
    return fb::CreateNode(fbb_, fb::NodeKind::Memset, deps_offset, &loc, what_offset, -1, 0, 0, 0,
                          0, -1, dst, value, size);
  }

  Offset<fb::Graph> graph(const char* name, const std::vector<Offset<fb::Node>>& nodes,
                          bool device = false, uint64_t fire_and_forget = 0) {
    const auto name_offset = name ? fbb_.CreateString(name) : Offset<flatbuffers::String>();
    const auto nodes_offset = fbb_.CreateVector(nodes);
    return fb::CreateGraph(fbb_, name_offset, nodes_offset, device, 0, fire_and_forget, 0);
  }

  Offset<fb::Graph> build_main() {
    std::vector<Offset<fb::Node>> nodes;
    nodes.push_back(memcpy_node(kUHost, kU, {}, {0, 10, 3}, "copy u_host -> u"));
    nodes.push_back(memset_node(kFlag, 0, 4, {}, {0, 11, 3}, "fill flag = 0"));
    nodes.push_back(
        scale_node(kU, {0}, {0, 12, 3}, "scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, u)"));
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
      const auto deps = fbb_.CreateVector<uint32_t>({1, 2});
      const auto kinds = fbb_.CreateVector<fb::EdgeKind>({fb::EdgeKind::Full, fb::EdgeKind::Programmatic});
      const auto what = fbb_.CreateString("condition of: if flag == 0");
      const fb::SourceLoc loc(0, 13, 3);
      nodes.push_back(fb::CreateNode(fbb_, fb::NodeKind::Kernel, deps, &loc, what, kSetFlag, grid,
                                     block, shared, args_offset, -1, -1, 0, 0, fb::ConditionalType::If,
                                     -1, 0, fb::CollectiveKind::AllReduce, fb::ReduceOp::Sum, -1, 0,
                                     /*cost_bytes=*/0, /*cost_flops=*/0, kinds));
    }
    {
      const auto then_body = graph(
          "then",
          {scale_node(kV, {}, {0, 14, 5}, "scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, v)")});
      const auto else_body =
          graph(nullptr, {memset_node(kCounts, 0xFFFF, 2, {}, {0, 16, 5}, "fill counts = -1")});
      const auto bodies = fbb_.CreateVector(std::vector<Offset<fb::Graph>>{then_body, else_body});
      const auto deps = fbb_.CreateVector<uint32_t>({3});
      const auto what = fbb_.CreateString("if flag == 0");
      const fb::SourceLoc loc(0, 13, 3);
      nodes.push_back(fb::CreateNode(fbb_, fb::NodeKind::Conditional, deps, &loc, what, -1, 0, 0, 0,
                                     0, -1, -1, 0, 0, fb::ConditionalType::If, 0, bodies));
    }
    nodes.push_back(fb::CreateNode(fbb_, fb::NodeKind::Empty, fbb_.CreateVector<uint32_t>({4})));
    return graph("main", nodes);
  }

  Offset<fb::Graph> build_main_tail() {
    std::vector<Offset<fb::Node>> nodes;
    {
      // A launch shape of constants: one struct instead of expressions (format 3).
      const fb::LaunchShape launch(8, 1, 1, 32, 1, 1, 0);
      const std::vector<Offset<fb::KernelArg>> args = {
          fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::F32, 0, kU),
          fb::CreateKernelArg(fbb_, fb::ArgKind::GraphExec, fb::ScalarType::U8, 0, kExpert),
      };
      const auto args_offset = fbb_.CreateVector(args);
      const auto what = fbb_.CreateString("launcher<<<8, 32>>>(u, expert)");
      const fb::SourceLoc loc(0, 18, 3);
      fb::NodeBuilder b(fbb_);
      b.add_kind(fb::NodeKind::Kernel);
      b.add_loc(&loc);
      b.add_what(what);
      b.add_kernel(kLauncher);
      b.add_args(args_offset);
      b.add_launch(&launch);
      nodes.push_back(b.Finish());
    }
    {
      const auto deps = fbb_.CreateVector<uint32_t>({0});
      const auto what = fbb_.CreateString("allreduce sum u on world");
      const fb::SourceLoc loc(0, 19, 3);
      nodes.push_back(fb::CreateNode(fbb_, fb::NodeKind::Collective, deps, &loc, what, -1, 0, 0, 0,
                                     0, kU, kU, 0, 0, fb::ConditionalType::If, -1, 0,
                                     fb::CollectiveKind::AllReduce, fb::ReduceOp::Sum, 0));
    }
    nodes.push_back(memcpy_node(kU, kUHost, {1}, {0, 20, 3}, "copy u -> u_host"));
    return graph("main.1", nodes, false, 1);
  }

  Offset<fb::Graph> build_expert() {
    return graph(
        "expert",
        {scale_node(kV, {}, {0, 24, 3}, "scale<<<ceil_div(n, 256), 256>>>(n, tol * 2, v)")}, true);
  }

  FlatBufferBuilder fbb_{4096};
};

}  // namespace

std::string sample_payload() { return SampleBuilder().build(); }

std::string sample_artifact() {
  const std::string payload = sample_payload();
  return wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
}

std::string pack_payload(const fb::PipelineT& pipeline) {
  FlatBufferBuilder fbb(4096);
  fb::FinishPipelineBuffer(fbb, fb::Pipeline::Pack(fbb, &pipeline));
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

}  // namespace orch::artifact
