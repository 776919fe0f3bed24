// Diagnostics as users and tools see them: clang-style text with carets and notes, JSON for
// scripts, SARIF 2.1.0 for code-scanning UIs, and a description for every stable code.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <memory>
#include <set>

#include "support/input_file.h"
#include "tests/test_support.h"

namespace orch {
namespace {

const char* const kPipeline =
    "pipeline p\n"         // 1
    "buffer x: f32[16]\n"  // 2
    "graph main {\n"       // 3
    "\tcopy x -> y\n"      // 4: a tab indents this line
    "  fill x = 70000\n"   // 5
    "}";                   // 6: no newline at the end

SourceRange at(uint32_t file, uint32_t line, uint32_t col, uint32_t end_line, uint32_t end_col) {
  return SourceRange{file, {line, col}, {end_line, end_col}};
}

// Two files and a spread of diagnostics: an error with two notes, a warning, an error with no
// location, a range running past its line, and one in a second file.
struct Fixture {
  SourceManager sources;
  DiagnosticEngine diags;
  uint32_t main_file = 0, other_file = 0;

  Fixture() {
    main_file = sources.add("dir/p.orch", kPipeline);
    other_file = sources.add("lib.orch", "pipeline lib\ngraph g { call main }\n");
    Diagnostic& undefined = diags.error(DiagCode::E0101, at(main_file, 4, 12, 4, 13), "undefined name `y`");
    diags.add_note(undefined, at(main_file, 2, 8, 2, 9), "did you mean `x`?");
    diags.add_note(undefined, SourceRange{}, "names are declared at the top of the file");
    diags.warning(DiagCode::E0303, at(main_file, 5, 12, 5, 17), "fill value 70000 is truncated");
    diags.error(DiagCode::E0111, SourceRange{}, "unknown target 'sm_42'");
    diags.error(DiagCode::E0801, at(main_file, 3, 7, 6, 2), "graph `main` calls itself");
    diags.error(DiagCode::E0101, at(other_file, 2, 16, 2, 20), "undefined graph `main`");
  }
};

}  // namespace

TEST_SUITE("diagnostics") {
  TEST_CASE("diagnostics text rendering with notes and carets") {
    Fixture f;
    CHECK(format_diagnostics(f.diags.all(), f.sources, DiagnosticFormat::Text) ==
          "dir/p.orch:4:12: error[E0101]: undefined name `y`\n"
          "\tcopy x -> y\n"
          "\t          ^\n"
          "dir/p.orch:2:8: note: did you mean `x`?\n"
          "buffer x: f32[16]\n"
          "       ^\n"
          "<unknown>: note: names are declared at the top of the file\n"
          "dir/p.orch:5:12: warning[E0303]: fill value 70000 is truncated\n"
          "  fill x = 70000\n"
          "           ^~~~~\n"
          "<unknown>: error[E0111]: unknown target 'sm_42'\n"
          "dir/p.orch:3:7: error[E0801]: graph `main` calls itself\n"
          "graph main {\n"
          "      ^~~~~~\n"
          "lib.orch:2:16: error[E0101]: undefined graph `main`\n"
          "graph g { call main }\n"
          "               ^~~~\n"
          "4 errors and 1 warning generated.\n");
  }

  TEST_CASE("diagnostics text sorted by file and position") {
    Fixture f;
    std::vector<Diagnostic> sorted = f.diags.sorted();
    REQUIRE(sorted.size() == 5);
    // No location first, then file 1 by line, then file 2.
    CHECK(sorted[0].code == "E0111");
    CHECK(sorted[1].message == "graph `main` calls itself");
    CHECK(sorted[2].message == "undefined name `y`");
    CHECK(sorted[3].code == "E0303");
    CHECK(sorted[4].message == "undefined graph `main`");
    CHECK(f.diags.error_count() == 4);
    CHECK(f.diags.has_errors());
  }

  TEST_CASE("diagnostics text summary lines") {
    SourceManager sources;
    uint32_t file = sources.add("a.orch", "pipeline a\n");
    DiagnosticEngine none;
    CHECK(format_diagnostics(none.all(), sources, DiagnosticFormat::Text) == "");

    DiagnosticEngine one;
    one.error(DiagCode::E0001, at(file, 1, 1, 1, 9), "unexpected `pipeline`");
    CHECK(format_diagnostics(one.all(), sources, DiagnosticFormat::Text) ==
          "a.orch:1:1: error[E0001]: unexpected `pipeline`\n"
          "pipeline a\n"
          "^~~~~~~~\n"
          "1 error generated.\n");

    DiagnosticEngine warnings;
    warnings.warning(DiagCode::E0303, at(file, 1, 10, 1, 11), "first");
    warnings.warning(DiagCode::E0303, at(file, 1, 10, 1, 11), "second");
    CHECK(format_diagnostics(warnings.all(), sources, DiagnosticFormat::Text) ==
          "a.orch:1:10: warning[E0303]: first\n"
          "pipeline a\n"
          "         ^\n"
          "a.orch:1:10: warning[E0303]: second\n"
          "pipeline a\n"
          "         ^\n"
          "2 warnings generated.\n");
    CHECK_FALSE(warnings.has_errors());
  }

  TEST_CASE("diagnostics text at the end of a file and past a line") {
    SourceManager sources;
    uint32_t file = sources.add("e.orch", "pipeline e\ngraph main {\n");
    DiagnosticEngine diags;
    diags.error(DiagCode::E0001, at(file, 3, 1, 3, 2), "unexpected end of file");  // the empty last line
    diags.error(DiagCode::E0001, at(file, 2, 14, 2, 15), "past the end of the line");
    CHECK(format_diagnostics(diags.all(), sources, DiagnosticFormat::Text) ==
          "e.orch:3:1: error[E0001]: unexpected end of file\n"
          "\n"
          "^\n"
          "e.orch:2:14: error[E0001]: past the end of the line\n"
          "graph main {\n"
          "             ^\n"
          "2 errors generated.\n");
  }

  TEST_CASE("diagnostics text with color") {
    SourceManager sources;
    uint32_t file = sources.add("c.orch", "pipeline c\n");
    DiagnosticEngine diags;
    Diagnostic& d = diags.error(DiagCode::E0001, at(file, 1, 10, 1, 11), "bad");
    diags.add_note(d, at(file, 1, 1, 1, 9), "here");
    CHECK(format_diagnostics(diags.all(), sources, DiagnosticFormat::Text, true) ==
          "\033[1mc.orch:1:10: \033[1;31merror[E0001]\033[0m\033[1m: bad\033[0m\n"
          "pipeline c\n"
          "\033[1;32m         ^\033[0m\n"
          "\033[1mc.orch:1:1: \033[1;36mnote\033[0m\033[1m: here\033[0m\n"
          "pipeline c\n"
          "\033[1;32m^~~~~~~~\033[0m\n"
          "1 error generated.\n");
  }

  TEST_CASE("diagnostics json format") {
    Fixture f;
    std::string text = format_diagnostics(f.diags.sorted(), f.sources, DiagnosticFormat::Json);
    nlohmann::json j = nlohmann::json::parse(text);
    REQUIRE(j.is_object());
    REQUIRE(j["diagnostics"].is_array());
    REQUIRE(j["diagnostics"].size() == 5);

    const nlohmann::json& unknown = j["diagnostics"][0];
    CHECK(unknown["severity"] == "error");
    CHECK(unknown["code"] == "E0111");
    CHECK(unknown["message"] == "unknown target 'sm_42'");
    CHECK(unknown["location"].is_null());
    CHECK(unknown["notes"] == nlohmann::json::array());

    const nlohmann::json& undefined = j["diagnostics"][2];
    CHECK(undefined["severity"] == "error");
    CHECK(undefined["code"] == "E0101");
    CHECK(undefined["message"] == "undefined name `y`");
    CHECK(undefined["location"] == nlohmann::json{{"file", "dir/p.orch"},
                                                  {"line", 4},
                                                  {"column", 12},
                                                  {"end_line", 4},
                                                  {"end_column", 13}});
    REQUIRE(undefined["notes"].size() == 2);
    CHECK(undefined["notes"][0]["message"] == "did you mean `x`?");
    CHECK(undefined["notes"][0]["location"]["file"] == "dir/p.orch");
    CHECK(undefined["notes"][0]["location"]["line"] == 2);
    CHECK(undefined["notes"][0]["location"]["column"] == 8);
    CHECK(undefined["notes"][1]["message"] == "names are declared at the top of the file");
    CHECK(undefined["notes"][1]["location"].is_null());

    const nlohmann::json& warning = j["diagnostics"][3];
    CHECK(warning["severity"] == "warning");
    CHECK(warning["code"] == "E0303");

    const nlohmann::json& multi_line = j["diagnostics"][1];
    CHECK(multi_line["location"]["line"] == 3);
    CHECK(multi_line["location"]["end_line"] == 6);
    CHECK(multi_line["location"]["end_column"] == 2);

    CHECK(j["diagnostics"][4]["location"]["file"] == "lib.orch");

    // No diagnostics is still a document with an empty list.
    DiagnosticEngine none;
    CHECK(
        nlohmann::json::parse(format_diagnostics(none.all(), f.sources, DiagnosticFormat::Json)) ==
        nlohmann::json{{"diagnostics", nlohmann::json::array()}});
  }

  TEST_CASE("diagnostics sarif 2.1.0 structure") {
    Fixture f;
    std::string text = format_diagnostics(f.diags.sorted(), f.sources, DiagnosticFormat::Sarif);
    nlohmann::json s = nlohmann::json::parse(text);
    CHECK(s["version"] == "2.1.0");
    CHECK(s["$schema"].get<std::string>().find("sarif-2.1.0") != std::string::npos);
    REQUIRE(s["runs"].is_array());
    REQUIRE(s["runs"].size() == 1);
    const nlohmann::json& run = s["runs"][0];
    CHECK(run["tool"]["driver"]["name"] == "orchc");

    // Every code is a rule, with its description.
    const nlohmann::json& rules = run["tool"]["driver"]["rules"];
    REQUIRE(rules.is_array());
    std::vector<std::string> codes = all_diagnostic_codes();
    REQUIRE(rules.size() == codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      CAPTURE(codes[i]);
      CHECK(rules[i]["id"] == codes[i]);
      CHECK(rules[i]["shortDescription"]["text"] == describe_code(codes[i]));
    }

    const nlohmann::json& results = run["results"];
    REQUIRE(results.size() == 5);
    for (const auto& r : results) {
      CAPTURE(r.dump());
      // ruleIndex, when present, points back at the rule with the same id.
      REQUIRE(r.contains("ruleIndex"));
      CHECK(rules[r["ruleIndex"].get<size_t>()]["id"] == r["ruleId"]);
      CHECK(r["message"]["text"].is_string());
      CHECK(r["locations"].is_array());
    }

    const nlohmann::json& no_location = results[0];
    CHECK(no_location["ruleId"] == "E0111");
    CHECK(no_location["level"] == "error");

    const nlohmann::json& undefined = results[2];
    CHECK(undefined["ruleId"] == "E0101");
    CHECK(undefined["level"] == "error");
    CHECK(undefined["message"]["text"] == "undefined name `y`");
    const nlohmann::json& loc = undefined["locations"][0]["physicalLocation"];
    CHECK(loc["artifactLocation"]["uri"] == "dir/p.orch");
    CHECK(loc["region"]["startLine"] == 4);
    CHECK(loc["region"]["startColumn"] == 12);
    CHECK(loc["region"]["endLine"] == 4);
    CHECK(loc["region"]["endColumn"] == 13);
    const nlohmann::json& related = undefined["relatedLocations"];
    REQUIRE(related.size() == 2);
    CHECK(related[0]["message"]["text"] == "did you mean `x`?");
    CHECK(related[0]["physicalLocation"]["region"]["startLine"] == 2);
    CHECK(related[0]["physicalLocation"]["region"]["startColumn"] == 8);
    CHECK(related[0]["id"] == 1);
    CHECK(related[1]["message"]["text"] == "names are declared at the top of the file");
    CHECK_FALSE(related[1].contains("physicalLocation"));
    CHECK(related[1]["id"] == 2);

    CHECK(results[3]["level"] == "warning");
    CHECK_FALSE(results[3].contains("relatedLocations"));
    CHECK(results[4]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "lib.orch");
  }

  TEST_CASE("diagnostics sarif with no results") {
    SourceManager sources;
    DiagnosticEngine none;
    nlohmann::json s =
        nlohmann::json::parse(format_diagnostics(none.all(), sources, DiagnosticFormat::Sarif));
    CHECK(s["version"] == "2.1.0");
    CHECK(s["runs"][0]["results"] == nlohmann::json::array());
    CHECK(s["runs"][0]["tool"]["driver"]["rules"].size() == all_diagnostic_codes().size());
  }

  TEST_CASE("diagnostics DiagCode prints as its code") {
    CHECK(std::string(to_string(DiagCode::E0001)) == "E0001");
    CHECK(std::string(to_string(DiagCode::W0901)) == "W0901");
    const std::vector<std::string> codes = all_diagnostic_codes();
    for (size_t i = 0; i < codes.size(); ++i) CHECK(to_string(static_cast<DiagCode>(i)) == codes[i]);
    DiagnosticEngine diags;
    diags.warning(DiagCode::W0006, SourceRange{}, "another GPU's profile");
    CHECK(diags.all().at(0).code == "W0006");
  }

  TEST_CASE("diagnostics every code has a description") {
    std::vector<std::string> codes = all_diagnostic_codes();
    CHECK(codes.size() >= 50);
    std::set<std::string> seen;
    for (const std::string& code : codes) {
      CAPTURE(code);
      CHECK(seen.insert(code).second);  // listed once
      REQUIRE(code.size() == 5);
      CHECK((code[0] == 'E' || code[0] == 'W'));  // error or warning
      for (size_t i = 1; i < code.size(); ++i)
        CHECK(std::isdigit(static_cast<unsigned char>(code[i])));
      CHECK_FALSE(describe_code(code).empty());
    }
    CHECK(describe_code("E0001") == "syntax error");
    CHECK(describe_code("E0111") == "unknown target or invalid target profile");
    CHECK(describe_code("E9999") == "");
    CHECK(describe_code("") == "");
  }

  TEST_CASE("diagnostics source manager lines and positions") {
    SourceManager sources;
    uint32_t file = sources.add("s.orch", "one\r\ntwo\n\nfour");
    CHECK(sources.path(file) == "s.orch");
    CHECK(sources.line_text(file, 1) == "one");  // the \r of a CRLF file is not shown
    CHECK(sources.line_text(file, 2) == "two");
    CHECK(sources.line_text(file, 3) == "");
    CHECK(sources.line_text(file, 4) == "four");
    CHECK(sources.line_text(file, 5) == "");
    CHECK(sources.line_text(file, 0) == "");
    CHECK(sources.line_text(99, 1) == "");
    CHECK(sources.describe(at(file, 4, 2, 4, 3)) == "s.orch:4:2");
    CHECK(sources.describe(SourceRange{}) == "<unknown>");
    CHECK(sources.describe(at(99, 1, 1, 1, 2)) == "<unknown>");
  }

  TEST_CASE("diagnostics byte columns from code point columns") {
    SourceManager sources;
    // Line 1 is ASCII; line 2 has a 2-byte, a 3-byte and a 4-byte code point.
    uint32_t file = sources.add("u.orch", "ab c\nx\xc3\xa9y\xe2\x82\xacz\xf0\x9f\x98\x80w\n");
    CHECK(sources.byte_column(file, 1, 0) == 1);
    CHECK(sources.byte_column(file, 1, 3) == 4);
    CHECK(sources.byte_column(file, 1, 7) == 8);  // past the end counts on
    CHECK(sources.byte_column(file, 2, 0) == 1);  // x
    CHECK(sources.byte_column(file, 2, 1) == 2);  // é
    CHECK(sources.byte_column(file, 2, 2) == 4);  // y
    CHECK(sources.byte_column(file, 2, 3) == 5);  // €
    CHECK(sources.byte_column(file, 2, 4) == 8);  // z
    CHECK(sources.byte_column(file, 2, 5) == 9);  // the emoji
    CHECK(sources.byte_column(file, 2, 6) == 13);  // w
    CHECK(sources.byte_column(file, 2, 7) == 14);  // the end of the line
    CHECK(sources.byte_column(file, 2, 9) == 16);
    CHECK(sources.byte_column(file, 3, 0) == 1);  // the empty last line
    CHECK(sources.byte_column(99, 1, 4) == 5);
  }

  TEST_CASE("diagnostics long lines show an excerpt around the caret") {
    SourceManager sources;
    // 1000 bytes of `ab` pairs, then a 2-byte code point at byte 1001.
    std::string line;
    for (int i = 0; i < 500; ++i) line += "ab";
    line += "\xc3\xa9 tail";
    uint32_t file = sources.add("long.orch", line + "\nshort\n");
    DiagnosticEngine diags;
    diags.error(DiagCode::E0001, at(file, 1, 501, 1, 503), "in the middle");
    diags.error(DiagCode::E0001, at(file, 1, 2, 1, 3), "near the start");
    diags.error(DiagCode::E0001, at(file, 2, 1, 2, 6), "a short line");
    const std::string text = format_diagnostics(diags.sorted(), sources, DiagnosticFormat::Text);
    // Middle: bytes 373..628 (256 of them) with "..." on both sides; the caret is under byte
    // 501, 128 bytes into the excerpt.
    CHECK(text.find("long.orch:1:501: error[E0001]: in the middle\n..." + line.substr(372, 256) +
                    "...\n" + std::string(3 + 128, ' ') + "^~\n") != std::string::npos);
    // Start: the first 256 bytes, cut only after.
    CHECK(text.find("long.orch:1:2: error[E0001]: near the start\n" + line.substr(0, 256) +
                    "...\n ^\n") != std::string::npos);
    CHECK(text.find("long.orch:2:1: error[E0001]: a short line\nshort\n^~~~~\n") != std::string::npos);
    // An excerpt never splits a code point: the window ending inside `é` stops before it.
    SourceManager::Excerpt ex = sources.line_excerpt(file, 1, 874, 256);  // bytes 745..1001
    CHECK(ex.offset + ex.text.size() <= 1000);
    CHECK(ex.cut_before);
    CHECK(ex.cut_after);
    CHECK(sources.line_excerpt(file, 2, 1, 256).text == "short");
  }

  TEST_CASE("diagnostics identical reports are kept once") {
    SourceManager sources;
    uint32_t file = sources.add("d.orch", "graph main { }\n");
    DiagnosticEngine diags;
    Diagnostic& first = diags.error(DiagCode::E0101, at(file, 1, 1, 1, 6), "same");
    diags.add_note(first, at(file, 1, 7, 1, 11), "kept");
    Diagnostic& again = diags.error(DiagCode::E0101, at(file, 1, 1, 1, 6), "same");
    diags.add_note(again, at(file, 1, 7, 1, 11), "dropped with its diagnostic");
    diags.error(DiagCode::E0101, at(file, 1, 1, 1, 6), "different message");
    diags.error(DiagCode::E0102, at(file, 1, 1, 1, 6), "same");
    diags.error(DiagCode::E0101, at(file, 1, 2, 1, 6), "same");
    diags.warning(DiagCode::E0101, at(file, 1, 1, 1, 6), "same");
    CHECK(diags.all().size() == 5);
    CHECK(diags.error_count() == 4);
    CHECK(diags.all()[0].notes.size() == 1);
  }

  TEST_CASE("diagnostics context notes, innermost first, capped") {
    SourceManager sources;
    std::string text;
    for (int i = 1; i <= 20; ++i) text += "call g" + std::to_string(i) + "\n";
    uint32_t file = sources.add("c.orch", text);
    DiagnosticEngine diags;
    {
      DiagnosticEngine::ScopedContext outer(diags, at(file, 1, 1, 1, 8), "called from here");
      DiagnosticEngine::ScopedContext inner(diags, at(file, 2, 1, 2, 8), "called from here");
      Diagnostic& d = diags.error(DiagCode::E0201, at(file, 3, 1, 3, 8), "two deep");
      diags.add_note(d, at(file, 4, 1, 4, 8), "its own note");
    }
    diags.error(DiagCode::E0201, at(file, 5, 1, 5, 8), "outside");
    {
      std::vector<std::unique_ptr<DiagnosticEngine::ScopedContext>> frames;
      for (uint32_t line = 1; line <= 12; ++line)
        frames.push_back(std::make_unique<DiagnosticEngine::ScopedContext>(
            diags, at(file, line, 1, line, 8), "called from here"));
      diags.error(DiagCode::E0201, at(file, 13, 1, 13, 8), "twelve deep");
    }
    const auto& all = diags.all();
    REQUIRE(all.size() == 3);
    REQUIRE(all[0].context.size() == 2);
    CHECK(all[0].context[0].range.begin.line == 2);
    CHECK(all[0].context[1].range.begin.line == 1);
    CHECK(all[1].context.empty());
    // 12 frames: the innermost 7 (lines 12 to 6), then the outermost, which counts the rest.
    REQUIRE(all[2].context.size() == kMaxContextNotes);
    CHECK(all[2].context[0].range.begin.line == 12);
    CHECK(all[2].context[6].range.begin.line == 6);
    CHECK(all[2].context[7].range.begin.line == 1);
    CHECK(all[2].context[7].message == "called from here (4 more in between are not shown)");
    // Text: the diagnostic's own notes, then its context.
    CHECK(format_diagnostics({all[0]}, sources, DiagnosticFormat::Text) ==
          "c.orch:3:1: error[E0201]: two deep\ncall g3\n^~~~~~~\n"
          "c.orch:4:1: note: its own note\ncall g4\n^~~~~~~\n"
          "c.orch:2:1: note: called from here\ncall g2\n^~~~~~~\n"
          "c.orch:1:1: note: called from here\ncall g1\n^~~~~~~\n"
          "1 error generated.\n");
    nlohmann::json j = nlohmann::json::parse(format_diagnostics({all[0]}, sources, DiagnosticFormat::Json));
    CHECK(j["diagnostics"][0]["notes"].size() == 3);
    nlohmann::json sarif = nlohmann::json::parse(format_diagnostics({all[0]}, sources, DiagnosticFormat::Sarif));
    CHECK(sarif["runs"][0]["results"][0]["relatedLocations"].size() == 3);
  }

  TEST_CASE("read_input_file takes regular files only, up to a limit") {
    test::TempDir dir("input_file");
    const std::string path = dir.file("p.orch");
    test::write_file(path, "pipeline p\n");
    InputFile ok = read_input_file(path);
    CHECK(ok.status == InputFile::Status::Ok);
    CHECK(ok.text == "pipeline p\n");
    // At the limit is fine; one byte more is TooLarge, with the size.
    CHECK(read_input_file(path, 11).status == InputFile::Status::Ok);
    InputFile big = read_input_file(path, 10);
    CHECK(big.status == InputFile::Status::TooLarge);
    CHECK(big.size == 11);
    CHECK(big.text.empty());
    // A file whose size the file system does not report (/proc) is read to its end, and
    // limited all the same.
    InputFile proc = read_input_file("/proc/self/status");
    CHECK(proc.status == InputFile::Status::Ok);
    CHECK(proc.text.rfind("Name:", 0) == 0);
    CHECK(read_input_file("/proc/self/status", 16).status == InputFile::Status::TooLarge);
    // Not regular files: refused without reading (a FIFO without a writer would block).
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    InputFile f = read_input_file(fifo);
    CHECK(f.status == InputFile::Status::CannotRead);
    CHECK(f.error == "it is a FIFO (named pipe), not a regular file");
    CHECK(read_input_file("/dev/zero").error == "it is a character device, not a regular file");
    CHECK(read_input_file(dir.path()).error == "it is a directory, not a regular file");
    CHECK(read_input_file(dir.file("missing")).error == "No such file or directory");
    // A symbolic link to a regular file is read.
    const std::string link = dir.file("link.orch");
    REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
    CHECK(read_input_file(link).text == "pipeline p\n");
  }

}  // TEST_SUITE

}  // namespace orch
