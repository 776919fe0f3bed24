// validate()'s rules for kernels and modules (validate_kernels.cpp); see validate_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "artifact/validate_test_util.h"

using namespace orch::artifact;
using namespace orch::artifact::test;
namespace fb = orch::fb;

TEST_CASE("validate: kernels") {
  run({
      {"name", [](fb::PipelineT& t) { t.kernels[0]->name = ""; }, "kernel 0 has an empty name"},
      {"lowered name", [](fb::PipelineT& t) { t.kernels[0]->lowered_name = ""; },
       "kernel 'scale' has an empty lowered_name"},
      {"image arch", [](fb::PipelineT& t) { t.kernels[0]->images[1]->arch = ""; },
       "kernel 'scale' image 1 has an empty arch"},
      {"empty cubin", [](fb::PipelineT& t) { t.kernels[0]->images[0]->cubin.clear(); },
       "kernel 'scale' image 0 (sm_90) has an empty CUBIN"},
      {"duplicate arch", [](fb::PipelineT& t) { t.kernels[0]->images[1]->arch = "sm_90"; },
       "kernel 'scale' has two images for sm_90"},
      {"ptx without arch", [](fb::PipelineT& t) { t.kernels[0]->ptx_arch = ""; },
       "kernel 'scale' has PTX but no ptx_arch"},
      {"no image", [](fb::PipelineT& t) { t.kernels[2]->images.clear(); },
       "kernel 'launcher' has neither a CUBIN nor PTX"},
      {"PTX alone is enough",
       [](fb::PipelineT& t) {
         t.kernels[2]->images.clear();
         t.kernels[2]->ptx = {'/', '/'};
         t.kernels[2]->ptx_arch = "compute_90";
       },
       ""},
      {"module index", [](fb::PipelineT& t) { t.kernels[1]->in_module = 1; },
       "kernel '__orch_cond_0': module index 1 is out of range (the pipeline has 1 module)"},
      {"negative module index", [](fb::PipelineT& t) { t.kernels[1]->in_module = -2; },
       "kernel '__orch_cond_0': module index -2 is out of range (the pipeline has 1 module)"},
      {"a kernel in a module with code of its own",
       [](fb::PipelineT& t) { t.kernels[1]->ptx_arch = "compute_90"; },
       "kernel '__orch_cond_0' is in module 0 but also has images or PTX of its own"},
      {"a kernel in a module with an image of its own",
       [](fb::PipelineT& t) { t.kernels[1]->images.push_back(std::make_unique<fb::KernelImageT>(*t.kernels[0]->images[0])); },
       "kernel '__orch_cond_0' is in module 0 but also has images or PTX of its own"},
      {"a kernel moved out of its module needs code",
       [](fb::PipelineT& t) {
         t.kernels[1]->in_module = -1;
         t.modules.clear();
       },
       "kernel '__orch_cond_0' has neither a CUBIN nor PTX"},
      {"a module no kernel uses", [](fb::PipelineT& t) { t.kernels[1]->in_module = -1;
         t.kernels[1]->images.push_back(std::make_unique<fb::KernelImageT>(*t.kernels[0]->images[0])); },
       "module 0 holds no kernel's code"},
      {"module without code",
       [](fb::PipelineT& t) {
         t.modules[0]->images.clear();
         t.modules[0]->ptx.clear();
       },
       "module 0 has neither a CUBIN nor PTX"},
      {"module PTX alone is enough", [](fb::PipelineT& t) { t.modules[0]->images.clear(); }, ""},
      {"module PTX without arch", [](fb::PipelineT& t) { t.modules[0]->ptx_arch = ""; },
       "module 0 has PTX but no ptx_arch"},
      {"module duplicate arch",
       [](fb::PipelineT& t) {
         t.modules[0]->images.push_back(std::make_unique<fb::KernelImageT>(*t.modules[0]->images[0]));
       },
       "module 0 has two images for sm_90"},
      {"module empty cubin", [](fb::PipelineT& t) { t.modules[0]->images[0]->cubin.clear(); },
       "module 0 image 0 (sm_90) has an empty CUBIN"},
      {"param name", [](fb::PipelineT& t) { t.kernels[0]->params[2]->name = ""; },
       "kernel 'scale' param 2 has an empty name"},
      {"param kind",
       [](fb::PipelineT& t) { t.kernels[0]->params[0]->kind = fb::KernelParamKind(9); },
       "kernel 'scale' param 'n' has unknown kind 9"},
      {"param type", [](fb::PipelineT& t) { t.kernels[0]->params[0]->type = fb::ScalarType(13); },
       "kernel 'scale' param 'n' has unknown type 13"},
      {"param access", [](fb::PipelineT& t) { t.kernels[0]->params[2]->access = fb::Access(4); },
       "kernel 'scale' param 'x' has unknown access 4"},
      {"cost flops type", [](fb::PipelineT& t) { t.kernels[0]->cost_flops_type = fb::ScalarType::U32; },
       "kernel 'scale' has cost_flops_type 2; FLOPs are F16, F32 or F64"},
      {"cost flops type f64", [](fb::PipelineT& t) { t.kernels[0]->cost_flops_type = fb::ScalarType::F64; }, ""},
      {"loc",
       [](fb::PipelineT& t) { t.kernels[0]->loc = std::make_unique<fb::SourceLoc>(5, 1, 1); },
       "kernel 'scale': source location refers to file 5, but the pipeline lists 2 source files"},
  });
}
