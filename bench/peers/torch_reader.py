#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_reader: the PyTorch peer of bench/peers.sh.

Reads a dpp-gen TFRecord table the way a trainer reads it without dpp: an
IterableDataset walks the TFRecord framing (both CRC32Cs verified with
crcmod's C extension unless --no-crc), parses each record with the protobuf
module's generated example_pb2.Example, looks the features up by name and
yields one row at a time; a DataLoader (batch_size 4096, num_workers 0: one
process, torch on one thread) collates the rows into tensors: dense [B, 13]
float32, per sparse feature a values tensor and a lengths tensor (the
KeyedJaggedTensor layout), the label. Prints the totals line dpp-refsum
prints for the same table and spec, then its rate and CPU seconds.

The transforms are those of examples/criteo.json, hard-coded: truncate each
id list to its first 5 ids per row (modulo first and truncating after gives
the same ids) and fill absent dense values with 0, then per batch, as tensor
ops: dense clamp(min 0), log1p, clamp(0, 20); ids modulo 100000.
"""
import argparse
import itertools
import os
import resource
import struct
import sys
import time

import torch
from torch.utils.data import DataLoader, IterableDataset

DENSE = ["i%d" % (i + 1) for i in range(13)]
SPARSE = ["c%d" % (i + 1) for i in range(26)]
LABEL = "label"
MODULO = 100000
MAX_LEN = 5
BATCH = 4096
MAX_RECORD = 64 << 20
READ_BUFFER = 1 << 20  # the file object's buffer: one read() per MiB

U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")


def list_table(table):
    """The data files as dpp-refsum lists them: regular files not starting
    with '.' or '_' and not ending in .idx, in every key=value folder (or in
    the table folder itself when it has none), sorted by path."""
    parts = []
    for name in os.listdir(table):
        eq = name.find("=")
        if name[0] in "._" or eq <= 0:
            continue
        if os.path.isdir(os.path.join(table, name)):
            parts.append(os.path.join(table, name))
    if not parts:
        parts = [table]
    files = []
    for part in parts:
        for name in os.listdir(part):
            path = os.path.join(part, name)
            if name[0] in "._" or name.endswith(".idx") or not os.path.isfile(path):
                continue
            files.append(path)
    return sorted(files)


def masked_crc_fn():
    """The masked CRC32C of TFRecord (tensorflow/core/lib/io/record_writer.h),
    from crcmod's C extension; None when crcmod or its extension is missing
    (pure-Python CRC would cost more than everything else together)."""
    try:
        import crcmod._crcfunext  # noqa: F401 (only: is the C extension there)
        import crcmod.predefined
    except ImportError:
        return None
    crc = crcmod.predefined.mkCrcFun("crc-32c")

    def masked(data):
        c = crc(data)
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    return masked


def bad_record(path, off, what):
    return IOError("%s: record at offset %d: %s" % (path, off, what))


class Examples(IterableDataset):
    """Rows of TFRecord files of tf.train.Example: (dense values, id lists
    truncated to MAX_LEN, label). A row without a label, or with a dense
    feature that is not exactly one value, is skipped (as dpp and dpp-refsum
    skip it); an absent dense value is 0 (the spec's fill_missing), an
    absent id list an empty one."""

    def __init__(self, files, example_cls, masked_crc):
        super().__init__()
        self.files = files
        self.example_cls = example_cls
        self.masked_crc = masked_crc
        self.skipped = 0
        self.bytes = 0

    def __iter__(self):
        ex = self.example_cls()
        crc = self.masked_crc
        for path in self.files:
            off = 0
            with open(path, "rb", buffering=READ_BUFFER) as f:
                while True:
                    head = f.read(12)
                    if not head:
                        break
                    if len(head) < 12:
                        raise bad_record(path, off, "truncated record")
                    (length,) = U64.unpack_from(head)
                    if crc and crc(head[:8]) != U32.unpack_from(head, 8)[0]:
                        raise bad_record(path, off, "corrupted record (length CRC)")
                    if length > MAX_RECORD:
                        raise bad_record(path, off, "length over the limit")
                    payload = f.read(length)
                    tail = f.read(4)
                    if len(payload) != length or len(tail) != 4:
                        raise bad_record(path, off, "truncated record")
                    if crc and crc(payload) != U32.unpack(tail)[0]:
                        raise bad_record(path, off, "corrupted record (payload CRC)")
                    off += 16 + length
                    ex.ParseFromString(payload)
                    row = self._row(ex.features.feature)
                    if row is None:
                        self.skipped += 1
                    else:
                        yield row
            self.bytes += off

    @staticmethod
    def _row(fmap):
        # get(), not [], on a message map: [] would insert an absent key.
        f = fmap.get(LABEL)
        if f is None:
            return None
        v = f.int64_list.value or f.float_list.value
        if len(v) != 1:
            if not v:
                return None
            raise ValueError("label has %d values" % len(v))
        label = v[0]
        dense = []
        for name in DENSE:
            f = fmap.get(name)
            if f is None:
                dense.append(0.0)  # {"op": "fill_missing", "value": 0}
                continue
            v = f.float_list.value or f.int64_list.value
            if len(v) != 1:
                return None
            dense.append(v[0])
        ids = []
        for name in SPARSE:
            f = fmap.get(name)
            ids.append(f.int64_list.value[:MAX_LEN] if f is not None else [])
        return dense, ids, label


def collate(rows):
    """A list of rows to the batch tensors; the element-wise transforms run
    here on whole columns."""
    # log1p in float64, rounded to float32 after: docs/spec.md's definition
    dense = torch.tensor([r[0] for r in rows], dtype=torch.float32).double()
    dense = dense.clamp_(min=0).log1p_().clamp_(0, 20).float()
    label = torch.tensor([r[2] for r in rows], dtype=torch.float32)
    sparse = []
    for i in range(len(SPARSE)):
        lists = [r[1][i] for r in rows]
        lengths = torch.tensor([len(x) for x in lists], dtype=torch.int32)
        values = torch.tensor(list(itertools.chain.from_iterable(lists)), dtype=torch.int64)
        sparse.append((values.remainder_(MODULO), lengths))
    return dense, sparse, label


def to_int64(x):
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", required=True, help="a dpp-gen TFRecord table folder")
    ap.add_argument("--proto-dir", required=True,
                    help="the folder of example_pb2.py (protoc --python_out of "
                    "bench/peers/example.proto)")
    ap.add_argument("--no-crc", action="store_true", help="do not verify the CRCs")
    args = ap.parse_args()

    sys.path.insert(0, args.proto_dir)
    import example_pb2
    from google.protobuf.internal import api_implementation

    torch.set_num_threads(1)
    masked_crc = None
    if not args.no_crc:
        masked_crc = masked_crc_fn()
        if masked_crc is None:
            sys.exit("torch_reader: no crcmod C extension (Debian: python3-crcmod); "
                     "install it or pass --no-crc")
    files = list_table(args.table)
    if not files:
        sys.exit("torch_reader: no data files under %s" % args.table)

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    ds = Examples(files, example_pb2.Example, masked_crc)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=0, collate_fn=collate)
    rows = batches = lengths_sum = ids_sum = ids_wsum = 0
    label_sum = dense_sum = 0.0
    for dense, sparse, label in loader:
        # The consumer: every value of the batch is read once.
        batches += 1
        rows += label.shape[0]
        label_sum += label.double().sum().item()
        dense_sum += dense.double().sum().item()
        for i, (values, lengths) in enumerate(sparse):
            s = values.sum().item()
            lengths_sum += lengths.sum().item()
            ids_sum += s
            ids_wsum += (i + 1) * s
    secs = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    user = ru1.ru_utime - ru0.ru_utime
    system = ru1.ru_stime - ru0.ru_stime

    # dense_sum is summed per batch, in another order than dpp-refsum's
    # running sum: equal to it only within a relative 1e-9 or so.
    print('{"epoch":0,"rows":%d,"batches":%d,"label_sum":%.17g,"dense_sum":%.17g,'
          '"sparse_lengths_sum":%d,"sparse_ids_sum":%d,"sparse_ids_wsum":%d}'
          % (rows, batches, label_sum, dense_sum, lengths_sum, to_int64(ids_sum),
             to_int64(ids_wsum)))
    if ds.skipped:
        print("torch_reader: %d records skipped" % ds.skipped, file=sys.stderr)
    print("torch_reader: %d rows, %d files, %.1f MB, protobuf %s, CRC %s, in %.3f s: %.0f rows/s; "
          "CPU %.3f s (user %.3f + sys %.3f): %.0f rows per CPU-s"
          % (rows, len(files), ds.bytes / 1e6, api_implementation.Type(),
             "not verified" if args.no_crc else "verified", secs, rows / secs,
             user + system, user, system, rows / (user + system)))


if __name__ == "__main__":
    main()
