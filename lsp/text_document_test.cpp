#include "lsp/text_document.h"

#include <doctest/doctest.h>

namespace orch::lsp {

TEST_CASE("positions count UTF-16 units or bytes as negotiated") {
  // `é` is 2 bytes and 1 UTF-16 unit; U+1F600 is 4 bytes and 2 units.
  TextDocument d("ab\n\xc3\xa9x\xf0\x9f\x98\x80y\r\nlast", 1);
  CHECK(d.line_count() == 3);
  CHECK(d.offset({1, 1}, PositionEncoding::Utf16) == 5);  // after é
  CHECK(d.offset({1, 4}, PositionEncoding::Utf16) == 10);  // after the emoji
  CHECK(d.offset({1, 3}, PositionEncoding::Utf8) == 6);
  CHECK(d.position(10, PositionEncoding::Utf16).character == 4);
  CHECK(d.position(10, PositionEncoding::Utf8).character == 7);
  // orch's byte columns, 1-based.
  SourcePos p = d.source_pos({1, 4}, PositionEncoding::Utf16);
  CHECK(p.line == 2);
  CHECK(p.col == 8);
  CHECK(d.lsp_position(p, PositionEncoding::Utf16).character == 4);
}

TEST_CASE("out-of-range positions are clamped, never thrown about") {
  TextDocument d("one\ntwo", 0);
  CHECK(d.offset({-5, -5}, PositionEncoding::Utf16) == 0);
  CHECK(d.offset({0, 99}, PositionEncoding::Utf16) == 3);   // end of line 0, before its newline
  CHECK(d.offset({42, 0}, PositionEncoding::Utf16) == 7);   // past the last line: the end
  CHECK(d.position(1000, PositionEncoding::Utf16).line == 1);
}

TEST_CASE("incremental edits") {
  TextDocument d("graph main {\n  copy a -> b\n}\n", 1);
  d.replace({{1, 7}, {1, 8}}, "x_host", PositionEncoding::Utf16);
  CHECK(d.text() == "graph main {\n  copy x_host -> b\n}\n");
  d.replace({{2, 0}, {0, 12}}, "", PositionEncoding::Utf16);  // reversed: swapped
  CHECK(d.text() == "graph main {}\n");
  d.replace({{9, 9}, {9, 9}}, "// end", PositionEncoding::Utf16);
  CHECK(d.text() == "graph main {}\n// end");
}

TEST_CASE("file URIs and paths") {
  CHECK(uri_to_path("file:///home/me/my%20pipe.orch") == "/home/me/my pipe.orch");
  CHECK(uri_to_path("file://localhost/a.orch") == "/a.orch");
  CHECK(uri_to_path("untitled:Untitled-1") == "untitled:Untitled-1");
  CHECK(uri_to_path("file:///bad%zzname%") == "/bad%zzname%");
  CHECK(path_to_uri("/home/me/my pipe.orch") == "file:///home/me/my%20pipe.orch");
  CHECK(uri_to_path(path_to_uri("/a b/c#d.orch")) == "/a b/c#d.orch");
}

}  // namespace orch::lsp
