#include "support/node_name.h"

namespace orch {

std::string node_place(std::string_view file, uint32_t line, uint32_t column) {
  if (line == 0) return {};
  const size_t slash = file.find_last_of('/');
  if (slash != std::string_view::npos) file = file.substr(slash + 1);
  std::string out = file.empty() ? std::string("?") : std::string(file);
  out += ":" + std::to_string(line) + ":" + std::to_string(column);
  return out;
}

std::string node_name(std::string_view what, std::string_view file, uint32_t line, uint32_t column) {
  std::string out = what.empty() ? std::string("(generated)") : std::string(what);
  const std::string place = node_place(file, line, column);
  if (!place.empty()) out += "  " + place;
  return out;
}

}  // namespace orch
