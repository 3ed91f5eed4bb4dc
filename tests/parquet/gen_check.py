#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sums of a `dpp-gen --format tfrecord` table, by a tf.Example parser of its
own (no TensorFlow, no protobuf package): the same JSON "sums" object that
gen_check.mjs prints for the Parquet table of the same arguments. Run dpp-gen
with --strings so that s1 is there; with --nulls a null is an absent feature.

Usage: gen_check.py DIR
"""
import json
import os
import struct
import sys

NDENSE, NSPARSE = 13, 26
DENSE = [f"i{j + 1}" for j in range(NDENSE)]
SPARSE = [f"c{j + 1}" for j in range(NSPARSE)]
SCALE = 2 ** 35  # a dense value times SCALE is an integer (gen_check.mjs)


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7


def fields(b):
    """(field number, wire type, value) of each field of one message; value
    is an int for varints and a memoryview for length-delimited fields."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def feature_values(feat):
    """The list a tf.train.Feature holds: bytes, floats or int64s, packed
    or not."""
    for kind, _, lst in fields(feat):
        out = []
        for num, wt, v in fields(lst):
            if num != 1:
                continue
            if kind == 1:
                out.append(bytes(v))
            elif kind == 2:
                out.extend(struct.unpack(f"<{len(v) // 4}f", v) if wt == 2 else struct.unpack("<f", v))
            elif kind == 3:
                if wt == 2:
                    j = 0
                    while j < len(v):
                        x, j = varint(v, j)
                        out.append(signed64(x))
                else:
                    out.append(signed64(v))
        return out
    return []


def example(payload):
    feats = {}
    for num, _, features in fields(payload):
        if num != 1:
            continue
        for fnum, _, entry in fields(features):
            if fnum != 1:
                continue
            key, value = None, b""
            for enum, _, v in fields(entry):
                if enum == 1:
                    key = bytes(v).decode()
                elif enum == 2:
                    value = v
            feats[key] = feature_values(value)
    return feats


def records(path):
    with open(path, "rb") as f:
        data = memoryview(f.read())
    i = 0
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        yield data[i + 12:i + 12 + n]
        i += 16 + n


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_check.py DIR")
    root = sys.argv[1]
    s = {"rows": 0, "label": 0, "row_id": 0, "files": {},
         "dense": {n: {"present": 0, "sum": 0, "xrow": 0} for n in DENSE},
         "sparse": {n: {"absent": 0, "lens": 0, "ids": 0, "xrow": 0} for n in SPARSE},
         "s1": {"present": 0, "distinct": set(), "num": 0, "xrow": 0}}
    for d, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".tfrecord"):
                continue
            path = os.path.join(d, name)
            count = 0
            for payload in records(path):
                f = example(payload)
                rid = f["row_id"][0]
                count += 1
                s["rows"] += 1
                s["label"] += f["label"][0]
                s["row_id"] += rid
                for n in DENSE:
                    if n in f:
                        v = f[n][0] * SCALE
                        if v != int(v):
                            sys.exit(f"{path}: {n} of row {rid} is {f[n][0]!r}, "
                                     "not a multiple of 2^-35")
                        v = int(v)
                        s["dense"][n]["present"] += 1
                        s["dense"][n]["sum"] += v
                        s["dense"][n]["xrow"] += rid * v
                for n in SPARSE:
                    ids = f.get(n, [])  # absent with --nulls: a null list
                    s["sparse"][n]["absent"] += n not in f
                    t = sum(ids)
                    s["sparse"][n]["lens"] += len(ids)
                    s["sparse"][n]["ids"] += t
                    s["sparse"][n]["xrow"] += rid * t
                if "s1" in f:
                    v = f["s1"][0].decode()
                    s["s1"]["present"] += 1
                    s["s1"]["distinct"].add(v)
                    s["s1"]["num"] += int(v[1:])
                    s["s1"]["xrow"] += rid * int(v[1:])
            s["files"][os.path.relpath(path, root)[:-len(".tfrecord")]] = count
    s["s1"]["distinct"] = len(s["s1"]["distinct"])
    print(json.dumps(as_strings(s), sort_keys=True))


def as_strings(o):
    """Numbers as decimal strings, as gen_check.mjs prints them (JSON numbers
    would lose the digits of the larger sums in JavaScript)."""
    if isinstance(o, dict):
        return {k: as_strings(v) for k, v in o.items()}
    return str(o)


if __name__ == "__main__":
    main()
