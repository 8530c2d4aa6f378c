#!/usr/bin/env python3
"""Runs `demo --smoke` and checks what it promises: every rung of the ladder
in the table and in ladder.json, the autotuned rung faster than the naive
one, the stats table and the trace line printed, and every picture written
as well-formed SVG with drawn content.

    check_smoke.py DEMO_EXECUTABLE WORK_DIR [--no-speed]

--no-speed leaves out the speed comparison, for sanitizer builds: there
every memory access is instrumented and the code unoptimised, so which rung
is faster says nothing about the pipeline.
"""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

RUNGS = ["naive", "+ prefetch", "+ parallel interleave", "+ parallel map",
         "+ cache after decode", "+ vectorised map", "everything autotuned"]
SVG = "{http://www.w3.org/2000/svg}"


def fail(message):
    print("check_smoke: FAILED: " + message)
    sys.exit(1)


def main():
    demo, work = sys.argv[1], sys.argv[2]
    check_speed = "--no-speed" not in sys.argv[3:]
    shutil.rmtree(work, ignore_errors=True)
    out = os.path.join(work, "pictures")
    run = subprocess.run([demo, "--smoke", "--data", work, "--out", out],
                         capture_output=True, text=True, timeout=600)
    print(run.stdout)
    print(run.stderr, file=sys.stderr)
    if run.returncode != 0:
        fail("demo exited with %d" % run.returncode)
    table = run.stdout[run.stdout.index("accelerator idle"):]
    for name in RUNGS:
        if name not in table:
            fail("rung '%s' missing from the table" % name)
    for expected in ["the autotuned pipeline's stats():", "augment batch", "decode",
                     "trace of the autotuned pipeline"]:
        if expected not in run.stdout:
            fail("'%s' not printed" % expected)
    summary = json.load(open(os.path.join(out, "ladder.json")))
    rungs = summary["rungs"]
    if [r["name"] for r in rungs] != RUNGS:
        fail("ladder.json rungs: %s" % [r["name"] for r in rungs])
    steps = {r["steps"] for r in rungs}
    if len(steps) != 1 or steps.pop() <= 0:
        fail("the rungs ran different numbers of steps")
    naive, tuned = rungs[0]["images_per_s"], rungs[-1]["images_per_s"]
    if check_speed and not tuned > naive:
        fail("the autotuned rung (%.0f images/s) is not faster than naive (%.0f)" % (tuned, naive))
    pictures = [os.path.join(out, "ladder.svg")] + [r["timeline"] for r in rungs]
    for path in pictures:
        root = ET.parse(path).getroot()  # raises on malformed XML
        if root.tag != SVG + "svg":
            fail("%s: root element %s" % (path, root.tag))
        rects = root.findall(".//" + SVG + "rect")
        if len(rects) < 3:
            fail("%s: only %d rect elements" % (path, len(rects)))
    # Each timeline shows the training step (the host's "consumer" span, or
    # "gpu step" where a CUDA device runs it) and some input work.
    step_spans = ("consumer", "gpu step")
    for r in rungs:
        titles = [t.text for t in ET.parse(r["timeline"]).getroot().iter(SVG + "title")]
        if not any(t.startswith(step_spans) for t in titles):
            fail("%s: no training step drawn" % r["timeline"])
        if not any(not t.startswith(step_spans) for t in titles):
            fail("%s: no pipeline work drawn" % r["timeline"])
    trace = json.load(open(os.path.join(out, "rung-7.trace.json")))
    if not trace["traceEvents"]:
        fail("the autotuned rung's trace is empty")
    print("check_smoke: ok: %d rungs, autotuned %.1fx naive, %d pictures" %
          (len(rungs), tuned / naive, len(pictures)))


if __name__ == "__main__":
    main()
