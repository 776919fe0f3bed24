// orch-run --roofline: each kernel node as a point of the roofline model (Williams, Waterman and
// Patterson, 2009): arithmetic intensity (FLOPs per byte of DRAM traffic) against achieved FLOP/s,
// under the device's bandwidth slope and compute roofs. Bytes and FLOPs are measured by CUPTI's
// range profiler (metrics.h) or, where that is not available, taken from the `cost` the kernel
// declares in the .orch file; each point says which. Times are the activity records' (the graph
// launched as usual, nothing replayed). No CUDA here: the report and the SVG are made from plain
// values, so both are tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace orch::run {

enum class Precision : uint8_t { F16 = 0, F32 = 1, F64 = 2 };
const char* precision_name(Precision p);  // "f16", "f32", "f64"

// A device's peaks, from the target profile (targets/*.yaml, `peaks`).
struct Peaks {
  std::string device;              // cudaDeviceProp::name it was chosen for: "NVIDIA H200"
  double dram_bytes_per_s = 0;     // DRAM (HBM) bandwidth
  double flops[3] = {0, 0, 0};     // f16, f32, f64 FLOP/s of the CUDA cores (FMA = 2 FLOPs)
  std::string source;              // where the numbers come from, as the profile says
  bool known() const { return dram_bytes_per_s > 0 && flops[1] > 0; }
};

struct RooflinePoint {
  std::string name;       // the node's name: "saxpy<<<ceil_div(n, 256), 256>>>  saxpy.orch:21:3"
  std::string place;      // "saxpy.orch:21:3"
  std::string kernel;     // the kernel's name in the .orch file
  enum class Source : uint8_t { Measured, Declared } source = Source::Measured;
  double bytes = 0;       // DRAM bytes moved per run
  double flops = 0;       // FLOPs per run, in `precision`
  Precision precision = Precision::F32;
  double seconds = 0;     // GPU time per run (median)
  size_t runs = 1;        // runs per launch
};

// What a point means against the peaks.
struct RooflineAnalysis {
  double intensity = 0;         // FLOP per byte (0 without bytes)
  double bytes_per_s = 0;       // achieved
  double flops_per_s = 0;       // achieved
  double ridge = 0;             // intensity where the slope meets the precision's roof
  double fraction_bandwidth = 0;
  double fraction_flops = 0;    // of the precision's peak
  double fraction_attainable = 0;  // of min(peak, intensity * bandwidth)
  bool memory_bound = true;
  std::string advice;           // what to do about it
};
RooflineAnalysis analyze(const RooflinePoint& p, const Peaks& peaks);

struct RooflineReport {
  Peaks peaks;
  std::vector<RooflinePoint> points;
  // Kernel nodes without a point, and why (no counters and no declared cost, ...).
  std::vector<std::string> skipped;
  std::string note;  // how the counters were obtained, or why they could not be measured
};

// The text orch-run prints.
std::string format_roofline(const RooflineReport& r);

// Where the SVG puts things (user units), so tests can check the picture's geometry.
struct RooflineGeometry {
  double width = 0, height = 0;
  double plot_left = 0, plot_right = 0, plot_top = 0, plot_bottom = 0;
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;  // data ranges (powers of ten)
  double x_of(double intensity) const;
  double y_of(double flops_per_s) const;
};
RooflineGeometry roofline_geometry(const RooflineReport& r);

// A standalone SVG (opens in a browser): log-log axes, the bandwidth slope and a roof per
// precision, one point per kernel node (filled: measured; hollow: declared) labelled with its
// .orch place.
std::string roofline_svg(const RooflineReport& r);

}  // namespace orch::run
