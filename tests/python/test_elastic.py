# SPDX-License-Identifier: Apache-2.0
"""Elastic resume (docs/guarantees.md#elastic-resume) end to end.

A TFRecord table of ROWS rows, each with its own row_id, written here with
a hand-rolled tf.Example encoder (not dpp's writer) and read back by a
plain reader of the framing (the reference of which ids exist). A shuffled
session of 2 epochs, remainder "pad", 4 consumers:

  1. 4 ranks read 40% of their epoch's batches and checkpoint;
  2. 3 ranks resume from the 4 tokens (every one opens with them), read a
     third of their batches and checkpoint; the master is restarted here,
     so the next resume meets a replayed plan;
  3. 6 ranks resume from the 3 tokens and read to the end of the session.

Checked: over epoch 0 the union of the row_ids the three worlds delivered
(padding masked out) is every row of the reference exactly once; each
world's ranks got equal batch counts (the padded count the client knows
before the epoch ends); epoch 1 is read by 6 ranks, every row once and
equal batches; a token of the old world is refused after the resume,
naming the generation; mismatched tokens are refused.

  4. examples/elastic_resume.py, with torch.distributed (gloo): a second
     session read by 2 processes, then by 3 that load rank 0's gathered
     state_dict: every row exactly once, equal steps in each world.
"""
import os
import re
import struct
import subprocess
import sys
import threading
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402
from test_token_forgery import crc32c  # noqa: E402

import dpp  # noqa: E402

ROWS, FILES, BS = 1000, 5, 8


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def example(row_id):
    """tf.Example{row_id: int64 [row_id], x: float [row_id / 2], label}."""
    feats = [
        ("row_id", field(3, field(1, varint(row_id)))),  # Feature.int64_list, packed
        ("x", field(2, field(1, struct.pack("<f", row_id / 2)))),  # Feature.float_list
        ("label", field(2, field(1, struct.pack("<f", row_id % 2)))),
    ]
    entries = b"".join(field(1, field(1, k.encode()) + field(2, v)) for k, v in feats)
    return field(1, entries)  # Example.features


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def write_table(root):
    os.makedirs(os.path.join(root, "elastic"))
    paths = []
    for f in range(FILES):
        path = os.path.join(root, "elastic", "part-%05d.tfrecord" % f)
        with open(path, "wb") as out:
            for i in range(f * ROWS // FILES, (f + 1) * ROWS // FILES):
                p = example(i)
                head = struct.pack("<Q", len(p))
                out.write(head + struct.pack("<I", masked(crc32c(head))) + p +
                          struct.pack("<I", masked(crc32c(p))))
        paths.append(path)
    return paths


def reference_ids(paths):
    """Every row_id in the files, read by framing and the Example's bytes."""
    ids = []
    for path in paths:
        data = open(path, "rb").read()
        at = 0
        while at < len(data):
            (n,) = struct.unpack_from("<Q", data, at)
            rec = data[at + 12:at + 12 + n]
            key = b"\x0a\x06row_id"
            k = rec.index(key) + len(key)
            # value: 0x12 len, Feature: 0x1a len, Int64List: 0x0a len, varint
            v, shift, p = 0, 0, k + 6
            while True:
                b = rec[p]
                v |= (b & 0x7F) << shift
                shift += 7
                p += 1
                if not b & 0x80:
                    break
            ids.append(v)
            at += 12 + n + 4
    return ids


def read(cl, rank, out, **kw):
    """Reads batches on a thread: until `batches` of them (then checkpoints),
    or to the session's end. out[rank] = (row_ids per epoch, batches per
    epoch, token, epoch_batches)."""
    batches = kw.pop("batches", None)
    try:
        with dpp.Client(cl.master, kw.pop("session", None), rank=rank, **kw) as c:
            ids, counts = {}, Counter()
            epoch_batches = c.epoch_batches
            while batches is None or sum(counts.values()) < batches:
                try:
                    b = c.next(60)
                except dpp.EpochEnd:
                    continue
                except dpp.SessionEnd:
                    break
                e = c.epoch
                counts[e] += 1
                vals = b.sparse["row_id"].values.tolist()
                mask = b.mask.tolist()
                lengths = b.sparse["row_id"].lengths.tolist()
                at = 0
                for r, n in enumerate(lengths):
                    if mask[r]:
                        ids.setdefault(e, []).extend(vals[at:at + n])
                    at += n
            tok = c.checkpoint() if batches is not None else None
            out[rank] = (ids, counts, tok, epoch_batches)
    except Exception as e:  # noqa: BLE001 (main reports it)
        out.setdefault("errors", []).append("rank %d: %r" % (rank, e))


def world(cl, n, **kw):
    out = {}
    th = [threading.Thread(target=read, args=(cl, r, out), kwargs=dict(kw)) for r in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if "errors" in out:
        raise AssertionError("; ".join(out["errors"]))
    return out


def main():
    with T.Cluster("elastic") as cl:
        paths = write_table(cl.root)
        want = reference_ids(paths)
        assert sorted(want) == list(range(ROWS)), "the reference reader disagrees with the writer"
        cl.start_master()
        cl.start_worker(2)
        cl.start_worker(2)
        spec = {"table": "elastic", "batch_size": BS, "epochs": 2, "consumers": 4,
                "split_rows": 64, "remainder": "pad", "shuffle": {"seed": 11},
                "features": {"dense": [{"name": "x"}], "sparse": [{"name": "row_id"}]},
                "label": {"name": "label"}}
        sid = cl.submit(cl.write_spec(spec))
        per_rank = (ROWS + 3) // 4 // BS + 1  # 250 rows: 31.25 batches, padded to 32
        k1 = per_rank * 4 // 10

        T.log("phase 1: 4 ranks read %d batches each, then checkpoint" % k1)
        a = world(cl, 4, session=sid, batches=k1)
        tokens_a = [a[r][2] for r in range(4)]
        assert all(a[r][1][0] == k1 for r in range(4))
        got = Counter(i for r in range(4) for i in a[r][0].get(0, []))

        T.log("phase 2: 3 ranks resume from the 4 tokens")
        # an old-world token resumes no more once the new world exists; a
        # short or shuffled set of tokens is refused first
        for bad, words in ((tokens_a[:3], "3 tokens for session"),
                           ([tokens_a[1], tokens_a[0]] + tokens_a[2:], "token 0")):
            try:
                dpp.Client(cl.master, None, rank=0, world_size=3, elastic=bad).close()
                raise AssertionError("elastic tokens %s were accepted" % words)
            except dpp.DppError as e:
                assert e.code == dpp.ERRORS["DPP_ETOKEN"] and words in (e.detail or ""), e
        probe = dpp.Client(cl.master, None, rank=0, world_size=3, elastic=tokens_a)
        n2 = probe.epoch_batches
        probe.close()
        k2 = n2 // 3
        b = world(cl, 3, elastic=tokens_a, world_size=3, batches=k2)
        assert all(b[r][1][0] == k2 for r in range(3)), [b[r][1] for r in range(3)]
        assert all(b[r][3] == n2 for r in range(3)), [b[r][3] for r in range(3)]
        try:
            dpp.Client(cl.master, None, rank=1, resume=tokens_a[1]).close()
            raise AssertionError("an old world's token resumed")
        except dpp.DppError as e:
            assert e.code == dpp.ERRORS["DPP_ETOKEN"] and "generation" in (e.detail or ""), e
            T.log("  old token: " + e.detail[:150])
        got += Counter(i for r in range(3) for i in b[r][0].get(0, []))
        tokens_b = [b[r][2] for r in range(3)]
        T.log("  %d batches per rank in the new plan, %d read" % (n2, k2))

        T.log("  master restart: the next resume meets a replayed plan")
        cl.restart_master()

        T.log("phase 3: 6 ranks resume from the 3 tokens and read to the end")
        c = world(cl, 6, elastic=tokens_b, world_size=6)
        got += Counter(i for r in range(6) for i in c[r][0].get(0, []))
        counts0 = [c[r][1][0] for r in range(6)]
        counts1 = [c[r][1][1] for r in range(6)]
        assert len(set(counts0)) == 1, "unequal batches in the 6-rank world: %s" % counts0
        assert len(set(counts1)) == 1, "unequal batches in epoch 1: %s" % counts1
        if got != Counter(want):
            missing, extra = Counter(want) - got, got - Counter(want)
            raise AssertionError("epoch 0: %d rows missing, %d delivered twice or more: %s %s" % (
                sum(missing.values()), sum(extra.values()), sorted(missing)[:10],
                sorted(extra)[:10]))
        e1 = Counter(i for r in range(6) for i in c[r][0].get(1, []))
        assert e1 == Counter(want), "epoch 1: not every row exactly once"
        T.log("  epoch 0: %d rows exactly once over 4, 3 and 6 ranks (%d, %d, %d batches "
              "each); epoch 1: %d batches on each of 6 ranks" % (
                  ROWS, k1, k2, counts0[0], counts1[0]))

        T.log("part 4: examples/elastic_resume.py, torch.distributed, 2 then 3 processes")
        sid = cl.submit(cl.write_spec(dict(spec, consumers=2, epochs=1), "two.json"))
        ids_dir = os.path.join(cl.tmp, "ids")
        os.makedirs(ids_dir)
        r = subprocess.run([sys.executable, os.path.join(T.SRC, "examples", "elastic_resume.py"),
                            "--master", cl.master, "--session", sid, "--worlds", "2,3",
                            "--steps", "20", "--state", os.path.join(cl.tmp, "state.pt"),
                            "--ids-dir", ids_dir],
                           env=cl.env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stdout + r.stderr
        T.log("  " + r.stdout.strip().replace("\n", "; "))
        for line in r.stdout.splitlines():
            steps = re.search(r"steps per rank \[([0-9, ]+)\]", line).group(1).split(", ")
            assert len(set(steps)) == 1, line
        got = Counter()
        for name in os.listdir(ids_dir):
            with open(os.path.join(ids_dir, name)) as f:
                got += Counter(int(x) for x in f.read().split())
        assert got == Counter(want), "elastic_resume.py: %d rows missing, %d extra" % (
            sum((Counter(want) - got).values()), sum((got - Counter(want)).values()))
    T.log("ok")


if __name__ == "__main__":
    main()
