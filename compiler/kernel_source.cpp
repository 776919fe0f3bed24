#include "compiler/kernel_source.h"

#include <cctype>
#include <cstring>

namespace orch {

namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether the ' at `at` continues a number (0x7FFF'FFFF), not a character literal.
bool in_number(const std::string& code, size_t at) {
  size_t k = at;
  while (k > 0 && ident_char(code[k - 1])) --k;
  return k < at && std::isdigit(static_cast<unsigned char>(code[k]));
}

// The code with comments and string and character literals blanked (newlines kept), so that
// offsets still match the original and nothing inside them looks like code.
std::string mask(const std::string& code) {
  std::string out = code;
  const size_t n = code.size();
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < n; ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  size_t i = 0;
  while (i < n) {
    char c = code[i];
    if (c == '/' && i + 1 < n && code[i + 1] == '/') {
      size_t end = code.find('\n', i);
      if (end == std::string::npos) end = n;
      blank(i, end);
      i = end;
    } else if (c == '/' && i + 1 < n && code[i + 1] == '*') {
      size_t end = code.find("*/", i + 2);
      end = end == std::string::npos ? n : end + 2;
      blank(i, end);
      i = end;
    } else if (c == '"' && i > 0 && code[i - 1] == 'R' &&
               (i < 2 || !ident_char(code[i - 2]) || code[i - 2] == '8' || code[i - 2] == 'L' ||
                code[i - 2] == 'u' || code[i - 2] == 'U')) {
      // A raw string: R"delim( ... )delim".
      size_t open = code.find('(', i);
      if (open == std::string::npos || open - i > 17) {
        blank(i, n);
        break;
      }
      std::string close = ")" + code.substr(i + 1, open - i - 1) + "\"";
      size_t end = code.find(close, open);
      end = end == std::string::npos ? n : end + close.size();
      blank(i, end);
      i = end;
    } else if (c == '"' || (c == '\'' && !in_number(code, i))) {
      // A string or character literal (a ' inside a number is a digit separator: 1'000).
      size_t j = i + 1;
      while (j < n && code[j] != c && code[j] != '\n') j += code[j] == '\\' ? 2 : 1;
      size_t end = j < n && code[j] == c ? j + 1 : j;
      blank(i, end);
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

// The offset just past the bracket that closes the one at `open`, or npos.
size_t match(const std::string& s, size_t open, char o, char c) {
  int depth = 0;
  for (size_t k = open; k < s.size(); ++k) {
    if (s[k] == o) ++depth;
    if (s[k] == c && --depth == 0) return k + 1;
  }
  return std::string::npos;
}

bool is_word_at(const std::string& s, size_t at, const char* word) {
  size_t len = std::strlen(word);
  return s.compare(at, len, word) == 0 && (at == 0 || !ident_char(s[at - 1])) &&
         (at + len >= s.size() || !ident_char(s[at + len]));
}

bool contains_word(const std::string& s, size_t from, size_t to, const char* word) {
  for (size_t at = s.find(word, from); at != std::string::npos && at < to;
       at = s.find(word, at + 1))
    if (is_word_at(s, at, word)) return true;
  return false;
}

// Names whose call launches a kernel from the device (cuda_device_runtime_api.h; `<<<` in
// device code compiles to cudaGetParameterBuffer + cudaLaunchDevice).
constexpr const char* kLaunchCalls[] = {"cudaLaunchDevice",
                                        "cudaLaunchDeviceV2",
                                        "cudaLaunchDevice_ptsz",
                                        "cudaLaunchDeviceV2_ptsz",
                                        "__cudaCDP2LaunchDevice",
                                        "__cudaCDP2LaunchDeviceV2",
                                        "__cudaCDP2LaunchDevice_ptsz",
                                        "__cudaCDP2LaunchDeviceV2_ptsz"};

// The first device-side launch in [from, to): its offset and length, or npos.
std::pair<size_t, size_t> find_launch(const std::string& s, size_t from, size_t to) {
  size_t best = std::string::npos, length = 0;
  size_t chevrons = s.find("<<<", from);
  if (chevrons < to) best = chevrons, length = 3;
  for (const char* name : kLaunchCalls) {
    for (size_t at = s.find(name, from); at != std::string::npos && at < to && at < best;
         at = s.find(name, at + 1)) {
      if (is_word_at(s, at, name)) {
        best = at, length = std::strlen(name);
        break;
      }
    }
  }
  return {best, length};
}

}  // namespace

KernelSourceScan scan_kernel_source(const std::string& code, const std::string& entry) {
  KernelSourceScan out;
  const std::string m = mask(code);
  out.mentions_launch = find_launch(m, 0, m.size()).first != std::string::npos;

  // "ns::scale<float>" -> "scale"
  std::string name = entry.substr(0, entry.find('<'));
  if (size_t colons = name.rfind("::"); colons != std::string::npos) name = name.substr(colons + 2);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.front()))) name.erase(0, 1);
  if (name.empty()) return out;

  for (size_t at = m.find(name); at != std::string::npos; at = m.find(name, at + 1)) {
    if (!is_word_at(m, at, name.c_str())) continue;
    size_t open = at + name.size();
    while (open < m.size() && std::isspace(static_cast<unsigned char>(m[open]))) ++open;
    if (open >= m.size() || m[open] != '(') continue;
    // The declaration starts after the previous statement, block or preprocessor line.
    size_t start = m.find_last_of(";{}#", at);
    start = start == std::string::npos ? 0 : start + 1;
    if (!contains_word(m, start, at, "__global__")) continue;
    size_t close = match(m, open, '(', ')');
    if (close == std::string::npos) return out;
    // Past attributes and qualifiers to the body, or to `;` for a declaration.
    size_t k = close;
    int depth = 0;
    for (; k < m.size(); ++k) {
      if (m[k] == '(') ++depth;
      if (m[k] == ')') --depth;
      if (depth == 0 && (m[k] == '{' || m[k] == ';')) break;
    }
    if (k >= m.size() || m[k] == ';') continue;  // a declaration: the definition comes later
    size_t body_end = match(m, k, '{', '}');
    if (body_end == std::string::npos) body_end = m.size();
    out.signature = at;
    auto [launch, length] = find_launch(m, k, body_end);
    out.launch = launch;
    out.launch_length = length;
    return out;
  }
  return out;
}

}  // namespace orch
