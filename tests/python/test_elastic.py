# SPDX-License-Identifier: Apache-2.0
"""Elastic resume (docs/guarantees.md#elastic-resume) end to end.

A TFRecord table of ROWS rows, each with its own row_id, written here with
a hand-rolled tf.Example encoder (not dpp's writer) and read back by a
plain reader of the framing (the reference of which ids exist). A shuffled
session of 2 epochs, remainder "pad", 4 consumers (case chain):

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

Further cases, each its own session on the same daemons:

  restart   a new world that dies before its first checkpoint: 3 ranks
            resume from 4 tokens, read 5 batches and die; 3 ranks start
            again from the same tokens and read the same rows; then 2
            ranks from them read the rest: every row exactly once.
  takeover  3 ranks resume from 2 tokens while the 2 old clients are still
            attached: the new world reads (remainder drop: no row twice,
            fewer than 3 x batch_size left out), each old client gets
            DPP_ERANK, the master logs the takeover.
  len       remainder keep: epoch_batches (len()) is the re-planned
            epoch's count at open and the next epoch's in it.
  example   examples/elastic_resume.py, with torch.distributed (gloo): a
            session read by 2 processes, then by 3 that load rank 0's
            gathered state_dict: every row exactly once, equal steps in
            each world.

Arguments name cases to run (chain, restart, takeover, len, example); none:
all of them.
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


def batch_ids(b):
    """The row_ids of a batch's rows that are not padding."""
    vals = b.sparse["row_id"].values.tolist()
    mask = b.mask.tolist()
    ids, at = [], 0
    for r, n in enumerate(b.sparse["row_id"].lengths.tolist()):
        if mask[r]:
            ids.extend(vals[at:at + n])
        at += n
    return ids


def read(cl, rank, out, **kw):
    """Reads batches on a thread: until `batches` of them (then checkpoints,
    unless checkpoint=False: a trainer that dies), or to the session's end.
    out[rank] = (row_ids per epoch, batches per epoch, token, epoch_batches
    at open, epoch_batches per epoch as the epoch's first batch saw it)."""
    batches = kw.pop("batches", None)
    checkpoint = kw.pop("checkpoint", True)
    timeout = kw.pop("timeout", 60)
    try:
        with dpp.Client(cl.master, kw.pop("session", None), rank=rank, **kw) as c:
            ids, counts, known = {}, Counter(), {}
            epoch_batches = c.epoch_batches
            while batches is None or sum(counts.values()) < batches:
                try:
                    b = c.next(timeout)
                except dpp.EpochEnd:
                    continue
                except dpp.SessionEnd:
                    break
                e = c.epoch
                if e not in known:
                    known[e] = c.epoch_batches
                counts[e] += 1
                ids.setdefault(e, []).extend(batch_ids(b))
            tok = c.checkpoint() if batches is not None and checkpoint else None
            out[rank] = (ids, counts, tok, epoch_batches, known)
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


def exactly_once(got, want, what):
    if got != Counter(want):
        missing, extra = Counter(want) - got, got - Counter(want)
        raise AssertionError("%s: %d rows missing, %d delivered twice or more: %s %s" % (
            what, sum(missing.values()), sum(extra.values()), sorted(missing)[:10],
            sorted(extra)[:10]))


def epoch_rows(out, ranks, epoch=0):
    return Counter(i for r in ranks for i in out[r][0].get(epoch, []))


def chain(cl, want, spec):
    """Phases 1 to 3: 4 -> 3 -> (master restart) -> 6 ranks."""
    sid = cl.submit(cl.write_spec(spec))
    per_rank = (ROWS + 3) // 4 // BS + 1  # 250 rows: 31.25 batches, padded to 32
    k1 = per_rank * 4 // 10

    T.log("phase 1: 4 ranks read %d batches each, then checkpoint" % k1)
    a = world(cl, 4, session=sid, batches=k1)
    tokens_a = [a[r][2] for r in range(4)]
    assert all(a[r][1][0] == k1 for r in range(4))
    got = epoch_rows(a, range(4))

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
    got += epoch_rows(b, range(3))
    tokens_b = [b[r][2] for r in range(3)]
    T.log("  %d batches per rank in the new plan, %d read" % (n2, k2))

    T.log("  master restart: the next resume meets a replayed plan")
    cl.restart_master()

    T.log("phase 3: 6 ranks resume from the 3 tokens and read to the end")
    c = world(cl, 6, elastic=tokens_b, world_size=6)
    got += epoch_rows(c, range(6))
    counts0 = [c[r][1][0] for r in range(6)]
    counts1 = [c[r][1][1] for r in range(6)]
    assert len(set(counts0)) == 1, "unequal batches in the 6-rank world: %s" % counts0
    assert len(set(counts1)) == 1, "unequal batches in epoch 1: %s" % counts1
    exactly_once(got, want, "epoch 0")
    exactly_once(epoch_rows(c, range(6), 1), want, "epoch 1")
    T.log("  epoch 0: %d rows exactly once over 4, 3 and 6 ranks (%d, %d, %d batches "
          "each); epoch 1: %d batches on each of 6 ranks" % (
              ROWS, k1, k2, counts0[0], counts1[0]))


def restart(cl, want, spec):
    """A new world that dies before its first checkpoint: 4 ranks
    checkpoint; 3 ranks resume from the 4 tokens, read 5 batches and die;
    3 ranks start again from the same tokens (the same rows as the first
    3, in the same order), read 5 and die; 2 ranks start from them and read
    to the end: with the 4 ranks' rows, every row exactly once."""
    T.log("restart: a new world that dies before its first checkpoint")
    sid = cl.submit(cl.write_spec(dict(spec, epochs=1, shuffle={"seed": 5}), "restart.json"))
    a = world(cl, 4, session=sid, batches=6)
    tokens = [a[r][2] for r in range(4)]
    got = epoch_rows(a, range(4))
    first = world(cl, 3, elastic=tokens, world_size=3, batches=5, checkpoint=False)
    again = world(cl, 3, elastic=tokens, world_size=3, batches=5, checkpoint=False)
    for r in range(3):
        assert again[r][0][0] == first[r][0][0], (
            "rank %d of the 3-rank world started again from the same tokens read other rows "
            "than the world that died: %s..., before %s..." % (
                r, again[r][0][0][:8], first[r][0][0][:8]))
    last = world(cl, 2, elastic=tokens, world_size=2)
    counts = [last[r][1][0] for r in range(2)]
    assert len(set(counts)) == 1, "unequal batches in the 2-rank world: %s" % counts
    exactly_once(got + epoch_rows(last, range(2)), want,
                 "4 ranks, then 2 from the same tokens after two 3-rank worlds died")
    T.log("  the 3-rank world started twice read the same rows; 2 ranks then read the rest: "
          "%d rows exactly once" % ROWS)


def takeover(cl, want, spec):
    """An elastic resume while the old world's clients are still attached:
    the new world reads (remainder drop: no row twice, fewer than 3 x BS of
    the rest left out, the planned batch count known), and each old client
    gets DPP_ERANK."""
    T.log("takeover: 3 ranks resume while the 2 old ranks are still attached")
    sid = cl.submit(cl.write_spec(dict(spec, epochs=1, consumers=2, remainder="drop"),
                                  "takeover.json"))
    old = [dpp.Client(cl.master, sid, rank=r) for r in range(2)]
    try:
        got = Counter()
        for c in old:
            for _ in range(3):
                got.update(batch_ids(c.next(60)))
        tokens = [c.checkpoint() for c in old]
        new = world(cl, 3, elastic=tokens, world_size=3, timeout=30)
        counts = [new[r][1][0] for r in range(3)]
        assert len(set(counts)) == 1, "unequal batches in the new world: %s" % counts
        assert all(new[r][3] == counts[0] for r in range(3)), [new[r][3] for r in range(3)]
        got += epoch_rows(new, range(3))
        twice = [i for i, n in got.items() if n > 1]
        assert not twice, "rows delivered twice: %s" % twice[:10]
        missing = len(set(want) - set(got))
        assert missing < 3 * BS, "%d rows left out, drop leaves out fewer than %d" % (
            missing, 3 * BS)
        for r, c in enumerate(old):
            try:
                for _ in range(1000):
                    c.next(30)
                raise AssertionError("old rank %d read on after the new world took over" % r)
            except dpp.DppError as e:
                assert e.code == dpp.ERRORS["DPP_ERANK"], e
                assert "old world" in e.detail, e.detail
    finally:
        for c in old:
            c.close()
    with open(os.path.join(cl.tmp, "master.log"), errors="replace") as f:
        assert "elastic_takeover session=%s" % sid in f.read(), "the takeover is not logged"
    T.log("  %d batches on each new rank, %d rows left out by drop; the old ranks got DPP_ERANK"
          % (counts[0], missing))


def planned_len(cl, want, spec):
    """The batch count of the re-planned epoch (at open) and of the next,
    normally planned one, remainder "keep"."""
    T.log("len: batch counts after an elastic resume, remainder keep")
    sid = cl.submit(cl.write_spec(dict(spec, remainder="keep", shuffle={"seed": 3}), "len.json"))
    a = world(cl, 4, session=sid, batches=3)
    b = world(cl, 2, elastic=[a[r][2] for r in range(4)], world_size=2)
    for r in range(2):
        ids, counts, _, at_open, known = b[r]
        assert at_open == counts[0] and known.get(0) == counts[0], (
            "rank %d: %d batches in the re-planned epoch, epoch_batches said %s at open and %s "
            "in it" % (r, counts[0], at_open, known.get(0)))
        assert known.get(1) == counts[1] == -(-ROWS // 2 // BS), (
            "rank %d: %d batches in epoch 1, epoch_batches said %s (%d rows a rank: %d)" % (
                r, counts[1], known.get(1), ROWS // 2, -(-ROWS // 2 // BS)))
    exactly_once(epoch_rows(a, range(4)) + epoch_rows(b, range(2)), want, "epoch 0")
    exactly_once(epoch_rows(b, range(2), 1), want, "epoch 1")
    T.log("  epoch_batches %d at open, %d in epoch 1" % (b[0][3], b[0][4][1]))


def example_script(cl, want, spec):
    """examples/elastic_resume.py, with torch.distributed: 2 then 3 processes."""
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
    exactly_once(got, want, "elastic_resume.py")


CASES = {"chain": chain, "restart": restart, "takeover": takeover, "len": planned_len,
         "example": example_script}


def main(names):
    for name in names:
        if name not in CASES:
            raise SystemExit("unknown case %r: the cases are %s" % (name, ", ".join(CASES)))
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
        for name in names or CASES:
            CASES[name](cl, want, spec)
    T.log("ok")


if __name__ == "__main__":
    main(sys.argv[1:])
