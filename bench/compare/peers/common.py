"""What every Python peer of scripts/compare.sh shares: the command line, the
JSON line printed per epoch, the TFRecord index (DALI's "offset size" format,
built untimed by compare.py), a random-access record source over it, the
tf.Example parser and the workloads' constants.

Every peer runs as `python <peer>.py <workload> <data-dir> <epochs> [options]`
and prints, per epoch, {"system", "epoch", "records", "checksum" (sum of the
labels), "seconds", "version"} on one line: the clock starts before the
pipeline is built and stops after its last batch.
"""

import argparse
import glob
import json
import mmap
import os
import sys
import time

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

CORES = os.cpu_count() or 1
W3_BATCH = 256
W4_BATCH = 64
CROP = 224
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("workload")
    p.add_argument("data")
    p.add_argument("epochs", type=int, nargs="?", default=1)
    p.add_argument("--workers", type=int, default=CORES)
    return p.parse_args()


def shards(data, workload):
    """The shard files of a workload's data set, sorted."""
    if workload in ("W3", "W3-GZIP"):
        pattern = "w3/train-*.gz" if workload == "W3-GZIP" else "w3/train-*-of-00016"
    elif workload.startswith("W4L"):
        pattern = "w4l/train-*-of-00008"
    else:
        pattern = "w4/train-*-of-00008"
    files = sorted(glob.glob(os.path.join(data, pattern)))
    if not files:
        sys.exit(f"no shards for {workload} under {data}")
    return files


def element_count(data, workload):
    with open(os.path.join(data, workload.lower(), "n")) as f:
        return int(f.read())


def w2_function():
    """W2's C++ function (bench/compare/w2_function.cpp) through ctypes, which
    releases the GIL during the call; compare.py names the library."""
    import ctypes
    f = ctypes.CDLL(os.environ["INGEST_COMPARE_W2_LIB"]).ingest_compare_w2
    f.restype, f.argtypes = ctypes.c_int64, [ctypes.c_int64]
    return f


def timed_epochs(system, version, epochs, epoch):
    """Runs epoch() (returning (records, label sum)) `epochs` times, printing each."""
    for k in range(1, epochs + 1):
        start = time.perf_counter()
        records, checksum = epoch()
        seconds = time.perf_counter() - start
        print(json.dumps({"system": system, "epoch": k, "records": int(records),
                          "checksum": None if checksum is None else int(checksum), "seconds": seconds,
                          "version": version}), flush=True)


def cannot(reason):
    """Exits with status 3: the peer cannot run this workload (compare.py prints the reason)."""
    print(reason, file=sys.stderr)
    sys.exit(3)


# --- TFRecord index and random access --------------------------------------------

def read_index(index_path):
    return np.loadtxt(index_path, dtype=np.int64, ndmin=2)


class TFRecordSource:
    """Random access to the records of plain TFRecord shards through their
    indexes (len and __getitem__: Grain's RandomAccessDataSource protocol and a
    map-style torch Dataset). The files are mapped lazily in each process (the
    loaders' workers are forked or spawned); CRCs are not checked."""

    def __init__(self, files):
        self.files = list(files)
        rows = []
        for i, f in enumerate(self.files):
            idx = read_index(f + ".idx")
            rows.append(np.column_stack([np.full(len(idx), i), idx]))
        self.rows = np.concatenate(rows)
        self.maps = None

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        maps = self.maps
        if maps is None:  # several threads may get here at once: each builds a whole list
            maps = []
            for f in self.files:
                with open(f, "rb") as fh:
                    maps.append(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
            self.maps = maps
        file, offset, size = self.rows[i]
        return maps[file][offset + 12: offset + size - 4]

    def __getstate__(self):
        return {"files": self.files, "rows": self.rows, "maps": None}


# --- tf.Example ----------------------------------------------------------------

def _example_class():
    """tf.train.Example's message class, built from its definition (no TensorFlow import)."""
    fd = descriptor_pb2.FileDescriptorProto(name="compare_example.proto", package="compare",
                                            syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def message(name, fields):
        m = fd.message_type.add(name=name)
        for number, (fname, ftype, label, type_name) in enumerate(fields, 1):
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
            if ftype in (T.TYPE_INT64, T.TYPE_FLOAT) and label == T.LABEL_REPEATED:
                f.options.packed = True
        return m

    rep, opt = T.LABEL_REPEATED, T.LABEL_OPTIONAL
    message("BytesList", [("value", T.TYPE_BYTES, rep, None)])
    message("FloatList", [("value", T.TYPE_FLOAT, rep, None)])
    message("Int64List", [("value", T.TYPE_INT64, rep, None)])
    feature = fd.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (fname, tname) in enumerate(
            [("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List")], 1):
        feature.field.add(name=fname, number=number, type=T.TYPE_MESSAGE, label=opt,
                          type_name=f".compare.{tname}", oneof_index=0)
    features = fd.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=T.TYPE_MESSAGE, label=opt,
                    type_name=".compare.Feature")
    features.field.add(name="feature", number=1, type=T.TYPE_MESSAGE, label=rep,
                       type_name=".compare.Features.FeatureEntry")
    message("Example", [("features", T.TYPE_MESSAGE, opt, ".compare.Features")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("compare.Example"))


Example = _example_class()


def parse(record, image_key, label_key):
    """A serialized tf.Example to (image bytes, label)."""
    ex = Example.FromString(bytes(record))
    f = ex.features.feature
    return f[image_key].bytes_list.value[0], f[label_key].int64_list.value[0]


def w3_decode(record):
    """W3's function: the record to (float32[32, 32, 3] in [-1, 1], label)."""
    image, label = parse(record, "image", "label")
    pixels = np.frombuffer(image, np.uint8).reshape(32, 32, 3).astype(np.float32)
    return (pixels - 127.5) / 127.5, label


def w4_parse(record):
    return parse(record, "image/encoded", "image/class/label")
