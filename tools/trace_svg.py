#!/usr/bin/env python3
"""Draws an orch-run --trace file as a static SVG timeline (for docs, where a screenshot of
ui.perfetto.dev needs a browser): one row per track, each complete event a labelled box.

  python3 tools/trace_svg.py run.json out.svg            # the first profiled launch
  python3 tools/trace_svg.py run.json out.svg --launch 2 # another one
  python3 tools/trace_svg.py run.json out.svg --all      # everything, host phases included

Standard library only. Render to PNG with rsvg-convert (Debian's librsvg2-bin).
"""
import argparse
import json
import sys
from xml.sax.saxutils import escape


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("svg")
    ap.add_argument("--launch", type=int, default=1, help="the profiled launch to show (default 1)")
    ap.add_argument("--all", action="store_true", help="the whole trace")
    ap.add_argument("--width", type=int, default=1400)
    a = ap.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    names, sort = {}, {}
    for e in events:
        if e["ph"] == "M" and e["name"] in ("process_name", "thread_name"):
            names[(e["pid"], e["tid"] if e["name"] == "thread_name" else None)] = e["args"]["name"]
    slices = [e for e in events if e["ph"] == "X"]
    if not slices:
        sys.exit("trace_svg: no complete events in " + a.trace)
    if a.all:
        lo = min(e["ts"] for e in slices)
        hi = max(e["ts"] + e["dur"] for e in slices)
    else:
        want = [e for e in slices if e.get("cat") == "launch" and e["name"].startswith("launch %d of " % a.launch)]
        if not want:
            sys.exit("trace_svg: no GPU launch %d in %s (a trace of the host side only? use --all)" % (a.launch, a.trace))
        lo, hi = want[0]["ts"], want[0]["ts"] + want[0]["dur"]
        pad = (hi - lo) * 0.03 or 1.0
        lo, hi = lo - pad, hi + pad
        slices = [e for e in slices if e["ts"] < hi and e["ts"] + e["dur"] > lo]
    rows = sorted({(e["pid"], e["tid"]) for e in slices})
    # Depth of each slice in its track: nested slices (a span and its iterations) stack downwards.
    depth, levels = {}, {}
    for row in rows:
        stack = []
        for e in sorted((e for e in slices if (e["pid"], e["tid"]) == row), key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"] + 1e-9:
                stack.pop()
            depth[id(e)] = len(stack)
            stack.append(e["ts"] + e["dur"])
            levels[row] = max(levels.get(row, 0), len(stack))
    label_w, row_h, top = 380, 22, 44
    width = a.width
    plot_w = width - label_w - 20
    span = max(hi - lo, 1e-9)
    layout, y = [], top
    for i, row in enumerate(rows):
        if i == 0 or rows[i - 1][0] != row[0]:
            layout.append(("process", row, y))
            y += row_h
        layout.append(("track", row, y))
        y += row_h * levels.get(row, 1)
    height = y + 40

    def x(t):
        return label_w + (min(max(t, lo), hi) - lo) / span * plot_w

    colors = {"kernel": "#4c78a8", "memcpy": "#f58518", "memset": "#54a24b", "conditional": "#b279a2",
              "iteration": "#d4a6c8", "branch": "#d4a6c8", "launch": "#9d9d9d"}
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="Helvetica, Arial, sans-serif" '
           'font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="22" font-size="15" font-weight="bold">%s</text>' % escape(
               "orch-run --trace: %s (%s)" % (doc.get("otherData", {}).get("pipeline", ""),
                                            "whole run" if a.all else "profiled launch %d" % a.launch))]
    for kind, (pid, tid), y in layout:
        if kind == "process":
            out.append('<text x="10" y="%d" font-weight="bold">%s</text>' % (y + 15, escape(names.get((pid, None), "pid %d" % pid)[:90])))
            continue
        rows_here = levels.get((pid, tid), 1)
        out.append('<line x1="10" y1="%d" x2="%d" y2="%d" stroke="#eeeeee"/>' % (y + row_h * rows_here, width - 20,
                                                                              y + row_h * rows_here))
        out.append('<text x="16" y="%d">%s</text>' % (y + 15, escape(names.get((pid, tid), "tid %d" % tid)[:62])))
        for e in (e for e in slices if (e["pid"], e["tid"]) == (pid, tid)):
            x0, x1 = x(e["ts"]), x(e["ts"] + e["dur"])
            w = max(x1 - x0, 1.0)
            ey = y + depth[id(e)] * row_h
            color = colors.get(e.get("cat"), "#72b7b2")
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="white" stroke-width="0.5">'
                       '<title>%s</title></rect>' % (x0, ey + 3, w, row_h - 6, color,
                                                     escape("%s (%.3f us)" % (e["name"], e["dur"]))))
            chars = int(w / 6.2)
            if chars >= 4:
                text = e["name"] if len(e["name"]) <= chars else e["name"][:chars - 1] + "\u2026"
                out.append('<text x="%.1f" y="%d" fill="white" font-size="10">%s</text>' % (x0 + 3, ey + 15,
                                                                                           escape(text)))
    axis_y = height - 26
    for k in range(6):
        t = lo + span * k / 5
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555555">%.1f us</text>' % (x(t), axis_y, t))
    out.append("</svg>")
    with open(a.svg, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
