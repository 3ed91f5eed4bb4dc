#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""py_writer: a TFRecord table of tf.train.Example records written the way
another team's pipeline writes one, with the protobuf module's generated
example_pb2 and numpy's random draws: an independent writer for the
benchmarks (DPP_PEERS_WRITER=python bench/peers.sh), so that dpp is measured on a
table dpp-gen did not make.

Rows: row_id (int64), label (0/1, P(1) = 0.25), i1..i13 one float each,
c1..c26 lists of int64 ids; per row and feature:
  - dense: lognormal, log-mean 1.5 s and log-sd s with s drawn in
    [1, 2.5) per feature (so some features spread far wider), 2% negated,
    0.3% multiplied by 10^3..10^7; 1% of dense features absent;
  - sparse: 1-5 ids (uniform), each Zipf-distributed (s = 1.1) rank over
    [0, 10^7) scrambled into the same range; 1% of lists absent.
The Features map is filled in random key order per record (as a dict built
from several sources would be), and the protobuf library decides the order
it serialises the map entries in.

Layout as dpp-gen's: OUT/ds=2026-01-0D/part-NNNNN.tfrecord, P partitions of
S shards, rows spread evenly in file order.
"""
import argparse
import os
import struct
import sys

import numpy as np

NDENSE, NSPARSE, ID_SPACE = 13, 26, 10_000_000

import crcmod.predefined  # Debian's python3-crcmod, as torch_reader.py

_crc = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    head = struct.pack("<Q", len(payload))
    return b"".join((head, struct.pack("<I", masked(_crc(head))), payload,
                     struct.pack("<I", masked(_crc(payload)))))


def zipf_ids(rng, n):
    """n ids: Zipf ranks (s = 1.1) folded into [0, ID_SPACE), scrambled by a
    multiplication modulo ID_SPACE's coprime so that hot ids are not all
    small numbers."""
    ranks = rng.zipf(1.1, n) % ID_SPACE
    return (ranks * 7_368_787 + 1_234_567) % ID_SPACE


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--proto-dir", required=True,
                    help="folder holding example_pb2.py (protoc --python_out)")
    a = ap.parse_args()
    sys.path.insert(0, a.proto_dir)
    import example_pb2  # noqa: E402 - generated into proto_dir by bench/peers.sh

    rng = np.random.default_rng(a.seed)
    dense_names = ["i%d" % (j + 1) for j in range(NDENSE)]
    sparse_names = ["c%d" % (j + 1) for j in range(NSPARSE)]
    sigma = 1.0 + rng.random(NDENSE) * 1.5  # per feature: how wide it spreads
    nfiles = a.shards * a.partitions
    row = 0
    for f in range(nfiles):
        rows = a.rows // nfiles + (1 if f < a.rows % nfiles else 0)
        part = os.path.join(a.out, "ds=2026-01-%02d" % (f // a.shards + 1))
        os.makedirs(part, exist_ok=True)
        dense = rng.lognormal(1.5, 1.0, (rows, NDENSE)) ** (sigma / 1.0)
        dense *= np.where(rng.random((rows, NDENSE)) < 0.02, -1.0, 1.0)
        huge = rng.random((rows, NDENSE)) < 0.003
        dense[huge] *= 10.0 ** rng.uniform(3, 7, huge.sum())
        dense = dense.astype(np.float32)
        dense_absent = rng.random((rows, NDENSE)) < 0.01
        lens = rng.integers(1, 6, (rows, NSPARSE))
        sparse_absent = rng.random((rows, NSPARSE)) < 0.01
        ids = zipf_ids(rng, int(lens.sum())).tolist()
        labels = (rng.random(rows) < 0.25).astype(int).tolist()
        orders = [rng.permutation(2 + NDENSE + NSPARSE).tolist() for _ in range(64)]
        pos = 0
        out = []
        for r in range(rows):
            ex = example_pb2.Example()
            fm = ex.features.feature
            for k in orders[r % 64]:
                if k == 0:
                    fm["row_id"].int64_list.value.append(row)
                elif k == 1:
                    fm["label"].int64_list.value.append(labels[r])
                elif k < 2 + NDENSE:
                    j = k - 2
                    if not dense_absent[r, j]:
                        fm[dense_names[j]].float_list.value.append(float(dense[r, j]))
                else:
                    j = k - 2 - NDENSE
                    n = int(lens[r, j])
                    if not sparse_absent[r, j]:
                        fm[sparse_names[j]].int64_list.value.extend(ids[pos:pos + n])
                    pos += n
            out.append(frame(ex.SerializeToString()))
            row += 1
        with open(os.path.join(part, "part-%05d.tfrecord" % (f % a.shards)), "wb") as fh:
            fh.write(b"".join(out))
    print("py_writer: %d rows in %d files under %s" % (row, nfiles, a.out))


if __name__ == "__main__":
    main()
