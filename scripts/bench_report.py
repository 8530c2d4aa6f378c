#!/usr/bin/env python3
"""Renders the performance page from the benchmarks' JSON (run by
scripts/bench-report.sh): docs/performance.md and one SVG chart per
benchmark binary under docs/performance/. Everything on the page comes
from the run (rates, ratios, notes, the machine from Google Benchmark's
context) or from the benchmark sources (what each measures: the comment
that opens each bench/*.cpp); nothing is typed in by hand.
"""
import argparse
import datetime
import html
import json
import os
import platform
import re

ORDER = ["bench_w1_overhead", "bench_w1_overhead_native", "bench_w2_parallel_map", "bench_w3_tfrecord",
         "bench_image_decode", "bench_w4_images", "bench_w6_autotune", "bench_w8_checkpoint",
         "bench_w9_remote", "bench_w10_ranks", "bench_w7_device_loading"]
SOURCES = {"bench_w1_overhead": "w1_overhead.cpp", "bench_w1_overhead_native": "w1_overhead.cpp",
           "bench_w2_parallel_map": "w2_parallel_map.cpp", "bench_w3_tfrecord": "w3_tfrecord.cpp",
           "bench_image_decode": "image_decode.cpp", "bench_w4_images": "w4_images.cpp",
           "bench_w6_autotune": "w6_autotune.cpp", "bench_w8_checkpoint": "w8_checkpoint.cpp",
           "bench_w9_remote": "w9_remote.cpp", "bench_w10_ranks": "w10_ranks.cpp",
           "bench_w7_device_loading": "w7_device_loading.cu"}


def lead_comment(path):
    """The comment block that opens a source file, as plain text."""
    lines = []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("//"):
            break
        lines.append(line[2:].rstrip("\n")[1:] if line[2:3] == " " else line[2:].rstrip("\n"))
    return "\n".join(lines).strip()


def rate(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.3g} {unit}/s"
    return f"{v:.3g}/s"


def chart(title, rows, path):
    """A horizontal bar chart of ratios, the reference (1.0) marked."""
    if not rows:
        return False
    width, left, bar_h, gap, top = 760, 330, 18, 8, 34
    top_value = max(1.0, max(r for _, r in rows)) * 1.1
    scale = (width - left - 60) / top_value
    height = top + len(rows) * (bar_h + gap) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14" font-weight="bold">{html.escape(title)}</text>']
    for i, (name, value) in enumerate(rows):
        y = top + i * (bar_h + gap)
        shown = name if len(name) <= 52 else name[:49] + "..."
        out.append(f'<text x="{left - 6}" y="{y + bar_h - 5}" text-anchor="end">{html.escape(shown)}</text>')
        w = max(1.0, value * scale)
        colour = "#2a9d8f" if value >= 1.0 else "#e9c46a" if value >= 0.8 else "#e76f51"
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 5}">{value:.3g}</text>')
    x1 = left + scale
    out.append(f'<line x1="{x1:.1f}" y1="{top - 6}" x2="{x1:.1f}" y2="{height - 18}" stroke="#333" '
               'stroke-dasharray="4 3"/>')
    out.append(f'<text x="{x1:.1f}" y="{height - 6}" text-anchor="middle">1.0 = reference</text>')
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return True


def compare_section(root):
    """The side-by-side run of scripts/compare.sh (bench/compare/results.md):
    its header line, its summary table and its charts, as that run wrote them."""
    results = os.path.join(root, "bench", "compare", "results.md")
    if not os.path.exists(results):
        return []
    text = open(results, encoding="utf-8").read()
    measured = next((l for l in text.split("\n") if l.startswith("Measured ")), "")
    summary = re.search(r"^## ingest against the best peer and the limit\n\n(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    charts = re.findall(r"!\[([^\]]*)\]\((charts/[^)]+)\)", text)
    out = ["## Against tf.data, DALI, Grain and PyTorch", "",
           "The same workloads through the other pipelines, on the same machine and data, by "
           "`scripts/compare.sh` ([every row, version and configuration](../bench/compare/results.md)). "
           + measured.replace("Measured", "That run was measured", 1), ""]
    if summary:
        out += [summary.group(1).strip(), ""]
    for name, path in charts:
        out += [f"![{name}](../bench/compare/{path})", ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True, help="the directory the benchmarks wrote into")
    ap.add_argument("--out", required=True, help="where performance.md and performance/*.svg go")
    ap.add_argument("--root", required=True, help="the repository (for the benchmark sources)")
    ap.add_argument("--compiler", default="")
    ap.add_argument("--command", default="scripts/bench-report.sh")
    args = ap.parse_args()

    runs = []
    for name in ORDER + sorted(set(f[:-5] for f in os.listdir(args.json) if f.endswith(".json")
                                   and not f.endswith(".ratios.json")) - set(ORDER)):
        bench_json = os.path.join(args.json, name + ".json")
        ratios_json = os.path.join(args.json, name + ".ratios.json")
        if os.path.exists(bench_json) and os.path.exists(ratios_json):
            runs.append((name, json.load(open(bench_json)), json.load(open(ratios_json))))
    if not runs:
        raise SystemExit("bench_report: no benchmark output in " + args.json)

    context = runs[0][1]["context"]
    date = context.get("date", datetime.datetime.now().isoformat())
    cpus = context.get("num_cpus", os.cpu_count())
    mhz = context.get("mhz_per_cpu")
    os.makedirs(os.path.join(args.out, "performance"), exist_ok=True)
    reps = max(r[2].get("repetitions", 1) for r in runs)

    page = ["# Performance", "",
            "<!-- Generated by scripts/bench-report.sh (scripts/bench_report.py): do not edit. -->", "",
            "Each benchmark under [bench/](../bench) runs one workload of the "
            "project's standard set and measures, in the same run, the limit it is held against "
            "(its *reference*): a hand-written loop, the bare function on every core, the decoder "
            "alone, the same pipeline on local files. Every figure below is a ratio to that "
            "reference, so a slower or faster machine moves both sides together.", "",
            "| | |", "|---|---|",
            f"| date | {date[:19].replace('T', ' ')} |",
            f"| machine | {cpus} cores" + (f" at {mhz} MHz" if mhz else "") + f", {platform.system()} "
            f"{platform.release()} |",
            f"| compiler | {args.compiler or 'the default c++'} (Release) |",
            f"| repetitions | up to {reps} per benchmark (the command's, or a benchmark's own); each rate is the median |",
            f"| command | `{args.command}` |", "",
            "How to read it: ratios above 1 beat the reference; a reference scaled by the cores "
            "(`efficiency`) is the perfect parallel speed-up. The charts colour a ratio green from "
            "1.0, yellow from 0.8, red below.", ""]
    shown = {}
    for name, bench, ratios in runs:
        src = os.path.join(args.root, "bench", SOURCES.get(name, name.replace("bench_", "") + ".cpp"))
        page += [f"## {name}", ""]
        if src in shown:
            page += [f"The workload of [{shown[src]}](#{shown[src]}), built with the flags in "
                     "[bench/CMakeLists.txt](../bench/CMakeLists.txt).", ""]
        elif os.path.exists(src):
            shown[src] = name
            link = "../bench/" + os.path.basename(src)   # the page lives in docs/
            page += [f"What it measures (from [{link}]({link})):", "", "```text", lead_comment(src), "```", ""]
        if ratios["ratios"]:
            svg = f"performance/{name}.svg"
            chart(name + ": ratio to the reference", [(r["name"], r["ratio"]) for r in ratios["ratios"]],
                  os.path.join(args.out, svg))
            page += [f"![{name}]({svg})", "",
                     "| benchmark | ratio | | rate | reference | reference rate |", "|---|---|---|---|---|---|"]
            rows = ratios["ratios"]
            if len(rows) > 16:   # a grid: its best and worst points here, every point in the chart
                ranked = sorted(rows, key=lambda r: -r["ratio"])
                rows = ranked[:8] + ranked[-4:]
            for r in rows:
                ref = r["reference"] if r["scale"] == 1 else f"{r['scale']:g} x {r['reference']}"
                page.append(f"| `{r['name']}` | **{r['ratio']:.3f}** | {r['label']} | {rate(r['rate'])} | "
                            f"`{ref}` | {rate(r['reference_rate'])} |")
            if len(rows) < len(ratios["ratios"]):
                page.append(f"| ({len(ratios['ratios']) - len(rows)} more points of the grid in the chart) | | | | | |")
            page.append("")
        for b in ratios["bests"]:
            page += [f"`{b['candidate']}`: **{b['ratio']:.3f} x** the best of `{b['group']}*` "
                     f"(`{b['best']}`, {rate(b['rate'])} vs {rate(b['best_rate'])}).", ""]
        if ratios["notes"]:
            page += ["```text"] + [n.strip("\n") for n in ratios["notes"]] + ["```", ""]
        if not ratios["ratios"]:
            page += ["| benchmark | rate |", "|---|---|"]
            page += [f"| `{n}` | {rate(v)} |" for n, v in ratios["rates"].items()]
            page.append("")
    page += compare_section(args.root)
    with open(os.path.join(args.out, "performance.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(page).rstrip("\n") + "\n")
    print(f"bench_report: {os.path.join(args.out, 'performance.md')} from {len(runs)} benchmarks")


if __name__ == "__main__":
    main()
