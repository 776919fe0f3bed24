// NVRTC's log as orchc reads it (lowering/nvrtc_log.h): messages with their place, notes and
// instantiation points, and the diagnostics they become at the kernel's place in the .orch file.
#include "lowering/nvrtc_log.h"

#include <doctest/doctest.h>

#include <string>

namespace orch {
namespace {

TEST_CASE("NVRTC logs parse into located messages") {
  const char* log =
      "t.cu(5): error: no operator \"*=\" matches these operands\n"
      "            operand types are: S *= float\n"
      "    if (i < n) x[i] *= a;\n"
      "                    ^\n"
      "t.cu(5): note #3328-D: built-in operator*= does not match\n"
      "    if (i < n) x[i] *= a;\n"
      "                    ^\n"
      "          detected during instantiation of \"void scale(T *) [with T=S]\" at line 7\n"
      "\n"
      "inc/h.cuh(2): warning #177-D: variable \"v\" was declared but never referenced\n"
      "    int v;\n"
      "        ^\n"
      "\n"
      "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n"
      "\n"
      "1 error detected in the compilation of \"t.cu\".\n";
  auto messages = parse_nvrtc_log(log);
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].file == "t.cu");
  CHECK(messages[0].line == 5);
  CHECK(messages[0].col == 19);
  CHECK(messages[0].severity == Severity::Error);
  CHECK(messages[0].text ==
        "no operator \"*=\" matches these operands; operand types are: S *= float");
  REQUIRE(messages[0].notes.size() == 2);
  CHECK(messages[0].notes[0].text == "built-in operator*= does not match");
  CHECK(messages[0].notes[0].col == 19);
  CHECK(messages[0].notes[1].line == 7);
  CHECK(messages[1].severity == Severity::Warning);
  CHECK(messages[1].number == "177-D");
  CHECK(messages[1].col == 7);

  KernelSource s;
  s.name = "scale";
  s.file_name = "t.cu";
  s.origin = {1, {10, 1}, {10, 7}};
  auto diags = nvrtc_log_diagnostics(messages, s, true, true);
  REQUIRE(diags.size() == 2);
  CHECK(diags[1].code == "W0901");
  CHECK(diags[1].range.begin.line == 10);  // a header: at the kernel
  CHECK(diags[1].message ==
        "inc/h.cuh:2:7: variable \"v\" was declared but never referenced [#177-D]");
  CHECK(parse_nvrtc_log("nvrtc: error: invalid value for --gpu-architecture (-arch)\n").empty());
  auto odd = parse_nvrtc_log("dir(1)/x.cu(3): catastrophic error: cannot open source file \"h\"\n");
  REQUIRE(odd.size() == 1);
  CHECK(odd[0].file == "dir(1)/x.cu");
  CHECK(odd[0].line == 3);
  CHECK(odd[0].severity == Severity::Error);
  // A minified kernel's echoed line is long; parsing it must stay linear and shallow.
  std::string long_line(1 << 20, 'x');
  auto big = parse_nvrtc_log("k.cu(1): error: expected a \";\"\n  " + long_line + "\n" +
                             std::string(70000, ' ') + "^\n");
  REQUIRE(big.size() == 1);
  CHECK(big[0].col == 70000 - 1);
  CHECK(parse_nvrtc_log("").empty());
}

}  // namespace
}  // namespace orch
