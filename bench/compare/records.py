"""TFRecord shards read with the Python standard library alone (no ingest, no
protobuf package): DALI's index files ("offset size" per record) and the count
and label sum of a data set, which every system's epochs are checked against."""

import os
import struct
import sys

# The protobuf wire walk is the CLI tests' stdlib checker's (tests/cli/tfrecord_check.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "cli"))
from tfrecord_check import fields as _fields, varint as _varint  # noqa: E402


def records(path):
    """(offset, size, payload) of every record of a plain TFRecord file."""
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        yield offset, 12 + length + 4, data[offset + 12: offset + 12 + length]
        offset += 12 + length + 4


def write_index(path, index_path):
    """DALI's TFRecord index (what its tfrecord2idx writes)."""
    with open(index_path, "w") as out:
        for offset, size, _ in records(path):
            out.write(f"{offset} {size}\n")


def int64_feature(example, name):
    """The first value of an int64_list feature of a serialized tf.Example."""
    for _, _, features in _fields(example):          # Example.features
        for _, _, entry in _fields(features):        # Features.feature (map entries)
            fields = {n: v for n, _, v in _fields(entry)}
            if fields.get(1) != name.encode():
                continue
            for n, _, lst in _fields(fields[2]):     # Feature.int64_list = 3
                if n != 3:
                    continue
                for _, wire, v in _fields(lst):      # Int64List.value, packed or not
                    value = _varint(v, 0)[0] if wire == 2 else v
                    return value - (1 << 64) if value >= 1 << 63 else value
    raise KeyError(name)


def manifest(files, label, index=True):
    """(records, sum of the labels) of plain shards, writing each one's index beside it."""
    count = total = 0
    for f in files:
        if index:
            write_index(f, f + ".idx")
        for _, _, payload in records(f):
            total += int64_feature(payload, label)
            count += 1
    return count, total


if __name__ == "__main__":
    import sys
    print(manifest(sys.argv[2:], sys.argv[1], index=False))
    os._exit(0)
