// --roofline without a GPU: the analysis of recorded counts against a device's peaks, the report,
// the SVG (well-formed, points on the right side of the ridge), declared costs evaluated from a
// compiled pipeline.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <regex>

#include "tools/orch_run/costs.h"
#include "tools/orch_run/roofline.h"
#include "tools/orch_run/sites.h"
#include "tools/tests/check_output.h"
#include "tools/tests/test_util.h"

using namespace orch::run;
using namespace orch::tools_test;

namespace {

// An H200, as targets/sm_90.yaml lists it.
Peaks h200() {
  Peaks p;
  p.device = "NVIDIA H200";
  p.dram_bytes_per_s = 4.8e12;
  p.flops[0] = 133.8e12;
  p.flops[1] = 66.9e12;
  p.flops[2] = 33.5e12;
  p.source = "targets/sm_90.yaml: NVIDIA H200 datasheet";
  return p;
}

// saxpy on 2^24 floats: 12 bytes and 2 FLOPs per element, at 90% of the H200's bandwidth.
RooflinePoint saxpy() {
  RooflinePoint p;
  p.name = "saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3";
  p.place = "saxpy.orch:21:3";
  p.kernel = "saxpy";
  p.source = RooflinePoint::Source::Measured;
  p.bytes = 12.0 * (1 << 24);
  p.flops = 2.0 * (1 << 24);
  p.seconds = p.bytes / (0.9 * 4.8e12);
  return p;
}

// A dense f64 kernel far right of the ridge.
RooflinePoint dgemm() {
  RooflinePoint p;
  p.name = "dgemm<<<dim3(64, 64, 1), 256>>>  mm.orch:9:3";
  p.place = "mm.orch:9:3";
  p.kernel = "dgemm";
  p.source = RooflinePoint::Source::Declared;
  p.precision = Precision::F64;
  p.bytes = 8.0 * 3 * 4096 * 4096;
  p.flops = 2.0 * 4096.0 * 4096 * 4096;
  p.seconds = p.flops / (0.6 * 33.5e12);
  return p;
}

// The cx of each point circle, in order.
std::vector<double> circle_x(const std::string& svg) {
  std::vector<double> xs;
  const std::regex circle(R"re(<circle class="point" cx="([0-9.]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it)
    xs.push_back(std::stod((*it)[1]));
  return xs;
}

}  // namespace

TEST_CASE("roofline analysis: memory-bound saxpy near the bandwidth, compute-bound dgemm") {
  const RooflineAnalysis a = analyze(saxpy(), h200());
  CHECK(a.intensity == doctest::Approx(2.0 / 12));
  CHECK(a.bytes_per_s == doctest::Approx(0.9 * 4.8e12));
  CHECK(a.fraction_bandwidth == doctest::Approx(0.9));
  CHECK(a.ridge == doctest::Approx(66.9e12 / 4.8e12));
  CHECK(a.memory_bound);
  CHECK(a.fraction_attainable == doctest::Approx(0.9));
  CHECK(a.advice.find("memory-bound (0.167 FLOP/B, below the ridge at 13.9 FLOP/B), at 90% of DRAM bandwidth: fuse "
                      "it with the statements that read or write the same buffers, or overlap it with independent "
                      "work") == 0);
  const RooflineAnalysis b = analyze(dgemm(), h200());
  CHECK_FALSE(b.memory_bound);
  CHECK(b.ridge == doctest::Approx(33.5e12 / 4.8e12));
  CHECK(b.fraction_flops == doctest::Approx(0.6));
  CHECK(b.advice.find("compute-bound") == 0);
  CHECK(b.advice.find("launch reduction matters less") != std::string::npos);
  // A short kernel: launch gaps weigh as much.
  RooflinePoint tiny = saxpy();
  tiny.bytes = 12.0 * 4096;
  tiny.flops = 2.0 * 4096;
  tiny.seconds = 3e-6;
  CHECK(analyze(tiny, h200()).advice.find("launch and dependency gaps weigh as much as the kernel") != std::string::npos);
  // Without peaks: achieved numbers only.
  CHECK(analyze(saxpy(), Peaks{}).advice.find("no peaks for this device") == 0);
}

TEST_CASE("roofline report: which source each point has, and what is not plotted") {
  RooflineReport r;
  r.peaks = h200();
  r.points = {saxpy(), dgemm()};
  r.skipped = {"scale<<<1, 256>>>  s.orch:4:3: did not run in the profiled launches"};
  r.note = "bytes and FLOPs measured by CUPTI's range profiler";
  const std::string text = format_roofline(r);
  INFO(text);
  CHECK(text.find("roofline (NVIDIA H200: 4.80 TB/s DRAM, 33.5 TFLOP/s f64, 66.9 TFLOP/s f32, 134 TFLOP/s f16; "
                  "targets/sm_90.yaml: NVIDIA H200 datasheet):\n") == 0);
  CHECK(text.find("  saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3\n    measured (CUPTI range profiler): 201 MB, "
                  "33.6 MFLOP f32 per run") != std::string::npos);
  CHECK(text.find("4.32 TB/s") != std::string::npos);
  CHECK(text.find("90% of peak bandwidth") != std::string::npos);
  CHECK(text.find("declared (`cost` clause)") != std::string::npos);
  CHECK(text.find("not plotted: scale<<<1, 256>>>  s.orch:4:3: did not run in the profiled launches") !=
        std::string::npos);
}

TEST_CASE("roofline SVG: well-formed, points on their side of the ridge, labelled with their .orch place") {
  RooflineReport r;
  r.peaks = h200();
  r.points = {saxpy(), dgemm()};
  const std::string svg = roofline_svg(r);
  CHECK(xml_problem(svg) == "");
  const RooflineGeometry g = roofline_geometry(r);
  const std::vector<double> xs = circle_x(svg);
  REQUIRE(xs.size() == 2);
  // saxpy left of the f32 ridge (memory-bound), dgemm right of the f64 ridge (compute-bound).
  CHECK(xs[0] < g.x_of(66.9e12 / 4.8e12));
  CHECK(xs[1] > g.x_of(33.5e12 / 4.8e12));
  CHECK(xs[0] == doctest::Approx(g.x_of(2.0 / 12)).epsilon(1e-3));
  // saxpy sits just under the bandwidth slope: at 90% of it.
  CHECK(g.y_of(analyze(saxpy(), r.peaks).flops_per_s) > g.y_of(2.0 / 12 * 4.8e12));
  CHECK(svg.find("1. saxpy.orch:21:3 saxpy") != std::string::npos);
  CHECK(svg.find("2. mm.orch:9:3 dgemm") != std::string::npos);
  CHECK(svg.find("id=\"roof-f32\"") != std::string::npos);
  CHECK(svg.find("id=\"bandwidth\"") != std::string::npos);
  // Text that needs escaping stays well-formed.
  RooflinePoint odd = saxpy();
  odd.name = "k<<<a & b, \"c\">>>  x.orch:1:1";
  odd.kernel = "k<'a'>";
  r.points = {odd};
  CHECK(xml_problem(roofline_svg(r)) == "");
  // No peaks, no points: still a picture.
  CHECK(xml_problem(roofline_svg(RooflineReport{})) == "");
  // The checker itself refuses what is not XML.
  CHECK(xml_problem("<svg><g></svg>") == "</svg> closes <g>");
  CHECK(xml_problem("<svg a=1/>") == "<svg>: unquoted a");
  CHECK(xml_problem("<svg>a & b</svg>") == "text: an '&' without ';'");
  // Where xmllint is installed, it agrees.
  const std::string path = write_temp("roofline.svg", svg);
  if (std::system("command -v xmllint >/dev/null 2>&1") == 0)
    CHECK(std::system(("xmllint --noout '" + path + "'").c_str()) == 0);
}

TEST_CASE("declared costs: evaluated per launch in double precision from the params") {
  const std::string src = write_temp("costs.orch", R"(pipeline costs
param n: u32 = 1048576
param big: u64 = 1 << 40
buffer x: f32[n]
buffer y: f32[n]
kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[])
    cost bytes 12 * n, flops 2 * n
    source """extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) { }"""
kernel wide(m: u64, x: in f32[]) cost bytes 4096 * m, flops[f64] ceil_div(m, 3) << 2
    source """extern "C" __global__ void wide(unsigned long long m, const float* x) { }"""
graph main {
  saxpy<<<ceil_div(n, 256), 256>>>(n, 2.0, x, y)
  saxpy<<<1, 256>>>(n / 4, 3.0, x, y)
  wide<<<1, 32>>>(big, x)
}
)");
  std::string log;
  const std::string bin = compiled(src, &log);
  REQUIRE_MESSAGE(!bin.empty(), log);
  LoadedPipeline l = load_pipeline(bin);
  REQUIRE_MESSAGE(l.pipeline, l.error);
  SiteTable t(*l.pipeline);
  REQUIRE(t.size() == 3);
  double n = 1 << 20, big = std::ldexp(1.0, 40);
  CostLeaf leaf = [&](const orch::expr::Instr& in) -> std::optional<double> {
    if (in.kind != orch::expr::InstrKind::Param) return std::nullopt;
    return in.ref == 0 ? n : big;
  };
  DeclaredCost c = declared_cost(*l.pipeline, *t[0].node, leaf);
  CHECK(c.error == "");
  CHECK(c.has_bytes);
  CHECK(c.bytes == 12 * n);
  CHECK(c.flops == 2 * n);
  CHECK(c.flops_type == orch::fb::ScalarType::F32);
  c = declared_cost(*l.pipeline, *t[1].node, leaf);
  CHECK(c.bytes == 12 * (n / 4));
  // 4096 * 2^40 overflows u64 arithmetic, not a double.
  c = declared_cost(*l.pipeline, *t[2].node, leaf);
  CHECK(c.error == "");
  CHECK(c.bytes == 4096 * big);
  CHECK(c.flops == std::ceil(big / 3) * 4);
  CHECK(c.flops_type == orch::fb::ScalarType::F64);
  // A param the run does not know: not evaluated, and said so.
  CostLeaf none = [](const orch::expr::Instr&) -> std::optional<double> { return std::nullopt; };
  CHECK(declared_cost(*l.pipeline, *t[0].node, none).error == "its declared bytes: a value it needs is not known");

  // The evaluator alone.
  using orch::expr::Instr;
  using orch::expr::InstrKind;
  using orch::expr::Op;
  auto lit = [](int64_t v) {
    Instr i;
    i.kind = InstrKind::Const;
    i.type = orch::expr::ScalarType::I64;
    i.value = orch::expr::Value::of_int(orch::expr::ScalarType::I64, v);
    return i;
  };
  auto op = [](Op o, orch::expr::ScalarType t = orch::expr::ScalarType::I64) {
    Instr i;
    i.kind = InstrKind::Operator;
    i.op = o;
    i.type = t;
    return i;
  };
  double v = 0;
  std::string error;
  CHECK(evaluate_cost({lit(7), lit(2), op(Op::Div)}, none, &v, &error));
  CHECK(v == 3);  // integer division rounds down
  CHECK(evaluate_cost({lit(7), lit(2), op(Op::Div, orch::expr::ScalarType::F64)}, none, &v, &error));
  CHECK(v == 3.5);
  CHECK(evaluate_cost({lit(7), lit(2), op(Op::CeilDiv)}, none, &v, &error));
  CHECK(v == 4);
  CHECK(evaluate_cost({lit(3), lit(2), op(Op::Shl), lit(5), op(Op::Max)}, none, &v, &error));
  CHECK(v == 12);
  CHECK_FALSE(evaluate_cost({lit(1), lit(0), op(Op::Div)}, none, &v, &error));
  CHECK(error == "division by zero");
  CHECK_FALSE(evaluate_cost({lit(1), lit(3), op(Op::Sub)}, none, &v, &error));
  CHECK(error.find("not a count") != std::string::npos);
  CHECK_FALSE(evaluate_cost({lit(1), lit(3), op(Op::Lt, orch::expr::ScalarType::Bool)}, none, &v, &error));
  CHECK(error == "`<` is not arithmetic");
}
