#include "tools/orch_run/roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace orch::run {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "3.35 TB/s", "812 GB/s"; "66.9 TFLOP/s".
std::string si(double v, const char* unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v) + " " + prefixes[i] + unit;
}

// A power of ten as a tick label: "1 TFLOP/s", "100 GFLOP/s".
std::string si_tick(double v, const char* unit) {
  static const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (v >= 999.5 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt("%.0f", v) + " " + prefixes[i] + unit;
}

std::string percent(double f) { return fmt(f >= 0.1 ? "%.0f%%" : "%.1f%%", 100 * f); }

std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

double floor_pow10(double v) { return std::pow(10.0, std::floor(std::log10(v))); }
double ceil_pow10(double v) { return std::pow(10.0, std::ceil(std::log10(v))); }

bool plottable(const RooflinePoint& p) { return p.bytes > 0 && p.flops > 0 && p.seconds > 0; }

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F16: return "f16";
    case Precision::F32: return "f32";
    case Precision::F64: return "f64";
  }
  return "?";
}

RooflineAnalysis analyze(const RooflinePoint& p, const Peaks& peaks) {
  RooflineAnalysis a;
  const double peak = peaks.flops[static_cast<int>(p.precision)];
  const double bw = peaks.dram_bytes_per_s;
  if (p.seconds > 0) {
    a.bytes_per_s = p.bytes / p.seconds;
    a.flops_per_s = p.flops / p.seconds;
  }
  a.intensity = p.bytes > 0 ? p.flops / p.bytes : 0;
  a.ridge = bw > 0 ? peak / bw : 0;
  a.fraction_bandwidth = bw > 0 ? a.bytes_per_s / bw : 0;
  a.fraction_flops = peak > 0 ? a.flops_per_s / peak : 0;
  const double attainable = std::min(peak, a.intensity * bw);
  a.fraction_attainable = attainable > 0 ? a.flops_per_s / attainable : 0;
  a.memory_bound = p.bytes > 0 && (p.flops == 0 || a.intensity < a.ridge);
  const std::string time = si(p.seconds, "s");
  if (!peaks.known()) {
    a.advice = "no peaks for this device in the target profile: add them to place it against the roofs";
  } else if (p.bytes == 0) {
    a.advice = "moves no DRAM bytes (its data stays in cache): compute and latency decide its time";
  } else if (a.memory_bound) {
    a.advice = "memory-bound (" + fmt("%.3g", a.intensity) + " FLOP/B, below the ridge at " + fmt("%.3g", a.ridge) +
               " FLOP/B), at " + percent(a.fraction_bandwidth) +
               " of DRAM bandwidth: fuse it with the statements that read or write the same buffers, or overlap "
               "it with independent work";
    if (p.seconds < 10e-6)
      a.advice += "; at " + time + " per run, launch and dependency gaps weigh as much as the kernel";
  } else {
    a.advice = "compute-bound (" + fmt("%.3g", a.intensity) + " FLOP/B, above the ridge at " + fmt("%.3g", a.ridge) +
               " FLOP/B), at " + percent(a.fraction_flops) + " of peak " + precision_name(p.precision) +
               ": launch reduction matters less here; the kernel's own arithmetic is the cost";
  }
  return a;
}

std::string format_roofline(const RooflineReport& r) {
  std::ostringstream s;
  const Peaks& pk = r.peaks;
  s << "roofline";
  if (pk.known())
    s << " (" << pk.device << ": " << si(pk.dram_bytes_per_s, "B/s") << " DRAM, " << si(pk.flops[2], "FLOP/s")
      << " f64, " << si(pk.flops[1], "FLOP/s") << " f32, " << si(pk.flops[0], "FLOP/s") << " f16; " << pk.source
      << ")";
  else
    s << " (no peaks for " << (pk.device.empty() ? std::string("this device") : pk.device)
      << " in the target profile: achieved numbers only)";
  s << ":\n";
  if (!r.note.empty()) s << "  " << r.note << "\n";
  for (const RooflinePoint& p : r.points) {
    const RooflineAnalysis a = analyze(p, pk);
    s << "  " << p.name << "\n    "
      << (p.source == RooflinePoint::Source::Measured ? "measured (CUPTI range profiler)" : "declared (`cost` clause)")
      << ": " << si(p.bytes, "B") << ", " << si(p.flops, "FLOP") << " " << precision_name(p.precision) << " per run, "
      << si(p.seconds, "s") << " per run";
    if (p.runs != 1) s << " (" << p.runs << " runs per launch)";
    s << "\n    " << si(a.bytes_per_s, "B/s") << ", " << si(a.flops_per_s, "FLOP/s") << ", intensity "
      << fmt("%.3g", a.intensity) << " FLOP/B";
    if (pk.known())
      s << "; " << percent(a.fraction_bandwidth) << " of peak bandwidth, " << percent(a.fraction_flops) << " of peak "
        << precision_name(p.precision);
    s << "\n    " << a.advice << "\n";
  }
  if (r.points.empty()) s << "  (no kernel node has counts)\n";
  for (const std::string& k : r.skipped) s << "  not plotted: " << k << "\n";
  return s.str();
}

double RooflineGeometry::x_of(double v) const {
  const double f = (std::log10(v) - std::log10(x_min)) / (std::log10(x_max) - std::log10(x_min));
  return plot_left + f * (plot_right - plot_left);
}
double RooflineGeometry::y_of(double v) const {
  const double f = (std::log10(v) - std::log10(y_min)) / (std::log10(y_max) - std::log10(y_min));
  return plot_bottom - f * (plot_bottom - plot_top);
}

RooflineGeometry roofline_geometry(const RooflineReport& r) {
  RooflineGeometry g;
  g.width = 960;
  g.height = 600;
  g.plot_left = 110;
  g.plot_right = 640;
  g.plot_top = 50;
  g.plot_bottom = 530;
  double xlo = 1e-2, xhi = 1e2, ylo = 1e9, yhi = 1e12;
  const Peaks& pk = r.peaks;
  if (pk.known()) {
    double top = 0;
    for (double f : pk.flops) top = std::max(top, f);
    yhi = std::max(yhi, top * 2);
    for (double f : pk.flops)
      if (f > 0) xhi = std::max(xhi, f / pk.dram_bytes_per_s * 10);
  }
  for (const RooflinePoint& p : r.points) {
    if (!plottable(p)) continue;
    const RooflineAnalysis a = analyze(p, pk);
    xlo = std::min(xlo, a.intensity / 2);
    xhi = std::max(xhi, a.intensity * 2);
    ylo = std::min(ylo, a.flops_per_s / 2);
    yhi = std::max(yhi, a.flops_per_s * 2);
  }
  g.x_min = floor_pow10(xlo);
  g.x_max = ceil_pow10(xhi);
  g.y_min = floor_pow10(ylo);
  g.y_max = ceil_pow10(yhi);
  return g;
}

std::string roofline_svg(const RooflineReport& r) {
  const RooflineGeometry g = roofline_geometry(r);
  const Peaks& pk = r.peaks;
  std::ostringstream s;
  auto num = [](double v) { return fmt("%.2f", v); };
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(g.width) << "\" height=\"" << num(g.height)
    << "\" viewBox=\"0 0 " << num(g.width) << " " << num(g.height) << "\" font-family=\"Helvetica, Arial, sans-serif\""
    << " font-size=\"12\">\n";
  s << "<title>" << xml("Roofline" + (pk.device.empty() ? std::string() : " on " + pk.device)) << "</title>\n";
  s << "<rect x=\"0\" y=\"0\" width=\"" << num(g.width) << "\" height=\"" << num(g.height) << "\" fill=\"white\"/>\n";
  s << "<text x=\"" << num(g.plot_left) << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">"
    << xml("Roofline" + (pk.device.empty() ? std::string() : ": " + pk.device)) << "</text>\n";
  // Grid and ticks, one per decade.
  s << "<g id=\"axes\" stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double x = g.x_min; x <= g.x_max * 1.0001; x *= 10)
    s << "<line x1=\"" << num(g.x_of(x)) << "\" y1=\"" << num(g.plot_top) << "\" x2=\"" << num(g.x_of(x))
      << "\" y2=\"" << num(g.plot_bottom) << "\"/>\n";
  for (double y = g.y_min; y <= g.y_max * 1.0001; y *= 10)
    s << "<line x1=\"" << num(g.plot_left) << "\" y1=\"" << num(g.y_of(y)) << "\" x2=\"" << num(g.plot_right)
      << "\" y2=\"" << num(g.y_of(y)) << "\"/>\n";
  s << "</g>\n<g id=\"ticks\" fill=\"#333333\">\n";
  for (double x = g.x_min; x <= g.x_max * 1.0001; x *= 10)
    s << "<text x=\"" << num(g.x_of(x)) << "\" y=\"" << num(g.plot_bottom + 18) << "\" text-anchor=\"middle\">"
      << xml(fmt("%g", x)) << "</text>\n";
  for (double y = g.y_min; y <= g.y_max * 1.0001; y *= 10)
    s << "<text x=\"" << num(g.plot_left - 6) << "\" y=\"" << num(g.y_of(y) + 4) << "\" text-anchor=\"end\">"
      << xml(si_tick(y, "FLOP/s")) << "</text>\n";
  s << "<text x=\"" << num((g.plot_left + g.plot_right) / 2) << "\" y=\"" << num(g.plot_bottom + 42)
    << "\" text-anchor=\"middle\">arithmetic intensity (FLOP per DRAM byte)</text>\n";
  s << "<text x=\"16\" y=\"" << num((g.plot_top + g.plot_bottom) / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
    << num((g.plot_top + g.plot_bottom) / 2) << ")\">achieved FLOP/s</text>\n";
  s << "</g>\n";
  s << "<rect x=\"" << num(g.plot_left) << "\" y=\"" << num(g.plot_top) << "\" width=\"" << num(g.plot_right - g.plot_left)
    << "\" height=\"" << num(g.plot_bottom - g.plot_top) << "\" fill=\"none\" stroke=\"#333333\"/>\n";
  // The roofs: the bandwidth slope up to the highest ridge, then a roof per precision.
  if (pk.known()) {
    s << "<g id=\"roofs\" fill=\"none\" stroke-width=\"2\">\n";
    const char* colors[] = {"#2a9d8f", "#264653", "#e76f51"};
    double top_ridge = 0;
    for (int p = 0; p < 3; ++p)
      if (pk.flops[p] > 0) top_ridge = std::max(top_ridge, pk.flops[p] / pk.dram_bytes_per_s);
    const double x0 = std::max(g.x_min, g.y_min / pk.dram_bytes_per_s);
    s << "<line id=\"bandwidth\" x1=\"" << num(g.x_of(x0)) << "\" y1=\"" << num(g.y_of(x0 * pk.dram_bytes_per_s))
      << "\" x2=\"" << num(g.x_of(top_ridge)) << "\" y2=\"" << num(g.y_of(top_ridge * pk.dram_bytes_per_s))
      << "\" stroke=\"#555555\"/>\n";
    s << "<text x=\"" << num(g.x_of(x0) + 6) << "\" y=\"" << num(g.y_of(x0 * pk.dram_bytes_per_s) - 8)
      << "\" fill=\"#555555\" stroke=\"none\">" << xml("DRAM " + si(pk.dram_bytes_per_s, "B/s")) << "</text>\n";
    for (int p = 0; p < 3; ++p) {
      if (pk.flops[p] <= 0) continue;
      const double ridge = pk.flops[p] / pk.dram_bytes_per_s;
      s << "<line id=\"roof-" << precision_name(static_cast<Precision>(p)) << "\" x1=\"" << num(g.x_of(ridge))
        << "\" y1=\"" << num(g.y_of(pk.flops[p])) << "\" x2=\"" << num(g.plot_right) << "\" y2=\""
        << num(g.y_of(pk.flops[p])) << "\" stroke=\"" << colors[p] << "\"" << (p == 1 ? "" : " stroke-dasharray=\"6 4\"")
        << "/>\n";
      s << "<text x=\"" << num(g.plot_right - 4) << "\" y=\"" << num(g.y_of(pk.flops[p]) - 6)
        << "\" text-anchor=\"end\" fill=\"" << colors[p] << "\" stroke=\"none\">"
        << xml(std::string(precision_name(static_cast<Precision>(p))) + " " + si(pk.flops[p], "FLOP/s") + ", ridge " +
               fmt("%.3g", ridge) + " FLOP/B")
        << "</text>\n";
    }
    s << "</g>\n";
  }
  // The points.
  s << "<g id=\"points\">\n";
  int index = 0;
  for (const RooflinePoint& p : r.points) {
    ++index;
    if (!plottable(p)) continue;
    const RooflineAnalysis a = analyze(p, pk);
    const double x = g.x_of(a.intensity), y = g.y_of(a.flops_per_s);
    const bool measured = p.source == RooflinePoint::Source::Measured;
    s << "<circle class=\"point\" cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"5\" fill=\""
      << (measured ? "#d62828" : "white") << "\" stroke=\"#d62828\" stroke-width=\"2\">"
      << "<title>" << xml(p.name + ": " + a.advice) << "</title></circle>\n";
    s << "<text x=\"" << num(x + 8) << "\" y=\"" << num(y - 8) << "\" font-size=\"11\">" << xml(std::to_string(index))
      << "</text>\n";
  }
  s << "</g>\n";
  // The legend: every point's number, place, statement and source.
  s << "<g id=\"legend\" font-size=\"11\">\n";
  double ly = g.plot_top + 6;
  s << "<circle cx=\"" << num(g.plot_right + 24) << "\" cy=\"" << num(ly) << "\" r=\"5\" fill=\"#d62828\" stroke=\"#d62828\"/>"
    << "<text x=\"" << num(g.plot_right + 36) << "\" y=\"" << num(ly + 4) << "\">measured (CUPTI range profiler)</text>\n";
  ly += 18;
  s << "<circle cx=\"" << num(g.plot_right + 24) << "\" cy=\"" << num(ly) << "\" r=\"5\" fill=\"white\" stroke=\"#d62828\" stroke-width=\"2\"/>"
    << "<text x=\"" << num(g.plot_right + 36) << "\" y=\"" << num(ly + 4) << "\">declared (`cost` in the .orch file)</text>\n";
  ly += 28;
  index = 0;
  for (const RooflinePoint& p : r.points) {
    ++index;
    std::string line = std::to_string(index) + ". " + p.place + " " + p.kernel;
    if (!plottable(p)) line += " (not plotted: no bytes or FLOPs)";
    s << "<text x=\"" << num(g.plot_right + 18) << "\" y=\"" << num(ly) << "\">" << xml(line) << "</text>\n";
    ly += 16;
  }
  if (!pk.known())
    s << "<text x=\"" << num(g.plot_right + 18) << "\" y=\"" << num(ly + 8)
      << "\">no peaks for this device in the target profile</text>\n";
  else
    s << "<text x=\"" << num(g.plot_right + 18) << "\" y=\"" << num(std::max(ly + 8, g.plot_bottom)) << "\" font-size=\"9\" fill=\"#555555\">"
      << xml("peaks: " + pk.source) << "</text>\n";
  s << "</g>\n</svg>\n";
  return s.str();
}

}  // namespace orch::run
