#include <doctest/doctest.h>

#include <algorithm>

#include "lsp/analysis.h"

namespace orch::lsp {

namespace {

const std::string kText =
    "pipeline p\n"
    "param n: u32 = 4\n"
    "buffer x: f32[n]\n"
    "buffer s: u32\n"
    "comm world\n"
    "kernel k(n: u32, x: inout f32[]) source \"\"\" int a; \"\"\"\n"
    "graph helper { fill s = 0 }\n"
    "graph dev device { k<<<1, 32>>>(n, x) }\n"
    "graph main {\n"
    "  @\n"
    "}\n";

// The labels offered where `@` is replaced by `typed` (the cursor after it).
std::vector<std::string> labels(const std::string& typed) {
  std::string text = kText;
  size_t at = text.find('@');
  text.replace(at, 1, typed);
  std::vector<std::string> out;
  for (const CompletionItem& c : complete(text, at + typed.size(), nullptr)) out.push_back(c.label);
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

TEST_CASE("completion offers what fits where the cursor is") {
  auto start = labels("");
  CHECK(has(start, "copy"));
  CHECK(has(start, "while"));
  CHECK(has(start, "wait"));   // the NVSHMEM statements too
  CHECK(has(start, "barrier"));
  CHECK(has(start, "k"));      // a kernel launches a statement
  CHECK(has(start, "s"));      // a device scalar can be assigned
  CHECK_FALSE(has(start, "x"));
  CHECK_FALSE(has(start, "param"));
  auto typing = labels("co");  // the word being typed does not change the context
  CHECK(has(typing, "copy"));
  auto copy = labels("copy ");
  CHECK(has(copy, "x"));
  CHECK(has(copy, "s"));
  CHECK_FALSE(has(copy, "n"));
  CHECK(has(labels("copy x -> "), "x"));
  CHECK(labels("call ") == std::vector<std::string>{"helper", "main"});
  CHECK(labels("launch ") == std::vector<std::string>{"dev"});
  CHECK(has(labels("launch dev "), "tail"));
  CHECK(labels("allreduce sum x on ") == std::vector<std::string>{"world"});
  CHECK(has(labels("allreduce "), "sum"));
  auto shape = labels("k<<<ceil_div(");
  CHECK(has(shape, "n"));
  CHECK(has(shape, "ceil_div"));
  CHECK_FALSE(has(shape, "x"));
  auto args = labels("k<<<1, 32>>>(n, ");
  CHECK(has(args, "x"));
  CHECK(has(args, "dev"));
  CHECK(has(labels("while "), "kernel"));
}

TEST_CASE("my_pe and n_pes are offered where the pipeline has a symmetric buffer") {
  CHECK_FALSE(has(labels("k<<<1, 32>>>("), "my_pe"));
  std::string text = kText;
  text.replace(text.find("buffer s: u32\n"), 14, "buffer s: u32 symmetric\n");
  const size_t at = text.find('@');
  text.replace(at, 1, "k<<<1, 32>>>(");
  std::vector<std::string> got;
  for (const CompletionItem& c : complete(text, at + 13, nullptr)) got.push_back(c.label);
  CHECK(has(got, "my_pe"));
  CHECK(has(got, "n_pes"));
  CHECK(has(got, "rank"));
}

TEST_CASE("completion at the top level and in declarations") {
  std::string text = "pipeline p\nparam n: ";
  auto types = complete(text, text.size(), nullptr);
  CHECK(std::any_of(types.begin(), types.end(), [](const CompletionItem& c) { return c.label == "f32"; }));
  text = "pipeline p\n";
  auto decls = complete(text, text.size(), nullptr);
  CHECK(std::any_of(decls.begin(), decls.end(), [](const CompletionItem& c) { return c.label == "buffer"; }));
  text = "pipeline p\nkernel k(x: ";
  auto kp = complete(text, text.size(), nullptr);
  CHECK(std::any_of(kp.begin(), kp.end(), [](const CompletionItem& c) { return c.label == "inout"; }));
}

TEST_CASE("nothing in comments, strings and source blocks") {
  CHECK(complete("pipeline p // co", 16, nullptr).empty());
  CHECK(complete("pipeline p\nkernel k() source \"\"\"\n  int ", 33, nullptr).empty());
  CHECK(complete("pipeline p\nkernel k() from \"ab", 29, nullptr).empty());
  CHECK(complete("/* open", 7, nullptr).empty());
  // Any offset, any text: an answer, never a crash.
  std::string junk = "\"\"\"{{{((<<<->\"/*";
  for (size_t i = 0; i <= junk.size() + 2; ++i) complete(junk, i, nullptr);
}

}  // namespace orch::lsp

namespace orch::lsp {

TEST_CASE("a kernel's completion shows its declaration when the file was checked") {
  std::string text = kText;
  const size_t at = text.find('@');
  text.replace(at, 1, "");
  Analysis a("/tmp/c.orch", text, {});
  auto items = complete(text, at, &a);
  auto k = std::find_if(items.begin(), items.end(), [](const CompletionItem& c) { return c.label == "k"; });
  REQUIRE(k != items.end());
  CHECK(k->detail == "kernel k(n: u32, x: inout f32[])");
  CHECK(k->kind == CompletionKind::Function);
}

}  // namespace orch::lsp
