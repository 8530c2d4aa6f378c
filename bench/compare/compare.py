"""scripts/compare.sh's measuring part: ingest beside tf.data, DALI, Grain and
PyTorch's DataLoader on the workloads of ../../shared/bench/WORKLOADS.md.

Steps: generate each workload's data once with ingest's writer (ingest_compare
gen, cached under --data), build the TFRecord index files the random-access
peers need (untimed), then rounds: in each, every (workload, system) pair runs
once as a fresh process, in an order rotated from round to round. Every run
prints one JSON line per epoch (records, sum of the labels, seconds); every
epoch of every run is checked against the data set's count and label sum (a
mismatch stops the comparison). Rates are the last epoch's. Around each run,
/proc/stat's busy time minus the run's own CPU time (wait4's rusage, which
includes the workers it reaped) is the load other processes put on the machine.
Writes results.md (one table per workload) and an SVG bar chart per workload.

Layout of bench/compare/:
  requirements.lock     the peers, pinned with hashes (scripts/compare.sh installs them)
  compare.py            this driver; records.py: TFRecord index and label sums, stdlib only
  ingest_side.cpp       ingest_compare: data generation, ingest's pipelines, the limits
  remote_side.cpp       ingest_compare_remote: W9's store and proxy, ingest on s3://
  torch_data_side.cpp   ingest_compare_torch: libtorch's torch::data on W1 and W2
  w2_function.cpp       W2's function, a shared library for every side (ctypes in Python)
  peers/                one script per Python peer (tfdata, dali, grain, torch), the W9
                        plain client (s3_client.py) and what they share (common.py,
                        transforms.py)
  results.md, charts/   the output of the last full run
"""

import argparse
import datetime
import glob
import html
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import records  # noqa: E402  (stdlib only: the comparison runs without the venv)

CORES = os.cpu_count() or 1
WORKLOADS = ["W1", "W2", "W3", "W3-GZIP", "W4", "W4-RRC", "W4L", "W4L-RRC", "W5", "W9"]
PEERS = ["tfdata", "dali", "grain", "torch-0", f"torch-{CORES}", "libtorch-0", f"libtorch-{CORES}"]
SYSTEMS = ["ingest"] + PEERS
# Data set of each workload, and its size: full (WORKLOADS.md) and smoke (CI).
DATA = {"W1": "w1", "W2": "w2", "W3": "w3", "W3-GZIP": "w3", "W4": "w4", "W4-RRC": "w4",
        "W4L": "w4l", "W4L-RRC": "w4l", "W5": "w4", "W9": "w3"}
SIZES = {"full": {"w1": 10_000_000, "w2": 200_000, "w3": 100_000, "w4": 2_000, "w4l": 2_000},
         "smoke": {"w1": 100_000, "w2": 2_000, "w3": 2_000, "w4": 128, "w4l": 32}}
PEER_SCRIPT = {"tfdata": "tfdata_peer.py", "dali": "dali_peer.py", "grain": "grain_peer.py",
               "torch": "torch_peer.py"}

# Rows that cannot be measured, with the reason the table gives.
NOT_MEASURED = {
    ("W1", "dali"): "DALI has no range source; a per-element Python source would measure Python",
    ("W2", "dali"): "the W2 function is C++; DALI calls C++ only as an operator plugin (not written)",
    ("W3-GZIP", "dali"): "DALI's TFRecord reader has no GZIP input",
    ("W3-GZIP", "grain"): "Grain reads random-access sources; a GZIP stream has no record offsets",
    ("W3-GZIP", "torch-0"): "a map-style Dataset needs record offsets; a GZIP stream has none",
    ("W3-GZIP", f"torch-{CORES}"): "a map-style Dataset needs record offsets; a GZIP stream has none",
}
NOT_MEASURED.update({
    ("W5", "dali"): "DALI has no cache of decoded images on CPU (its decoder cache is the GPU decoder's)",
    ("W5", "grain"): "Grain's MapDataset has no cache stage",
    ("W5", "torch-0"): "DataLoader has no cache stage",
    ("W5", f"torch-{CORES}"): "DataLoader has no cache stage",
})
NOT_MEASURED.update({
    ("W9", "tfdata"): "tf.data reads no S3 without tensorflow-io, whose newest release (0.37.1) is "
                      "built for TensorFlow 2.16 (tensorflow-cpu<2.17): with 2.21 its file systems do not "
                      "load (libtensorflow_io.so: undefined symbol), and s3:// raises \"File system "
                      "scheme 's3' not implemented\"",
    ("W9", "grain"): "no S3 source in Grain; a random-access source over S3 is one GET per record",
    ("W9", "torch-0"): "no S3 in DataLoader; a map-style Dataset over S3 is one GET per record",
    ("W9", f"torch-{CORES}"): "no S3 in DataLoader; a map-style Dataset over S3 is one GET per record",
})
# DALI's TFRecord reader sends one ranged GET per record on s3:// (read_ahead and dont_use_mmap
# change nothing there), run on the pipeline's threads: num_threads is its requests in flight.
# On the 2-core development machine (the first 1,000 to 6,000 records of W3's full set through the
# proxy): 2 threads ~85 records/s, 8 ~310, 16 ~570, 32 ~760, 64 ~700, 128 ~780; 32 is where it
# levels off.
DALI_W9_THREADS = 32

for _w in WORKLOADS:
    if _w not in ("W1", "W2"):
        for _s in ("libtorch-0", f"libtorch-{CORES}"):
            NOT_MEASURED[(_w, _s)] = "torch::data is W1 and W2's C++ peer here (no TFRecord or JPEG reader in it)"

CONFIG = {
    "libtorch-0": "torch::data: Dataset::get per element, Stack<>, make_data_loader, workers=0",
    f"libtorch-{CORES}": f"torch::data: Dataset::get per element, Stack<>, make_data_loader, workers={CORES}",
    "ingest": "every parallelism and buffer knob ingest::autotune; C++ Release as a CMake user builds it",
    "tfdata": "AUTOTUNE everywhere; tf.io.parse_single_example, tf.io/tf.image ops",
    "dali": f"CPU pipeline (device_id=None), num_threads={CORES}, fn.readers.tfrecord with index files",
    "grain": f"MapDataset over a random-access TFRecord source, mp_prefetch num_workers={CORES}",
    "torch-0": "DataLoader num_workers=0, map-style Dataset, torchvision transforms, Pillow decode",
    f"torch-{CORES}": f"DataLoader num_workers={CORES}, map-style Dataset, torchvision transforms, Pillow decode",
}
LIMIT = {
    "W9": "the lesser, per round, of boto3 with concurrent 4 MiB ranged GETs of the same objects "
          f"through the same proxy ({4 * CORES} in flight, no parsing) and the same pipeline on the "
          "local files (limit-local)",
    "W1": "hand-written loop: a reused 256-value buffer written (2x+1) and summed",
    "W2": f"the function alone on {CORES} threads at once (no pipeline)",
    "W3": f"no-library loop of the pipeline's shape on {CORES} threads, allocating nothing: function, 10,000-element shuffle buffer of preallocated slots, copy into the batch",
    "W3-GZIP": f"inflate of the GZIP shards on {CORES} threads at once with the engine ingest was built with (ISA-L igzip, else zlib), no parsing",
    "W4": f"tjDecompress2 full decode of the same JPEGs on {CORES} threads at once",
}
for _w in ("W4-RRC", "W4L", "W4L-RRC", "W5"):
    LIMIT[_w] = LIMIT["W4"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --- data ------------------------------------------------------------------------

def prepare_data(args, workloads):
    root = os.path.join(args.data, "smoke" if args.smoke else "full")
    sizes = SIZES["smoke" if args.smoke else "full"]
    expected = {}
    for name in sorted({DATA[w] for w in workloads if w in DATA}):
        d = os.path.join(root, name)
        manifest = os.path.join(d, "manifest.json")
        if not os.path.exists(manifest):
            log(f"generating {name} ({sizes[name]} records) under {d}")
            subprocess.run([args.driver, "gen", root, name, str(sizes[name])], check=True)
            n = sizes[name]
            if name == "w1":
                m = {"records": n // 256 * 256, "checksum": (n // 256 * 256) ** 2}
            elif name == "w2":
                # The sum of f(x) over the range: what the plain C++ loop computes.
                out = subprocess.run([args.driver, "run", "limit", "W2", root, "1"], check=True,
                                     capture_output=True, text=True).stdout
                m = {"records": n, "checksum": json.loads(out.splitlines()[0])["checksum"]}
            elif name == "w3":
                r, c = records.manifest(sorted(glob.glob(os.path.join(d, "train-*-of-00016"))),
                                        "label")
                m = {"records": r, "checksum": c}
            else:
                r, c = records.manifest(sorted(glob.glob(os.path.join(d, "train-*-of-00008"))),
                                        "image/class/label")
                m = {"records": r, "checksum": c}
            with open(manifest, "w") as f:
                json.dump(m, f)
        with open(manifest) as f:
            expected[name] = json.load(f)
    return root, expected


# --- runs ------------------------------------------------------------------------

def command(args, system, workload, data):
    epochs = str(1 if workload in ("W1", "W2") else 2 if workload == "W5" else args.epochs)
    if workload == "W9" and system == "ingest":
        return [remote_driver(args), "run", data, epochs]
    if workload == "W9" and system == "limit":
        return [args.python, os.path.join(HERE, "peers", "s3_client.py"), "W9", data, epochs,
                "--workers", str(CORES)]
    if workload == "W9" and system == "limit-local":
        return [args.driver, "run", "ingest", "W3", data, epochs]
    if workload == "W9" and system == "dali":
        return [args.python, os.path.join(HERE, "peers", PEER_SCRIPT["dali"]), workload, data,
                epochs, "--workers", str(DALI_W9_THREADS)]
    if system in ("ingest", "limit", "limit-function", "limit-read"):
        return [args.driver, "run", system, workload, data, epochs]
    if system.startswith("libtorch-"):
        return [os.path.join(os.path.dirname(os.path.abspath(args.driver)), "ingest_compare_torch"),
                workload, data, system.split("-")[1], epochs]
    peer = "torch" if system.startswith("torch-") else system
    cmd = [args.python, os.path.join(HERE, "peers", PEER_SCRIPT[peer]), workload, data, epochs]
    if peer == "torch":
        cmd += ["--workers", system.split("-")[1]]
    return cmd


def remote_driver(args):
    return os.path.join(os.path.dirname(os.path.abspath(args.driver)), "ingest_compare_remote")


class Store:
    """W9's store and proxy (ingest_compare_remote serve), up for the whole comparison."""

    def __init__(self, args, data):
        self.proc = subprocess.Popen([remote_driver(args), "serve", data], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.line = self.proc.stdout.readline().strip()
        if not self.line:
            err = self.proc.stderr.read().strip().splitlines()
            self.proc.wait()
            raise RuntimeError(err[-1] if err else "the store did not start")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def w9_unavailable(args, systems):
    """Why W9 cannot run here, or None."""
    if not os.access(remote_driver(args), os.X_OK):
        return "ingest_compare_remote is not built (it needs ingest::remote and the tests)"
    weed = os.environ.get("INGEST_WEED") or os.path.join(
        os.environ.get("INGEST_TEST_VENV", os.path.expanduser("~/.cache/ingest-test-venv")), "bin", "weed")
    if not os.access(weed, os.X_OK):
        return "SeaweedFS is not installed (scripts/setup-test-servers.sh)"
    return None


def busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def run_once(args, system, workload, data):
    """One fresh process: its epochs, its CPU seconds, the others' load (cores)."""
    cmd = command(args, system, workload, data)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONWARNINGS="ignore",
               INGEST_COMPARE_S3=args.s3 or "",
               INGEST_COMPARE_W2_LIB=os.path.join(os.path.dirname(os.path.abspath(args.driver)),
                                                  "libingest_compare_w2.so"))
    start_busy, start = busy_jiffies(), time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    out, err = p.communicate()
    wall = time.monotonic() - start
    busy = (busy_jiffies() - start_busy) / os.sysconf("SC_CLK_TCK")
    # communicate() reaped the child; its rusage is in RUSAGE_CHILDREN's growth.
    if p.returncode == 3:
        return {"cannot": err.strip().splitlines()[-1]}
    if p.returncode != 0:
        raise SystemExit(f"{system} on {workload} failed ({p.returncode}): {' '.join(cmd)}\n{err[-3000:]}")
    epochs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {"epochs": epochs, "wall": wall, "busy": busy}


class ChildCpu:
    """CPU seconds of reaped children, to take each run's own out of /proc/stat's busy time."""

    def __init__(self):
        self.last = self.now()

    @staticmethod
    def now():
        r = os.times()
        return r.children_user + r.children_system

    def delta(self):
        now = self.now()
        d, self.last = now - self.last, now
        return d


def check(result, expected, system, workload):
    if not result["epochs"]:
        raise SystemExit(f"{system} on {workload} printed no epoch")
    for e in result["epochs"]:
        want = (expected["records"], expected["checksum"])
        got = (e["records"], e["checksum"])
        if e["checksum"] is None and system == "limit" and workload == "W9":
            got = (got[0], want[1])  # the plain client counts records, parses no labels
        if got != want:
            raise SystemExit(f"MISMATCH: {system} on {workload}, epoch {e['epoch']}: "
                             f"{got[0]} records with label sum {got[1]}, "
                             f"the data set has {want[0]} with {want[1]}")


# --- results ---------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def fmt_rate(x):
    return "—" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.3g}")


def fmt_ratio(x):
    return "—" if x is None else f"{x:.2f}×"


def summarise(rows, workload, systems):
    """Per system: median rate, spread, ratio to the limit and to ingest (medians of per-round ratios)."""
    runs = rows[workload]
    out = {}
    for s in systems + ["limit", "limit-function", "limit-read", "limit-local"]:
        rates = [r["rate"] for r in runs.get(s, []) if "rate" in r]
        if not rates:
            continue
        med = median(rates)

        def ratio_to(other):
            # W9's limit is the lesser, per round, of the plain client and the local pipeline.
            refs = [other] + (["limit-local"] if other == "limit" and workload == "W9" else [])
            per = []
            for k, r in enumerate(runs.get(s, [])):
                ref = [runs[o][k]["rate"] for o in refs
                       if k < len(runs.get(o, [])) and "rate" in runs[o][k]]
                if "rate" in r and ref and min(ref) > 0:
                    per.append(r["rate"] / min(ref))
            return median(per)

        out[s] = {"median": med, "min": min(rates), "max": max(rates),
                  "limit": ratio_to("limit"),
                  "ingest": ratio_to("ingest"),
                  "others": median([r["others"] for r in runs[s]]),
                  "version": runs[s][0]["version"], "n": len(rates)}
    return out


def read_bound(runs):
    """W3: the most of the loop's rate a pipeline that also reads can reach, per round
    read / (read + loop) (the two share the cores); the median over the rounds, or None."""
    loop, read = runs.get("limit", []), runs.get("limit-read", [])
    per = [r["rate"] / (r["rate"] + l["rate"]) for l, r in zip(loop, read)
           if "rate" in l and "rate" in r and l["rate"] + r["rate"] > 0]
    return median(per) if per else None


def write_svg(path, workload, summary, unit):
    names = [s for s in summary]
    width, bar_h, left, top = 760, 22, 150, 40
    height = top + bar_h * len(names) * 1.5 + 40
    peak = max(v["max"] for v in summary.values()) * 1.1
    x = lambda v: left + (width - left - 90) * v / peak  # noqa: E731
    colour = {"ingest": "#2563eb", "limit": "#9ca3af", "limit-function": "#d1d5db",
              "limit-read": "#d1d5db", "limit-local": "#d1d5db"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="100%" height="100%" fill="white"/>',
             f'<text x="10" y="20" font-size="14" font-weight="bold">{html.escape(workload)}: '
             f'{unit} (median of rounds; whiskers: min–max)</text>']
    for i, s in enumerate(names):
        v = summary[s]
        y = top + i * bar_h * 1.5
        parts.append(f'<text x="{left - 8}" y="{y + bar_h * 0.7:.0f}" text-anchor="end">'
                     f'{html.escape(s)}</text>')
        parts.append(f'<rect x="{left}" y="{y:.0f}" width="{x(v["median"]) - left:.1f}" '
                     f'height="{bar_h}" fill="{colour.get(s, "#f59e0b")}"/>')
        ym = y + bar_h / 2
        parts.append(f'<line x1="{x(v["min"]):.1f}" y1="{ym:.0f}" x2="{x(v["max"]):.1f}" '
                     f'y2="{ym:.0f}" stroke="black"/>')
        parts.append(f'<text x="{x(v["max"]) + 6:.1f}" y="{y + bar_h * 0.7:.0f}">'
                     f'{fmt_rate(v["median"])}</text>')
    if "limit" in summary:
        lx = x(summary["limit"]["median"])
        parts.append(f'<line x1="{lx:.1f}" y1="{top - 6}" x2="{lx:.1f}" y2="{height - 30:.0f}" '
                     f'stroke="#6b7280" stroke-dasharray="4 3"/>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


NOTES = """## How each system differs

- **All**: each run is a fresh process; its clock starts before the pipeline is built and stops
  after the last batch of an epoch; the rate is the last epoch's (`--epochs`, 2 by default, so
  tf.data's tracing, DALI's pipeline build and the first epoch's worker start-up stay out of it,
  while DataLoader's and Grain's workers start again inside every epoch, as they do by default).
  Files are in page cache. W4 reads in file order (no shuffle) everywhere.
- **ingest**: `scripts/compare.sh` builds `ingest_compare` (bench/compare/ingest_side.cpp) in
  Release with ISA-L where found; W3's pipeline is bench/support/w3_data.hpp's, W4's the
  one of bench/w4_images.cpp (normalisation written into the batch) with the random crop
  decoded alone (random_crop of the JPEG's bytes); bilinear antialiased resize
  in random_resized_crop, decoding only the window at the largest DCT scale that keeps 224 px.
- **tf.data**: shuffle(10,000) as in the workload; W4-RRC is TensorFlow's ResNet preprocessing
  (sample_distorted_bounding_box on extract_jpeg_shape, decode_and_crop_jpeg, tf.image.resize
  bilinear with antialias); decode_jpeg uses libjpeg-turbo without DCT scaling.
- **DALI**: the reader's shuffle buffer (random_shuffle, initial_fill=10,000) for W3; the
  last batch padded by the reader and the padding dropped; image_random_crop decodes the window
  (libjpeg-turbo through nvImageCodec on CPU), then fn.resize (linear, antialias) to 224.
- **Grain**: the shuffle is a global permutation of the record indexes (no shuffle buffer); its
  records come from the TFRecord index files (mmap, no CRC check); parsing by protobuf (upb) in
  Python, images through Pillow and NumPy (Grain has no image ops); RandomResizedCrop with
  Pillow's draft() (DCT scaling) and a bilinear resize. mp_prefetch starts its workers in each
  epoch.
- **PyTorch DataLoader**: Debian's torch 1.13 and torchvision 0.14 (apt), Pillow decode (no DCT
  scaling), torchvision RandomCrop / RandomResizedCrop(antialias) / RandomHorizontalFlip /
  ToTensor / Normalize, default collate; W3 with shuffle=True (global permutation); the records
  as with Grain; workers start inside each epoch (persistent_workers off).
- **W1, W2 in Python**: W1's map is a Python lambda (tf.data traces it into a graph and maps whole batches, as its performance guide recommends for a cheap function); W2's
  function is the same C++ (bench/compare/w2_function.cpp) called through ctypes, which lets go
  of the GIL during the call: tf.data wraps it in tf.numpy_function, Grain and DataLoader call it
  in their workers. W1's batch drops the remainder everywhere, W2's keeps it.
- **W9**: the store (SeaweedFS) and the proxy run in one process for the whole comparison; the
  store's CPU counts in "others' load" of W9's rows. DALI reads s3:// URLs through its readers
  (AWS SDK for C++, AWS_ENDPOINT_URL pointing at the proxy) with the local index files; its
  TFRecord reader sends one ranged GET per record (read_ahead and dont_use_mmap do not change
  that on s3://), run on the pipeline's threads, so W9's DALI has more threads than cores (its
  configuration column says how many): with one per core it reads ~85 records/s.
  MosaicML Streaming reads only its own shard formats (MDS, CSV/TSV, JSONL), so it has no row:
  the objects would have to be converted first.
- **torch::data (libtorch, C++)**: Debian's libtorch 1.13; a one-value tensor per element from
  Dataset::get, batched by Stack<> (torch::data's way), the sequential sampler, W2's function
  linked from the same shared library.
- **limit**: a no-library C++ loop on the same data, read into memory before its clock starts
  (see the configuration column); `limit-function` (W3) is the map function alone on every core,
  and `limit-read` (W3) the reading alone (files, framing, CRCs), which with the loop bounds what
  a pipeline that reads can reach (the sentence under W3's table).
"""


def write_results(args, rows, workloads, systems, out_dir, started):
    os.makedirs(os.path.join(out_dir, "charts"), exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    lines = ["# ingest beside tf.data, DALI, Grain and PyTorch", "",
             f"Measured {started:%Y-%m-%d %H:%M} UTC on {cpu}, {CORES} cores, "
             f"{platform.system()} {platform.release()}, by `scripts/compare.sh "
             f"{' '.join(args.argv)}`: {args.rounds} round(s), rates of epoch {args.epochs} "
             f"(W1, W2: epoch 1). Rates in records/s (images/s for W4*); spread = (max − min) / "
             f"median over the rounds; × limit and × ingest are medians of the per-round ratios; "
             f"others' load = cores kept busy by other processes during the run (median).", ""]
    targets = []
    for w in workloads:
        summary = summarise(rows, w, systems)
        lines += [f"## {w}", ""]
        if w in LIMIT:
            lines.append(f"Limit: {LIMIT[w]}.")
            lines.append("")
        if w == "W5":
            gains = [f"{s} {median([r['rate'] / r['first_rate'] for r in rows[w][s]]):.2f}×"
                     for s in systems if s in summary]
            lines += ["W4 with a memory cache after the decode; the rate is epoch 2's (read from "
                      "the cache). Epoch 2 ÷ epoch 1: " + ", ".join(gains) + ".", ""]
        lines += ["| system | version | configuration | median | spread | × limit | × ingest | others' load |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]
        for s in systems + ["limit", "limit-function", "limit-read", "limit-local"]:
            if s in summary:
                v = summary[s]
                spread = (v["max"] - v["min"]) / v["median"] if v["median"] else 0
                config = {"limit-function": f"W3's map function alone on {CORES} threads, into one reused buffer (no shuffle, no batch)",
                          "limit-read": f"W3's reading alone on {CORES} threads: the shards read whole into reused buffers, the TFRecord framing walked and both CRCs checked, no parsing",
                          "limit-local": "ingest's W3 pipeline on the local files (page cache)"}.get(
                              s, CONFIG.get(s) if s in CONFIG else LIMIT.get(w, ""))
                if w == "W9" and s == "limit":
                    config = f"boto3, {4 * CORES} concurrent 4 MiB ranged GETs through the proxy, no parsing"
                if w == "W9" and s == "ingest":
                    config = "W3's pipeline on s3:// through the proxy, every knob (readahead too) autotuned"
                if w == "W9" and s == "dali":
                    config = (f"W3's pipeline on s3:// through the proxy: fn.readers.tfrecord with the local "
                              f"index files, one ranged GET per record, num_threads={DALI_W9_THREADS} "
                              f"(its requests in flight)")
                lines.append(f"| {s} | {v['version']} | {config} | {fmt_rate(v['median'])} | "
                             f"{spread:.0%} | {fmt_ratio(v['limit'])} | {fmt_ratio(v['ingest'])} | "
                             f"{v['others']:.2f} |")
            elif s in systems or (w, s) in NOT_MEASURED:
                reason = rows[w].get(s, [{}])[0].get("cannot") if rows[w].get(s) else None
                reason = reason or NOT_MEASURED.get((w, s), "not run (--systems)")
                lines.append(f"| {s} | — | cannot: {reason} | — | — | — | — | — |")
        lines.append("")
        bound = read_bound(rows[w]) if w == "W3" else None
        if bound is not None and "ingest" in summary:
            lines += [f"Bound: the loop's records are in memory before its clock starts; the pipeline "
                      f"reads them too, on the same cores. With the reading alone (limit-read) and the "
                      f"loop measured in the same round, their work together allows at most "
                      f"read ÷ (read + loop) = {bound:.2f}× of the loop (median of the rounds); ingest "
                      f"reaches {summary['ingest']['limit']:.2f}×, "
                      f"{summary['ingest']['limit'] / bound:.0%} of that bound.", ""]
        if summary:
            unit = "images/s" if w.startswith("W4") else "records/s"
            write_svg(os.path.join(out_dir, "charts", f"{w}.svg"), w, summary, unit)
            lines += [f"![{w}](charts/{w}.svg)", ""]
            peers = {s: v for s, v in summary.items() if s in PEERS}
            if "ingest" in summary:
                best = max(peers.items(), key=lambda kv: kv[1]["median"]) if peers else None
                ing = summary["ingest"]
                t = f"| {w} | {fmt_ratio(ing['limit'])} |"
                if best:
                    t += f" {best[0]} | {ing['median'] / best[1]['median']:.2f}× |"
                else:
                    t += " — | — |"
                targets.append(t)
    if targets:
        lines += ["## ingest against the best peer and the limit", "",
                  "| workload | ingest × limit | best peer | ingest × best peer |", "|---|---:|---|---:|"]
        lines += targets + [""]
    lines.append(NOTES)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out_dir, "runs.json"), "w") as f:
        json.dump(rows, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--driver", required=True, help="the ingest_compare binary")
    p.add_argument("--python", default=sys.executable, help="the venv's python, for the peers")
    p.add_argument("--data", required=True, help="where generated data sets are cached")
    p.add_argument("--out", required=True, help="where results.md and charts/ go")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--only", default=",".join(WORKLOADS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--no-check-round", action="store_true",
                   help="no untimed round 0 (every timed run's epochs are checked all the same)")
    p.add_argument("--ingest-version", default="?")
    p.add_argument("--argv", nargs=argparse.REMAINDER, default=[])
    args = p.parse_args()
    workloads = [w for w in args.only.split(",") if w]
    systems = [s for s in args.systems.split(",") if s]
    for both in ("torch", "libtorch"):  # num_workers 0 and one per core
        if both in systems:
            i = systems.index(both)
            systems[i:i + 1] = [f"{both}-0", f"{both}-{CORES}"]
    for w in workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"unknown workload {w} (one of {', '.join(WORKLOADS)})")
    for s in systems:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s} (one of ingest, tfdata, dali, grain, torch, libtorch)")
    started = datetime.datetime.now(datetime.timezone.utc)
    data, expected = prepare_data(args, workloads)
    # What runs: every (workload, system) that can, plus the workload's limit(s).
    if not os.access(os.path.join(os.path.dirname(os.path.abspath(args.driver)), "ingest_compare_torch"),
                     os.X_OK):
        for w in ("W1", "W2"):
            for s in ("libtorch-0", f"libtorch-{CORES}"):
                NOT_MEASURED[(w, s)] = "ingest_compare_torch is not built (libtorch-dev was not found)"
    args.s3 = None
    store = None
    if "W9" in workloads:
        why = w9_unavailable(args, systems)
        if why is None and subprocess.run(
                [args.python, "-c", "import boto3, numpy, google.protobuf"],
                capture_output=True).returncode != 0:
            NOT_MEASURED[("W9", "limit")] = "boto3 is not installed (the peers' venv has it)"
        if why is None:
            try:
                store = Store(args, data)
                args.s3 = store.line
            except RuntimeError as e:
                why = f"the store did not start: {e}"
        if why is not None:
            for s in systems + ["limit"]:
                NOT_MEASURED[("W9", s)] = why
    plan = []
    for w in workloads:
        if w not in DATA:
            continue
        runnable = [s for s in systems if (w, s) not in NOT_MEASURED]
        extra = {"W3": ["limit-function", "limit-read"], "W9": ["limit-local"]}.get(w, [])
        limits = [x for x in ["limit"] + extra if (w, x) not in NOT_MEASURED]
        if runnable or w != "W9":
            plan += [(w, s) for s in runnable + limits]
    rows = {w: {} for w in workloads}
    for w, s in [(w, s) for w in workloads for s in systems if (w, s) in NOT_MEASURED]:
        rows[w][s] = [{"cannot": NOT_MEASURED[(w, s)]}]
    cpu = ChildCpu()
    # Round 0 checks every system on the data (and warms the page cache); it is not timed.
    first = 0 if args.smoke or args.no_check_round else -1
    for r in range(first, args.rounds):
        order = plan[r % len(plan):] + plan[:r % len(plan)] if plan else []
        log(f"round {r + 1}/{args.rounds}" if r >= 0 else "checking every system on the data")
        for w, s in order:
            res = run_once(args, s, w, os.path.join(data))
            own = cpu.delta()
            if "cannot" in res:
                rows[w][s] = [res]
                continue
            check(res, expected[DATA[w]], s, w)
            if r < 0:
                log(f"  {w:8} {s:15} reads the same records ({res['wall']:.1f} s)")
                continue
            last = res["epochs"][-1]
            # /proc/stat counts in ticks (10 ms): short runs get a coarse figure.
            others = min(CORES, max(0.0, (res["busy"] - own) / res["wall"])) if res["wall"] > 0 else 0.0
            version = last.get("version") or (args.ingest_version if s == "ingest" else "—")
            rows[w].setdefault(s, [])
            if rows[w][s] and "cannot" in rows[w][s][0]:
                rows[w][s] = []
            first_epoch = res["epochs"][0]
            rows[w][s].append({"rate": last["records"] / last["seconds"], "others": others,
                               "version": version, "seconds": last["seconds"], "wall": res["wall"],
                               "first_rate": first_epoch["records"] / first_epoch["seconds"]})
            log(f"  {w:8} {s:15} {last['records'] / last['seconds']:12,.0f}/s  "
                f"others' load {others:.2f} cores  ({res['wall']:.1f} s)")
    if store:
        store.close()
    write_results(args, rows, workloads, systems, args.out, started)
    log(f"wrote {os.path.join(args.out, 'results.md')}")


if __name__ == "__main__":
    main()
