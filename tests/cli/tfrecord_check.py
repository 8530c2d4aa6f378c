#!/usr/bin/env python3
"""An independent TFRecord and tf.Example decoder: Python's standard library
only (no TensorFlow, no protobuf, nothing of ingest's). Checks both masked
CRC-32C of every record, inflates GZIP and ZLIB files, decodes each payload
as a tf.Example with a hand-written protobuf wire parser, and prints one JSON
document per file in the shape of tests/fixtures/tfrecord/*.expected.json:

  {"file", "compression", "framing_ok", "num_records", "errors": [...],
   "records": [{"offset", "length", "features": {key: {"kind", "values"}}}]}

bytes values are hex (values longer than 512 bytes as {len, sha256,
head_hex}); floats are the shortest decimal that reads back as the float32.
Exit status 0 when every file's framing and CRCs hold, 1 otherwise.

usage: tfrecord_check.py FILE...
"""
import gzip
import hashlib
import json
import struct
import sys
import zlib


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_stream(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        return "gzip", gzip.decompress(raw)
    if len(raw) >= 12 and masked_crc(raw[:8]) == struct.unpack("<I", raw[8:12])[0]:
        return "none", raw
    if len(raw) >= 2 and raw[0] & 0x0F == 8 and (raw[0] * 256 + raw[1]) % 31 == 0:
        return "zlib", zlib.decompress(raw)
    return "none", raw


def varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the end")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint too long")


def fields(buf):
    """(number, wire type, value) of each field; value: int or bytes."""
    pos = 0
    while pos < len(buf):
        tag, pos = varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("length-delimited field runs past the end")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if pos > len(buf):
            raise ValueError("field runs past the end")
        yield number, wire, value


def shortest_float(bits):
    f = struct.unpack("<f", struct.pack("<I", bits))[0]
    if f != f:
        return "nan"
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    for digits in range(1, 10):
        text = "%.*g" % (digits, f)
        if struct.pack("<f", float(text)) == struct.pack("<I", bits):
            return text if any(c in text for c in ".en") else text + ".0"
    return repr(f)


def bytes_value(b):
    if len(b) > 512:
        return {"len": len(b), "sha256": hashlib.sha256(b).hexdigest(), "head_hex": b[:32].hex()}
    return b.hex()


def decode_feature(buf):
    kind, values = "none", []
    for number, wire, value in fields(buf):
        if wire != 2 or number not in (1, 2, 3):
            continue
        new_kind = {1: "bytes_list", 2: "float_list", 3: "int64_list"}[number]
        if new_kind != kind:  # a list of another kind replaces the earlier one (oneof)
            kind, values = new_kind, []
        for n, w, v in fields(value):
            if n != 1:
                continue
            if kind == "bytes_list" and w == 2:
                values.append(bytes_value(v))
            elif kind == "float_list":
                if w == 2:
                    values += [shortest_float(x) for (x,) in struct.iter_unpack("<I", v)]
                elif w == 5:
                    values.append(shortest_float(struct.unpack("<I", v)[0]))
            elif kind == "int64_list":
                if w == 2:
                    p = 0
                    while p < len(v):
                        x, p = varint(v, p)
                        values.append(x - (1 << 64) if x >= 1 << 63 else x)
                elif w == 0:
                    values.append(value - (1 << 64) if value >= 1 << 63 else value)
    return {"kind": kind, "values": values}


def decode_example(payload):
    features = {}
    for number, wire, value in fields(payload):
        if number != 1 or wire != 2:
            continue
        for n, w, entry in fields(value):
            if n != 1 or w != 2:
                continue
            key, feature = "", b""
            for en, ew, ev in fields(entry):
                if en == 1 and ew == 2:
                    key = ev.decode("utf-8")
                elif en == 2 and ew == 2:
                    feature = ev
            features[key] = decode_feature(feature)
    return features


def check(path):
    compression, data = read_stream(path)
    out = {"file": path, "compression": compression, "framing_ok": True, "errors": [],
           "records": []}
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            out["errors"].append({"offset": pos, "error": "truncated header"})
            break
        length = struct.unpack("<Q", data[pos:pos + 8])[0]
        if masked_crc(data[pos:pos + 8]) != struct.unpack("<I", data[pos + 8:pos + 12])[0]:
            out["errors"].append({"offset": pos, "error": "length CRC mismatch"})
            break
        end = pos + 12 + length
        if end + 4 > len(data):
            out["errors"].append({"offset": pos + 12, "error": "truncated payload"})
            break
        payload = data[pos + 12:end]
        if masked_crc(payload) != struct.unpack("<I", data[end:end + 4])[0]:
            out["errors"].append({"offset": pos + 12, "error": "data CRC mismatch"})
            break
        record = {"offset": pos, "length": length}
        try:
            record["features"] = decode_example(payload)
        except (ValueError, UnicodeDecodeError) as e:
            record["error"] = str(e)
        out["records"].append(record)
        pos = end + 4
    out["framing_ok"] = not out["errors"]
    out["num_records"] = len(out["records"])
    return out


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    ok = True
    for path in paths:
        result = check(path)
        ok = ok and result["framing_ok"]
        print(json.dumps(result, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
