// The name of a pipeline node for people, one function for every view of a pipeline, so a DAG
// drawn by `orchc --emit=dot` and a timeline or table of orch-run (--nodes, --trace, --roofline)
// can be read side by side: the statement as orchc describes it, then where it is written.
//
//   sweep<<<ceil_div(n, 256), 256>>>  jacobi.orch:27:5
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace orch {

// "jacobi.orch:27:5": the file's last path component, the line and the column (1-based). An
// empty file is "?"; line 0 (no place) gives "".
std::string node_place(std::string_view file, uint32_t line, uint32_t column);

// "<what>  <place>", or just `what` without a place; `what` empty reads "(generated)".
std::string node_name(std::string_view what, std::string_view file, uint32_t line, uint32_t column);

}  // namespace orch
