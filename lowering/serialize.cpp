// The last pass: the lowered program as pipeline.bin (artifact/pipeline.fbs).
#include <map>

#include "artifact/artifact.h"
#include "artifact/expr_code.h"
#include "compiler/emit.h"
#include "lowering/passes.h"
#include "artifact/pipeline_generated.h"

namespace orch::lowering {

// What the checker proves and what the loader enforces must be the same numbers: a pipeline
// that checks must load (tests/rules_test.cpp and lowering/lowering_test.cpp walk both sides).
static_assert(ir::kMaxConditionalNesting == artifact::kMaxGraphDepth);
static_assert(ir::kMaxFamilySize == artifact::kMaxFamilySize);
static_assert(kCudaMaxFireAndForgetLaunches == artifact::kMaxFireAndForgetLaunches);
static_assert(kCudaMaxTailLaunches == artifact::kMaxTailLaunches);

namespace {

namespace fb = orch::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

class Serializer {
 public:
  Serializer(const ir::Program& p, const SourceManager& sources) : p_(p), sources_(sources) {}

  std::string run() {
    std::vector<Offset<fb::Param>> params;
    for (const ir::Param& x : p_.params) {
      auto name = fbb_.CreateString(x.name);
      fb::ParamBuilder b(fbb_);
      b.add_name(name);
      b.add_type(static_cast<fb::ScalarType>(x.type));
      if (x.default_evaluated) {
        // A value of the param's type: integers' bits in default_i, floats in default_f.
        b.add_has_default(true);
        if (x.default_evaluated->is_float()) b.add_default_f(x.default_evaluated->f64());
        else b.add_default_i(x.default_evaluated->i64());
      }
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      params.push_back(b.Finish());
    }
    std::vector<Offset<fb::Buffer>> buffers;
    for (const ir::Buffer& x : p_.buffers) {
      auto name = fbb_.CreateString(x.name);
      Offset<fb::Expr> count = x.count ? expr(*x.count) : 0;
      fb::BufferBuilder b(fbb_);
      b.add_name(name);
      b.add_type(static_cast<fb::ScalarType>(x.elem));
      if (x.count) b.add_count(count);
      b.add_host(x.host);
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      buffers.push_back(b.Finish());
    }
    std::vector<Offset<fb::Comm>> comms;
    for (const ir::Comm& c : p_.comms) comms.push_back(fb::CreateComm(fbb_, fbb_.CreateString(c.name)));
    std::vector<Offset<fb::Kernel>> kernels;
    for (const ir::Kernel& k : p_.kernels) kernels.push_back(kernel(k));
    std::vector<Offset<fb::Module>> modules;
    for (const ir::Module& m : p_.modules) {
      std::vector<Offset<fb::KernelImage>> images = kernel_images(m.cubins);
      auto images_v = fbb_.CreateVector(images);
      auto ptx = m.ptx.empty() ? 0 : fbb_.CreateVector(reinterpret_cast<const uint8_t*>(m.ptx.data()), m.ptx.size());
      auto ptx_arch = m.ptx_arch.empty() ? 0 : fbb_.CreateString(m.ptx_arch);
      modules.push_back(fb::CreateModule(fbb_, images_v, ptx, ptx_arch));
    }
    std::vector<Offset<fb::Graph>> graphs;
    for (const ir::Graph& g : p_.graphs) graphs.push_back(graph(g, g.body));
    std::vector<Offset<fb::ConditionalHandle>> handles;
    for (const ir::ConditionalHandle& h : p_.handles)
      handles.push_back(fb::CreateConditionalHandle(fbb_, h.graph, h.default_value, h.set_default));
    std::vector<Offset<fb::BindCheck>> checks;
    for (const ir::BindCheck& c : p_.bind_checks) {
      auto code = fbb_.CreateString(c.code);
      auto message = fbb_.CreateString(c.message);
      auto condition = expr(c.condition);
      fb::BindCheckBuilder b(fbb_);
      b.add_code(code);
      b.add_message(message);
      b.add_condition(condition);
      fb::SourceLoc l = loc(c.loc);
      b.add_loc(&l);
      b.add_family_size(c.family_size);
      checks.push_back(b.Finish());
    }
    std::vector<Offset<fb::StatusSite>> sites;
    for (const ir::StatusSite& x : p_.status_sites) {
      auto what = fbb_.CreateString(x.what);
      fb::StatusSiteBuilder b(fbb_);
      fb::SourceLoc l = loc(x.loc);
      b.add_loc(&l);
      b.add_what(what);
      sites.push_back(b.Finish());
    }
    std::vector<Offset<flatbuffers::String>> targets;
    for (const std::string& t : p_.targets) targets.push_back(fbb_.CreateString(t));
    // Source files last: every loc() above has registered the files it names.
    std::vector<Offset<flatbuffers::String>> files;
    for (uint32_t id : file_order_) files.push_back(fbb_.CreateString(sources_.path(id)));

    auto name = fbb_.CreateString(p_.name);
    auto version = fbb_.CreateString(ORCH_VERSION_STRING);
    auto files_v = fbb_.CreateVector(files);
    auto targets_v = fbb_.CreateVector(targets);
    auto params_v = fbb_.CreateVector(params);
    auto buffers_v = fbb_.CreateVector(buffers);
    auto comms_v = fbb_.CreateVector(comms);
    auto kernels_v = fbb_.CreateVector(kernels);
    auto graphs_v = fbb_.CreateVector(graphs);
    auto segments_v = fbb_.CreateVector(p_.segments);
    auto handles_v = fbb_.CreateVector(handles);
    auto checks_v = fbb_.CreateVector(checks);
    auto sites_v = fbb_.CreateVector(sites);
    auto modules_v = modules.empty() ? 0 : fbb_.CreateVector(modules);
    fb::PipelineBuilder b(fbb_);
    b.add_name(name);
    b.add_compiler_version(version);
    b.add_source_files(files_v);
    b.add_targets(targets_v);
    b.add_params(params_v);
    b.add_buffers(buffers_v);
    b.add_comms(comms_v);
    b.add_kernels(kernels_v);
    b.add_graphs(graphs_v);
    b.add_main_graph(p_.main_graph);
    b.add_segments(segments_v);
    b.add_handles(handles_v);
    b.add_bind_checks(checks_v);
    b.add_collective_hash(p_.collective_hash);
    b.add_status_sites(sites_v);
    if (!modules.empty()) b.add_modules(modules_v);
    fb::FinishPipelineBuffer(fbb_, b.Finish());
    return artifact::wrap_payload(fbb_.GetBufferPointer(), fbb_.GetSize());
  }

 private:
  fb::SourceLoc loc(const SourceRange& r) {
    if (!r.valid()) return fb::SourceLoc(0, 0, 0);
    auto [it, inserted] = file_index_.emplace(r.file, static_cast<uint32_t>(file_order_.size()));
    if (inserted) file_order_.push_back(r.file);
    return fb::SourceLoc(it->second, r.begin.line, r.begin.col);
  }

  Offset<fb::Expr> expr(const ir::Expr& e) {
    std::vector<fb::ExprInstr> code;
    for (const expr::Instr& in : ir::to_postfix(e)) code.push_back(artifact::to_fb(in));
    return fb::CreateExprDirect(fbb_, &code);
  }

  std::vector<Offset<fb::KernelImage>> kernel_images(
      const std::vector<std::pair<std::string, std::string>>& cubins) {
    std::vector<Offset<fb::KernelImage>> images;
    for (const auto& [arch, cubin] : cubins)
      images.push_back(fb::CreateKernelImage(
          fbb_, fbb_.CreateString(arch),
          fbb_.CreateVector(reinterpret_cast<const uint8_t*>(cubin.data()), cubin.size())));
    return images;
  }

  Offset<fb::Kernel> kernel(const ir::Kernel& k) {
    std::vector<Offset<fb::KernelImage>> images = kernel_images(k.cubins);
    std::vector<Offset<fb::KernelParam>> params;
    for (const ir::KernelParam& q : k.params)
      params.push_back(fb::CreateKernelParam(
          fbb_, fbb_.CreateString(q.name), static_cast<fb::KernelParamKind>(q.kind),
          static_cast<fb::ScalarType>(q.elem), static_cast<fb::Access>(q.access), q.family_size));
    auto name = fbb_.CreateString(k.name);
    auto lowered = fbb_.CreateString(k.lowered_name.empty() ? k.entry : k.lowered_name);
    auto images_v = fbb_.CreateVector(images);
    Offset<flatbuffers::Vector<uint8_t>> ptx =
        k.ptx.empty() ? 0
                      : fbb_.CreateVector(reinterpret_cast<const uint8_t*>(k.ptx.data()), k.ptx.size());
    Offset<flatbuffers::String> ptx_arch = k.ptx_arch.empty() ? 0 : fbb_.CreateString(k.ptx_arch);
    auto params_v = fbb_.CreateVector(params);
    fb::KernelBuilder b(fbb_);
    b.add_name(name);
    b.add_lowered_name(lowered);
    b.add_generated(k.generated);
    if (k.module >= 0) b.add_in_module(k.module);
    else b.add_images(images_v);
    if (!k.ptx.empty()) b.add_ptx(ptx);
    if (!k.ptx_arch.empty()) b.add_ptx_arch(ptx_arch);
    b.add_params(params_v);
    b.add_uses_device_runtime(k.uses_device_runtime);
    b.add_launches_kernels(k.launches_kernels);
    b.add_cost_flops_type(static_cast<fb::ScalarType>(k.cost_precision));
    fb::SourceLoc l = loc(k.loc);
    b.add_loc(&l);
    return b.Finish();
  }

  Offset<fb::KernelArg> arg(const ir::KernelArg& a, const ir::KernelParam& param) {
    switch (a.kind) {
      case ir::ArgKind::Value: {
        auto value = expr(a.value);
        return fb::CreateKernelArg(fbb_, fb::ArgKind::Value, static_cast<fb::ScalarType>(param.elem),
                                   value, -1);
      }
      case ir::ArgKind::Buffer: return fb::CreateKernelArg(fbb_, fb::ArgKind::Buffer, fb::ScalarType::U8, 0, a.ref);
      case ir::ArgKind::Cond:
      case ir::ArgKind::CondHandle:
        return fb::CreateKernelArg(fbb_, fb::ArgKind::CondHandle, fb::ScalarType::U8, 0, a.ref);
      case ir::ArgKind::Graph:
        return fb::CreateKernelArg(fbb_, fb::ArgKind::GraphExec, fb::ScalarType::U8, 0, a.ref);
      case ir::ArgKind::GraphFamily:
        return fb::CreateKernelArg(fbb_, fb::ArgKind::GraphTable, fb::ScalarType::U8, 0, a.ref);
      case ir::ArgKind::Status:
        return fb::CreateKernelArg(fbb_, fb::ArgKind::Status, fb::ScalarType::U8, 0, -1);
    }
    return 0;
  }

  Offset<fb::Node> node(const ir::Node& n, const std::vector<uint32_t>& deps) {
    auto what = fbb_.CreateString(describe_node(p_, n));
    auto deps_v = fbb_.CreateVector(deps);
    fb::SourceLoc l = loc(n.loc);
    switch (n.kind) {
      case ir::NodeKind::Kernel: {
        std::vector<Offset<fb::Expr>> grid, block;
        for (int i = 0; i < 3; ++i) grid.push_back(expr(n.grid[i]));
        for (int i = 0; i < 3; ++i) block.push_back(expr(n.block[i]));
        auto shared = expr(n.shared_bytes);
        std::vector<Offset<fb::KernelArg>> args;
        const ir::Kernel& k = p_.kernels[n.kernel];
        for (size_t i = 0; i < n.args.size(); ++i) args.push_back(arg(n.args[i], k.params[i]));
        auto grid_v = fbb_.CreateVector(grid);
        auto block_v = fbb_.CreateVector(block);
        auto args_v = fbb_.CreateVector(args);
        Offset<fb::Expr> cost_bytes = n.cost_bytes ? expr(*n.cost_bytes) : 0;
        Offset<fb::Expr> cost_flops = n.cost_flops ? expr(*n.cost_flops) : 0;
        fb::NodeBuilder b(fbb_);
        b.add_kind(fb::NodeKind::Kernel);
        b.add_deps(deps_v);
        b.add_loc(&l);
        b.add_what(what);
        b.add_kernel(n.kernel);
        b.add_grid(grid_v);
        b.add_block(block_v);
        b.add_shared_bytes(shared);
        b.add_args(args_v);
        if (n.cost_bytes) b.add_cost_bytes(cost_bytes);
        if (n.cost_flops) b.add_cost_flops(cost_flops);
        return b.Finish();
      }
      case ir::NodeKind::Copy:
      case ir::NodeKind::Fill: {
        fb::NodeBuilder b(fbb_);
        b.add_kind(n.kind == ir::NodeKind::Copy ? fb::NodeKind::Memcpy : fb::NodeKind::Memset);
        b.add_deps(deps_v);
        b.add_loc(&l);
        b.add_what(what);
        if (n.kind == ir::NodeKind::Copy) b.add_src(n.src);
        b.add_dst(n.dst);
        b.add_memset_value(n.memset_value);
        b.add_memset_element_size(n.memset_element_size);
        return b.Finish();
      }
      case ir::NodeKind::If:
      case ir::NodeKind::While:
      case ir::NodeKind::Switch: {
        std::vector<Offset<fb::Graph>> bodies;
        for (size_t i = 0; i < n.bodies.size(); ++i)
          bodies.push_back(graph_body(n.bodies[i]));
        auto bodies_v = fbb_.CreateVector(bodies);
        fb::NodeBuilder b(fbb_);
        b.add_kind(fb::NodeKind::Conditional);
        b.add_deps(deps_v);
        b.add_loc(&l);
        b.add_what(what);
        b.add_conditional(n.kind == ir::NodeKind::If      ? fb::ConditionalType::If
                          : n.kind == ir::NodeKind::While ? fb::ConditionalType::While
                                                          : fb::ConditionalType::Switch);
        b.add_handle(n.handle);
        b.add_bodies(bodies_v);
        return b.Finish();
      }
      case ir::NodeKind::Collective: {
        Offset<fb::Expr> root = n.root ? expr(*n.root) : 0;
        static const std::map<std::string, fb::ReduceOp> ops = {
            {"sum", fb::ReduceOp::Sum}, {"prod", fb::ReduceOp::Prod}, {"min", fb::ReduceOp::Min},
            {"max", fb::ReduceOp::Max}, {"avg", fb::ReduceOp::Avg}};
        fb::NodeBuilder b(fbb_);
        b.add_kind(fb::NodeKind::Collective);
        b.add_deps(deps_v);
        b.add_loc(&l);
        b.add_what(what);
        b.add_collective(static_cast<fb::CollectiveKind>(n.collective));
        auto op = ops.find(n.reduce_op);
        if (op != ops.end()) b.add_reduce_op(op->second);
        b.add_src(n.src);
        b.add_dst(n.dst);
        b.add_comm(n.comm);
        if (n.root) b.add_root(root);
        return b.Finish();
      }
      default: {
        // Everything else was lowered to kernels; an empty node keeps indices honest.
        fb::NodeBuilder b(fbb_);
        b.add_kind(fb::NodeKind::Empty);
        b.add_deps(deps_v);
        b.add_loc(&l);
        b.add_what(what);
        return b.Finish();
      }
    }
  }

  std::vector<Offset<fb::Node>> nodes(const ir::Region& r) {
    std::vector<std::vector<uint32_t>> deps(r.nodes.size());
    for (const ir::Edge& e : r.edges) deps[e.to].push_back(static_cast<uint32_t>(e.from));
    std::vector<Offset<fb::Node>> out;
    for (size_t i = 0; i < r.nodes.size(); ++i) out.push_back(node(r.nodes[i], deps[i]));
    return out;
  }

  Offset<fb::Graph> graph_body(const ir::Region& r) {
    auto nodes_v = fbb_.CreateVector(nodes(r));
    fb::GraphBuilder b(fbb_);
    b.add_nodes(nodes_v);
    return b.Finish();
  }

  Offset<fb::Graph> graph(const ir::Graph& g, const ir::Region& r) {
    auto name = fbb_.CreateString(g.name);
    auto nodes_v = fbb_.CreateVector(nodes(r));
    fb::GraphBuilder b(fbb_);
    b.add_name(name);
    b.add_nodes(nodes_v);
    b.add_device(g.device);
    b.add_family_size(g.family_size);
    b.add_fire_and_forget_launches(g.fire_and_forget_launches);
    b.add_tail_launches(g.tail_launches);
    return b.Finish();
  }

  const ir::Program& p_;
  const SourceManager& sources_;
  FlatBufferBuilder fbb_{1 << 16};
  std::map<uint32_t, uint32_t> file_index_;
  std::vector<uint32_t> file_order_;
};

}  // namespace

std::string serialize(const ir::Program& program, const SourceManager& sources) {
  return Serializer(program, sources).run();
}

}  // namespace orch::lowering
