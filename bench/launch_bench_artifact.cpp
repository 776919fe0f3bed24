#include "bench/launch_bench_artifact.h"

#include <chrono>
#include <memory>

#include "artifact/artifact.h"
#include "artifact/sample_pipeline.h"

namespace orch::bench {

namespace {

bool open(const std::string& path, artifact::FileBytes* file, const fb::Pipeline** p, std::string* error) {
  if (!artifact::read_file(path, artifact::kMaxFileSize, file, error)) return false;
  artifact::OpenResult r = artifact::open_pipeline(file->data(), file->size);
  if (!r.ok()) {
    *error = path + ": " + r.error;
    return false;
  }
  *p = r.pipeline;
  return true;
}

}  // namespace

bool make_programmatic(const std::string& in, const std::string& out, std::string* error) {
  artifact::FileBytes file;
  const fb::Pipeline* p = nullptr;
  if (!open(in, &file, &p, error)) return false;
  std::unique_ptr<fb::PipelineT> t(p->UnPack());
  for (auto& k : t->kernels) k->waits_at_entry = true;
  auto is_kernel = [&](const fb::GraphT& g, uint32_t node) {
    return artifact::op_kind(*t->ops[g.nodes[node].op()]) == artifact::NodeKind::Kernel;
  };
  for (auto& g : t->graphs) {
    g->dep_kinds.assign(g->deps.size(), fb::EdgeKind::Full);
    uint32_t first = 0;
    for (uint32_t i = 0; i < g->nodes.size(); ++i) {
      const uint32_t end = g->nodes[i].deps_end();
      for (uint32_t j = first; j < end && is_kernel(*g, i); ++j)
        if (is_kernel(*g, g->deps[j])) g->dep_kinds[j] = fb::EdgeKind::Programmatic;
      first = end;
    }
  }
  const std::string payload = artifact::pack_payload(*t);
  const std::string bytes = artifact::wrap_payload(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  return artifact::write_file_atomically(out, bytes, error);
}

bool first_kernel_cubin(const std::string& path, const std::string& arch, std::string* cubin, std::string* symbol,
                        std::string* error) {
  artifact::FileBytes file;
  const fb::Pipeline* p = nullptr;
  if (!open(path, &file, &p, error)) return false;
  if (!p->kernels() || p->kernels()->size() == 0 || !p->kernels()->Get(0)->images()) {
    *error = path + ": no kernel with images";
    return false;
  }
  const fb::Kernel* k = p->kernels()->Get(0);
  for (const fb::KernelImage* img : *k->images())
    if (img->arch()->str() == arch) {
      cubin->assign(reinterpret_cast<const char*>(img->cubin()->data()), img->cubin()->size());
      *symbol = k->lowered_name()->str();
      return true;
    }
  *error = path + ": no " + arch + " CUBIN for kernel " + k->name()->str();
  return false;
}

double open_us(const std::string& path, std::string* error) {
  const auto t = std::chrono::steady_clock::now();
  artifact::FileBytes file;
  const fb::Pipeline* p = nullptr;
  if (!open(path, &file, &p, error)) return -1;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace orch::bench
