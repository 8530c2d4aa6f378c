#!/usr/bin/env python3
"""CI's run of examples/libtorch_train.cpp, on a small data set (640 JPEGs of
128 x 128) and 60 steps of 32 images:

1. an uninterrupted run: the mean loss of its last 20 steps must be below
   that of its first 20;
2. a run checkpointing every 10 steps, killed with SIGKILL from outside once
   it has printed step 35;
3. the same command again: it must resume from a checkpoint it wrote, and
   from there train on the uninterrupted run's batches with its losses,
   step for step (each step's line holds the loss and a hash of the batch).

    libtorch_train_check.py LIBTORCH_TRAIN_EXECUTABLE WORK_DIR
"""
import os
import re
import shutil
import signal
import subprocess
import sys

STEPS, KILL_AFTER = 60, 35


def fail(why):
    sys.exit("libtorch_train_check: FAILED: " + why)


def command(exe, work, *extra):
    return [exe, "--data", os.path.join(work, "data"), "--images", "640", "--size", "128",
            "--steps", str(STEPS), "--batch", "32", "--log-batches", *extra]


def run(args):
    done = subprocess.run(args, capture_output=True, text=True, timeout=240)
    print("$ " + " ".join(args) + "\n" + done.stdout + done.stderr)
    if done.returncode != 0:
        fail("'%s' ended with %d" % (" ".join(args), done.returncode))
    return done.stdout


def steps(out):
    """{step: its line} of a run's output."""
    return {int(m.group(1)): m.group(0) for m in re.finditer(r"(?m)^step (\d+) loss .*$", out)}


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    straight = run(command(exe, work))
    reference = steps(straight)
    if sorted(reference) != list(range(1, STEPS + 1)):
        fail("the uninterrupted run did not print steps 1..%d" % STEPS)
    m = re.search(r"first 20 steps ([\d.]+), of the last 20 steps ([\d.]+)", straight)
    if not m or not float(m.group(2)) < float(m.group(1)):
        fail("the loss did not fall: %s" % (m.group(0) if m else "no loss line"))
    first20, last20 = m.group(1), m.group(2)

    ckpt = ["--work", os.path.join(work, "crashed"), "--checkpoint-every", "10"]
    args = command(exe, work, *ckpt)
    print("$ " + " ".join(args) + "  (killed after step %d)" % KILL_AFTER)
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    killed_after = None
    for line in child.stdout:
        print(line, end="")
        m = re.match(r"step (\d+) ", line)
        if m and int(m.group(1)) >= KILL_AFTER:
            child.send_signal(signal.SIGKILL)
            killed_after = int(m.group(1))
            break
    child.stdout.close()
    if child.wait(timeout=60) != -signal.SIGKILL or killed_after is None:
        fail("the run to kill ended by itself (%d)" % child.returncode)

    resumed_out = run(args)
    m = re.search(r"(?m)^resumed at step (\d+)$", resumed_out)
    if not m:
        fail("the restart did not resume from a checkpoint")
    at = int(m.group(1))
    if at % 10 or not 10 <= at < STEPS:
        fail("resumed at step %d, not at a checkpoint before the end" % at)
    resumed = steps(resumed_out)
    if sorted(resumed) != list(range(at + 1, STEPS + 1)):
        fail("the resumed run did not print steps %d..%d" % (at + 1, STEPS))
    for step in sorted(resumed):
        if resumed[step] != reference[step]:
            fail("step %d: resumed '%s', uninterrupted '%s'" % (step, resumed[step], reference[step]))
    loss_line = re.compile(r"(?m)^loss: .*$")
    if loss_line.search(resumed_out).group(0) != loss_line.search(straight).group(0):
        fail("the resumed run's loss summary differs from the uninterrupted run's")
    print("libtorch_train_check: ok: loss fell from %s (first 20 steps) to %s (last 20); killed "
          "after step %d, resumed at step %d, steps %d..%d trained on the same batches with "
          "the same losses" % (first20, last20, killed_after, at, at + 1, STEPS))


main()
