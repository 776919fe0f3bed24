// Checks of what orch-run writes, shared by the CPU tests (made from recorded activity) and the
// GPU tests (made by real runs): a trace is valid JSON, obeys tools/tests/trace_schema.json (built
// into the tests), and every thread's complete events nest (what chrome://tracing and Perfetto
// need to draw them); an SVG is well-formed XML.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tools/tests/json_schema.h"

namespace orch::tools_test {

inline const char* trace_schema_text() {
  return
#include "trace_schema.inc"
      ;
}

// "" or what is wrong with a trace's text.
inline std::string trace_problem(const std::string& text, nlohmann::json* parsed = nullptr) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return "not valid JSON";
  std::string e = JsonSchema(nlohmann::json::parse(trace_schema_text())).validate(doc);
  if (!e.empty()) return "schema: " + e;
  // Complete events of one thread must nest: each starts after the enclosing one starts and ends
  // before it ends, or after it has ended.
  std::map<std::pair<long long, long long>, std::vector<std::pair<double, double>>> threads;
  for (const auto& ev : doc["traceEvents"])
    if (ev["ph"] == "X")
      threads[{ev["pid"].get<long long>(), ev["tid"].get<long long>()}].push_back(
          {ev["ts"].get<double>(), ev["ts"].get<double>() + ev["dur"].get<double>()});
  const double eps = 1e-6;
  for (auto& [thread, slices] : threads) {
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;
    for (const auto& [start, end] : slices) {
      while (!open.empty() && open.back() <= start + eps) open.pop_back();
      if (!open.empty() && end > open.back() + eps)
        return "pid " + std::to_string(thread.first) + " tid " + std::to_string(thread.second) +
               ": a slice [" + std::to_string(start) + ", " + std::to_string(end) + "] overlaps one ending at " +
               std::to_string(open.back()) + " without nesting in it";
      open.push_back(end);
    }
  }
  if (parsed) *parsed = std::move(doc);
  return "";
}

// "" or the first reason `text` is not well-formed XML (elements nest and match, attributes are
// quoted and unique, references are the five predefined entities or character references).
inline std::string xml_problem(const std::string& text) {
  size_t i = 0;
  std::vector<std::string> open;
  bool root_seen = false;
  auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.';
  };
  auto check_refs = [](const std::string& s) -> std::string {
    for (size_t k = s.find('&'); k != std::string::npos; k = s.find('&', k + 1)) {
      const size_t semi = s.find(';', k);
      if (semi == std::string::npos) return "an '&' without ';'";
      const std::string ref = s.substr(k + 1, semi - k - 1);
      if (ref != "lt" && ref != "gt" && ref != "amp" && ref != "quot" && ref != "apos" &&
          !(ref.size() > 1 && ref[0] == '#'))
        return "unknown entity &" + ref + ";";
    }
    return "";
  };
  while (i < text.size()) {
    const size_t lt = text.find('<', i);
    const std::string chars = text.substr(i, lt == std::string::npos ? std::string::npos : lt - i);
    if (std::string e = check_refs(chars); !e.empty()) return "text: " + e;
    if (lt == std::string::npos) break;
    if (open.empty() && root_seen && text.compare(lt, 2, "<?") != 0 && text.compare(lt, 4, "<!--") != 0)
      return "content after the root element";
    if (text.compare(lt, 4, "<!--") == 0) {
      const size_t end = text.find("-->", lt);
      if (end == std::string::npos) return "an unterminated comment";
      i = end + 3;
      continue;
    }
    if (text.compare(lt, 2, "<?") == 0) {
      const size_t end = text.find("?>", lt);
      if (end == std::string::npos) return "an unterminated declaration";
      i = end + 2;
      continue;
    }
    const size_t gt = text.find('>', lt);
    if (gt == std::string::npos) return "an unterminated tag";
    std::string tag = text.substr(lt + 1, gt - lt - 1);
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes " + (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
      open.pop_back();
      i = gt + 1;
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    size_t k = 0;
    while (k < tag.size() && name_char(tag[k])) ++k;
    const std::string name = tag.substr(0, k);
    if (name.empty()) return "a tag without a name";
    std::vector<std::string> attributes;
    while (k < tag.size()) {
      while (k < tag.size() && std::isspace(static_cast<unsigned char>(tag[k]))) ++k;
      if (k >= tag.size()) break;
      const size_t a = k;
      while (k < tag.size() && name_char(tag[k])) ++k;
      const std::string attr = tag.substr(a, k - a);
      if (attr.empty() || k >= tag.size() || tag[k] != '=') return "<" + name + ">: a malformed attribute";
      if (std::find(attributes.begin(), attributes.end(), attr) != attributes.end())
        return "<" + name + ">: attribute " + attr + " twice";
      attributes.push_back(attr);
      ++k;
      if (k >= tag.size() || (tag[k] != '"' && tag[k] != '\'')) return "<" + name + ">: unquoted " + attr;
      const char q = tag[k];
      const size_t close = tag.find(q, k + 1);
      if (close == std::string::npos) return "<" + name + ">: unterminated " + attr;
      const std::string value = tag.substr(k + 1, close - k - 1);
      if (value.find('<') != std::string::npos) return "<" + name + ">: '<' in " + attr;
      if (std::string e = check_refs(value); !e.empty()) return "<" + name + "> " + attr + ": " + e;
      k = close + 1;
    }
    if (open.empty()) root_seen = true;
    if (!self_closing) open.push_back(name);
    i = gt + 1;
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!root_seen) return "no root element";
  return "";
}

}  // namespace orch::tools_test
