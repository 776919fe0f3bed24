#!/usr/bin/env python3
"""orch-lsp driven as an editor drives it: a real session over stdio (ctest: orch_lsp_session).

  lsp_session_test.py ORCH_LSP ORCHC SOURCE_DIR WORK_DIR

Opens a file with three errors and expects three diagnostics at the right ranges, the same
codes, messages and places as `orchc --check --no-kernels --diagnostics-format=json`; fixes one
with an incremental change and expects two; asks hover, definition, references, document
symbols and completion on the project's examples; sends malformed messages and requests and
expects error replies with the server still answering; saves a file whose kernel does not
compile and expects NVRTC's error at its line in the source block; ends with shutdown and exit
(exit code 0). Prints one line per check; exits non-zero on the first failure.
"""
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import lsp_client  # noqa: E402

THREE_ERRORS = """pipeline three
param n: u32 = 1024
buffer a: f32[n]
buffer b: i32[n]
kernel k(n: u32, a: inout f32[]) source \"\"\"
extern "C" __global__ void k(unsigned n, float* a) {}
\"\"\"
graph main {
  k<<<1, 2048>>>(n, a)
  copy a -> b
  fill c = 0
}
"""

checks = 0


def check(condition, what, detail=None):
    global checks
    if not condition:
        print("FAIL:", what)
        if detail is not None:
            print("  got:", json.dumps(detail, indent=1)[:3000])
        sys.exit(1)
    checks += 1
    print("ok:", what)


def rng(l0, c0, l1, c1):
    return {"start": {"line": l0, "character": c0}, "end": {"line": l1, "character": c1}}


def at(doc_uri, line, character):
    return {"textDocument": {"uri": doc_uri}, "position": {"line": line, "character": character}}


def position_of(text, needle, shift=0, nth=0):
    """LSP position (UTF-16 = bytes here: the examples are ASCII) of a piece of text."""
    at_ = -1
    for _ in range(nth + 1):
        at_ = text.index(needle, at_ + 1)
    at_ += shift
    line = text.count("\n", 0, at_)
    return line, at_ - (text.rfind("\n", 0, at_) + 1)


def main():
    server, orchc, source_dir, work_dir = sys.argv[1:5]
    source_dir = pathlib.Path(source_dir)
    work_dir = pathlib.Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ORCH_TARGETS_DIR=str(source_dir / "targets"),
               ORCH_CACHE_DIR=str(work_dir / "cache"))
    # A debounce of 50 ms: two changes sent together are one burst even on a loaded machine.
    client = lsp_client.Client(server, ["--kernel-cache-dir", str(work_dir / "cache" / "kernels"), "--debounce-ms", "50"],
                               env=env)
    try:
        run(client, orchc, source_dir, work_dir, env)
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
    print(f"{checks} checks passed")


def run(client, orchc, source_dir, work_dir, env):
    init = client.initialize()
    caps = init["result"]["capabilities"]
    check(caps["positionEncoding"] == "utf-16" and caps["textDocumentSync"]["change"] == 2,
          "initialize: UTF-16 positions, incremental sync", caps)

    # ---- three errors, then two ---------------------------------------------------------------
    three = work_dir / "three.orch"
    three.write_text(THREE_ERRORS)
    doc = lsp_client.uri(three)
    client.open(doc, THREE_ERRORS, version=1)
    diags = client.diagnostics(doc, version=1)["params"]["diagnostics"]
    check([d["code"] for d in diags] == ["E0201", "E0301", "E0101"], "three errors, three diagnostics", diags)
    check(diags[0]["range"] == rng(8, 9, 8, 13), "E0201 on the block size `2048`", diags[0])
    check(diags[1]["range"] == rng(9, 2, 9, 13), "E0301 on `copy a -> b`", diags[1])
    check(diags[2]["range"] == rng(10, 7, 10, 8), "E0101 on `c`", diags[2])
    check([r["message"] for r in diags[1].get("relatedInformation", [])] ==
          ["`a` is declared here", "`b` is declared here"] and
          diags[1]["relatedInformation"][0]["location"]["range"] == rng(2, 0, 2, 16),
          "E0301's notes as related locations", diags[1])
    # The same diagnostics as orchc's.
    out = subprocess.run([orchc, "--check", "--no-kernels", "--diagnostics-format=json", str(three)],
                         capture_output=True, text=True, env=env)
    orchc_diags = json.loads(out.stdout)["diagnostics"]
    mine = [(d["code"], d["message"], d["range"]["start"]["line"] + 1, d["range"]["start"]["character"] + 1,
             d["range"]["end"]["line"] + 1, d["range"]["end"]["character"] + 1) for d in diags]
    theirs = [(d["code"], d["message"], d["location"]["line"], d["location"]["column"],
               d["location"]["end_line"], d["location"]["end_column"]) for d in orchc_diags]
    check(out.returncode == 1 and mine == theirs, "the same codes, messages and ranges as orchc --check", [mine, theirs])
    check([[n["message"] for n in d["notes"]] for d in orchc_diags] ==
          [[r["message"] for r in d.get("relatedInformation", [])] for d in diags], "the same notes as orchc")

    # Fix the copy (`b` -> `a`'s type): an incremental edit of line 4's element type.
    client.change(doc, 2, [{"range": rng(3, 10, 3, 13), "text": "f32"}])
    diags = client.diagnostics(doc, version=2)["params"]["diagnostics"]
    check([d["code"] for d in diags] == ["E0201", "E0101"], "one fixed: two diagnostics", diags)
    # A burst of changes is checked once, at its last version (debounced).
    t0 = client.change(doc, 3, [{"range": rng(8, 9, 8, 13), "text": "25"}])
    client.change(doc, 4, [{"range": rng(8, 9, 8, 11), "text": "256"}])
    diags = client.diagnostics(doc)
    check(diags["params"]["version"] == 4 and [d["code"] for d in diags["params"]["diagnostics"]] == ["E0101"],
          "a burst of changes: one check, of the last version", diags)
    print(f"  (change to diagnostics: {1000 * (diags['_received'] - t0):.1f} ms with a 50 ms debounce)")

    # ---- the examples ---------------------------------------------------------------------------
    examples = source_dir / "examples"
    texts = {}
    for name in ["saxpy.orch", "jacobi.orch", "moe.orch", "dp_step.orch", "scheduler.orch", "branch.orch",
                 "countdown.orch"]:
        path = examples / name
        texts[name] = (lsp_client.uri(path), path.read_text())
        client.open(*texts[name])
        d = client.diagnostics(texts[name][0])["params"]["diagnostics"]
        check(d == [], f"{name}: no diagnostics", d)

    saxpy_uri, saxpy = texts["saxpy.orch"]
    jacobi_uri, jacobi = texts["jacobi.orch"]
    moe_uri, moe = texts["moe.orch"]
    dp_uri, dp = texts["dp_step.orch"]

    def hover(doc_uri, text, needle, shift=0, nth=0):
        reply = client.request("textDocument/hover", at(doc_uri, *position_of(text, needle, shift, nth)))
        result = reply["result"]
        return result["contents"]["value"] if result else ""

    h = hover(saxpy_uri, saxpy, "param n", 6)
    check("param n: u32 = 1048576" in h and "Default: `1048576`" in h, "hover: a param's type and default", h)
    h = hover(saxpy_uri, saxpy, "x_host -> x")
    check("buffer x_host: f32[n] host" in h and "pinned, device-mapped host memory" in h and "4 MiB" in h,
          "hover: a buffer's element type, size and where it lives", h)
    h = hover(saxpy_uri, saxpy, "saxpy<<<")
    check("kernel saxpy(n: u32, a: f32, x: in f32[], y: inout f32[])" in h and
          "reads `x`, `y`; writes `y`" in h and "- line 21 `copy x_host -> x`: reads `x` it writes" in h,
          "hover: a kernel's signature, the launch's reads/writes and DAG predecessors", h)
    h = hover(jacobi_uri, jacobi, "iters += 2", 6)
    check("**scalar update**" in h and "reads `iters`; writes `iters`" in h and "Nothing runs before it" in h,
          "hover: a statement first in its loop body's DAG", h)
    h = hover(jacobi_uri, jacobi, "sweep<<<", nth=1)
    check("- line 27 `sweep<<<ceil_div(n, 256), 256>>>(n, u, rhs, v, residual)`: reads `v` it writes"
          in h, "hover: the second sweep waits for the first", h)
    h = hover(jacobi_uri, jacobi, "buffer residual", 7)
    check("Device scalar: one `f32` in device memory" in h, "hover: a device scalar", h)
    h = hover(moe_uri, moe, "graph experts", 6)
    check("graph experts[e: 8] device" in h and "family of device graphs" in h, "hover: a graph family", h)
    h = hover(dp_uri, dp, "comm world", 5)
    check("comm world" in h and "NCCL communicator" in h, "hover: a comm", h)

    reply = client.request("textDocument/definition", at(jacobi_uri, *position_of(jacobi, "residual > tol")))
    line, _ = position_of(jacobi, "buffer residual")
    check(reply["result"] == [{"uri": jacobi_uri, "range": rng(line, 7, line, 15)}],
          "definition: a buffer used in a loop condition", reply)
    reply = client.request("textDocument/definition", at(moe_uri, *position_of(moe, "experts, finish)")))
    line, _ = position_of(moe, "graph experts")
    check(reply["result"] == [{"uri": moe_uri, "range": rng(line, 6, line, 13)}], "definition: a graph passed to a kernel", reply)
    reply = client.request("textDocument/definition", at(dp_uri, *position_of(dp, "on world", 3)))
    line, _ = position_of(dp, "comm world")
    check(reply["result"] == [{"uri": dp_uri, "range": rng(line, 5, line, 10)}], "definition: a comm", reply)
    reply = client.request("textDocument/definition", at(jacobi_uri, *position_of(jacobi, '"jacobi.cu"', 2)))
    cu = (examples / "jacobi.cu").read_text()
    check(len(reply["result"]) == 1 and reply["result"][0]["uri"] == lsp_client.uri(examples / "jacobi.cu") and
          "sweep" in cu.split("\n")[reply["result"][0]["range"]["start"]["line"]],
          "definition: `from \"jacobi.cu\"` goes to the kernel's __global__ function", reply)
    reply = client.request("textDocument/definition", at(saxpy_uri, *position_of(saxpy, "ceil_div(n", 9)))
    line, _ = position_of(saxpy, "param n")
    check(reply["result"] == [{"uri": saxpy_uri, "range": rng(line, 6, line, 7)}], "definition: a param in a launch shape", reply)

    def references(doc_uri, text, needle, shift=0, declaration=True):
        params = at(doc_uri, *position_of(text, needle, shift))
        params["context"] = {"includeDeclaration": declaration}
        return client.request("textDocument/references", params)["result"]

    refs = references(jacobi_uri, jacobi, "residual > tol")
    check(len(refs) == 6 and all(r["uri"] == jacobi_uri for r in refs),
          "references: a buffer (declaration, two fills, the condition, two arguments)", refs)
    check(len(references(jacobi_uri, jacobi, "residual > tol", declaration=False)) == 5, "references without the declaration")
    refs = references(jacobi_uri, jacobi, "kernel sweep", 7)
    check([r["range"]["start"]["line"] for r in refs] == [16, 26, 27], "references: a kernel and its two launches", refs)
    refs = references(moe_uri, moe, "graph finish", 6)
    check(len(refs) == 2, "references: a graph", refs)
    refs = references(dp_uri, dp, "comm world", 5)
    check(len(refs) == 2, "references: a comm", refs)
    refs = references(saxpy_uri, saxpy, "param a", 6)
    check(len(refs) == 2, "references: a param (the kernel's own `a` is another name)", refs)

    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": jacobi_uri}})["result"]
    names = [s["name"] for s in symbols]
    check(names == ["jacobi", "n", "tol", "max_iters", "u", "v", "rhs", "u_host", "rhs_host", "residual", "iters",
                    "sweep", "main"], "document symbols: jacobi's declarations in order", names)
    main_graph = symbols[-1]
    check([c["name"] for c in main_graph["children"]][:4] == ["copy u_host -> u", "copy rhs_host -> rhs", "fill iters = 0",
                                                              "fill residual = 0"] and
          len(main_graph["children"][4]["children"]) == 4, "document symbols: the graph's statements, nested", main_graph)
    check([c["name"] for c in symbols[11]["children"]] == ["n", "src", "rhs", "dst", "residual"],
          "document symbols: the kernel's parameters", symbols[11])
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": moe_uri}})["result"]
    check([s["name"] for s in symbols if s["kind"] == 5] == ["experts", "finish", "main"], "document symbols: moe's graphs",
          symbols)

    # Completion: after `copy ` in jacobi's main, its buffers.
    line, _ = position_of(jacobi, "  copy u -> u_host")
    client.change(jacobi_uri, 2, [{"range": rng(line, 0, line, 0), "text": "  copy \n"}])
    items = client.request("textDocument/completion", at(jacobi_uri, line, 7))["result"]
    labels = {i["label"] for i in items}
    check({"u", "v", "rhs", "residual", "iters"} <= labels and "n" not in labels and "sweep" not in labels,
          "completion: buffers after `copy`", sorted(labels))

    # ---- bad input ---------------------------------------------------------------------------------
    client.write_raw(b"Content-Length: 9\r\n\r\n{not json")
    reply = client.wait(lambda m: "error" in m)
    check(reply["error"]["code"] == -32700, "invalid JSON: a parse error reply", reply)
    client.write_raw(b"Content-Length: nope\r\n\r\n")
    reply = client.wait(lambda m: "error" in m)
    check(reply["error"]["code"] == -32700, "a bad header: an error reply", reply)
    reply = client.request("textDocument/unknown", {})
    check(reply["error"]["code"] == -32601, "an unknown method: method not found", reply)
    reply = client.request("textDocument/hover", {"textDocument": {"uri": saxpy_uri}, "position": {"line": "x"}})
    check(reply["error"]["code"] == -32602, "bad params: invalid params", reply)
    client.notify("textDocument/didChange", {"textDocument": {"uri": saxpy_uri, "version": 9},
                                             "contentChanges": [{"range": rng(10 ** 6, 5, -4, -1), "text": "{"}]})
    client.diagnostics(saxpy_uri, version=9)
    h = hover(jacobi_uri, jacobi, "param n", 6)
    check("param n: u32 = 1 << 20" in h and client.proc.poll() is None, "after all that, the server still answers", h)

    # ---- compile on save ---------------------------------------------------------------------------
    bad_kernel = THREE_ERRORS.replace("2048", "256").replace("buffer b: i32[n]", "buffer b: f32[n]").replace(
        "  fill c = 0\n", "").replace("float* a) {}", "float* a) {\n  a[0] = undefined_value;\n}")
    saved = work_dir / "save.orch"
    saved.write_text(bad_kernel)
    save_uri = lsp_client.uri(saved)
    client.open(save_uri, bad_kernel)
    check(client.diagnostics(save_uri)["params"]["diagnostics"] == [], "a file whose rules hold: no diagnostics")
    client.notify("textDocument/didSave", {"textDocument": {"uri": save_uri}})
    diags = client.diagnostics(save_uri, timeout=120)["params"]["diagnostics"]
    line, _ = position_of(bad_kernel, "a[0] = undefined_value")
    check(len(diags) >= 1 and diags[0]["code"] == "E0901" and diags[0]["range"]["start"]["line"] == line and
          "undefined_value" in diags[0]["message"], "saved: NVRTC's error at its line in the source block", diags)

    code = client.close()
    check(code == 0, "shutdown and exit: exit code 0", code)


if __name__ == "__main__":
    main()
