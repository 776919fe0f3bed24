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
  for (auto& g : t->graphs)
    for (auto& n : g->nodes) {
      if (n->kind != fb::NodeKind::Kernel || n->deps.empty()) continue;
      n->dep_kinds.assign(n->deps.size(), fb::EdgeKind::Full);
      for (size_t j = 0; j < n->deps.size(); ++j)
        if (g->nodes[n->deps[j]]->kind == fb::NodeKind::Kernel) n->dep_kinds[j] = fb::EdgeKind::Programmatic;
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
