#!/usr/bin/env python3
"""CI's run of examples/resume_training.cpp: trains once uninterrupted, then
again in another directory with a SIGKILL at step 90 and a restart, which
must resume from the step-75 checkpoint and end with the same weights and
the same digest of the batches trained on.

    resume_check.py RESUME_TRAINING_EXECUTABLE WORK_DIR
"""
import os
import shutil
import signal
import subprocess
import sys


def run(args):
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print("$ " + " ".join(args) + "\n" + done.stdout + done.stderr)
    return done


def final_line(out):
    lines = [l for l in out.splitlines() if l.startswith("trained ")]
    return lines[-1] if lines else None


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    straight = run([exe, os.path.join(work, "straight")])
    if straight.returncode != 0 or not final_line(straight.stdout):
        sys.exit("resume_check: FAILED: the uninterrupted run failed")
    crashed = os.path.join(work, "crashed")
    killed = run([exe, crashed, "--crash-at", "90"])
    if killed.returncode != -signal.SIGKILL:
        sys.exit("resume_check: FAILED: the run to crash ended with %d" % killed.returncode)
    resumed = run([exe, crashed])
    if resumed.returncode != 0 or "resumed from step 75" not in resumed.stdout:
        sys.exit("resume_check: FAILED: the restart did not resume from step 75")
    if final_line(resumed.stdout) != final_line(straight.stdout):
        sys.exit("resume_check: FAILED: resumed '%s', uninterrupted '%s'" %
                 (final_line(resumed.stdout), final_line(straight.stdout)))
    print("resume_check: ok: " + final_line(resumed.stdout))


main()
