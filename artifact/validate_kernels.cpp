// validate()'s rules for the kernel table and the modules: names, compiled code, parameters.
#include <string>
#include <string_view>
#include <unordered_set>

#include "artifact/validate_internal.h"

namespace orch::artifact::detail {

// The compiled code of a kernel or a module: at least a CUBIN or PTX, one CUBIN per arch.
bool Validator::check_code(const flatbuffers::Vector<flatbuffers::Offset<fb::KernelImage>>* images,
                           const flatbuffers::Vector<uint8_t>* ptx, const flatbuffers::String* ptx_arch,
                           const std::string& label) {
  std::unordered_set<std::string_view> archs;
  for (uint32_t j = 0; j < size_of(images); ++j) {
    const fb::KernelImage* image = images->Get(j);
    if (!charge(8)) return false;
    if (image->arch()->size() == 0) {
      return fail(label + " image " + std::to_string(j) + " has an empty arch");
    }
    if (image->cubin()->size() == 0) {
      return fail(label + " image " + std::to_string(j) + " (" + printable(image->arch()) +
                  ") has an empty CUBIN");
    }
    if (!archs.insert(view(image->arch())).second) {
      return fail(label + " has two images for " + printable(image->arch()));
    }
  }
  const bool has_ptx = size_of(ptx) > 0;
  if (has_ptx && empty(ptx_arch)) return fail(label + " has PTX but no ptx_arch");
  if (size_of(images) == 0 && !has_ptx) return fail(label + " has neither a CUBIN nor PTX");
  return true;
}

bool Validator::check_kernel(uint32_t i) {
  const fb::Kernel* k = kernels_->Get(i);
  if (!charge(8)) return false;
  if (empty(k->name())) return fail("kernel " + std::to_string(i) + " has an empty name");
  const std::string label = kernel_label(i);
  if (empty(k->lowered_name())) return fail(label + " has an empty lowered_name");
  const fb::ScalarType ft = k->cost_flops_type();
  if (ft != fb::ScalarType::F16 && ft != fb::ScalarType::F32 && ft != fb::ScalarType::F64)
    return fail(label + " has cost_flops_type " + std::to_string(static_cast<unsigned>(ft)) +
                "; FLOPs are F16, F32 or F64");

  if (k->in_module() != -1) {
    // The code is the module's: a kernel with code of its own as well would be ambiguous.
    std::string problem = range_problem("module index", k->in_module(), size_of(p_.modules()), "module");
    if (!problem.empty()) return fail(label + ": " + problem);
    if (size_of(k->images()) > 0 || size_of(k->ptx()) > 0 || !empty(k->ptx_arch()))
      return fail(label + " is in module " + std::to_string(k->in_module()) +
                  " but also has images or PTX of its own");
  } else if (!check_code(k->images(), k->ptx(), k->ptx_arch(), label)) {
    return false;
  }

  const auto* params = k->params();
  for (uint32_t j = 0; j < size_of(params); ++j) {
    const fb::KernelParam* q = params->Get(j);
    if (!charge(8)) return false;
    const std::string param = label + " param " + std::to_string(j);
    if (q->name()->size() == 0) return fail(param + " has an empty name");
    const std::string named_param = label + " param '" + printable(q->name()) + "'";
    if (!in_range(q->kind())) {
      return fail(named_param + " has unknown kind " +
                  std::to_string(static_cast<unsigned>(q->kind())));
    }
    if (!in_range(q->type())) {
      return fail(named_param + " has unknown type " +
                  std::to_string(static_cast<unsigned>(q->type())));
    }
    if (!in_range(q->access())) {
      return fail(named_param + " has unknown access " +
                  std::to_string(static_cast<unsigned>(q->access())));
    }
  }
  std::string problem = loc_problem(k->loc());
  if (!problem.empty()) return fail(label + ": " + problem);
  return true;
}

}  // namespace orch::artifact::detail
