# SPDX-License-Identifier: Apache-2.0
"""Forged checkpoint tokens fail at open, naming the field (the adversarial
probe's finding: a version-1 token was only CRC32C-protected, so a token with
another `index` and a recomputed CRC hung the resumed reader, and another
`rank_splits` made an epoch deliver 0 rows and the next miss 200):

  1. reference: a session read without a break;
  2. on a second session of the same spec, a trainer reads K batches and
     takes a token; a forger sets `index` (offset 44) to 9999, or
     `rank_splits` (offset 56) to the plan's count + 3 or to 0, and writes
     the CRC32C of the first 60 bytes to bytes 60..63 (what a version-1
     token needed), or leaves them alone. Each forged token fails
     dpp.Client() at once (in well under a second, before any batch) with
     DPP_ETOKEN, and the error's detail names the field;
  3. a token as version 1 wrote it: DPP_ETOKEN, "from an older version";
  4. the master restarts (same address and state dir: the session's token
     key comes back from the journal); a forged token is still refused, and
     the genuine token resumes with exactly the reference's rest, batch for
     batch: the refused attempts changed nothing in the session.
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import torch  # noqa: E402

import dpp  # noqa: E402

ROWS, BS, K = 2500, 100, 7  # 2 shards, splits of 400 records: blocks 0..3 per split
OFF_INDEX, OFF_RANK_SPLITS, OFF_CRC = 44, 56, 60
FAST_S = 3.0  # a refusal comes at once; the open's own timeout is 30 s


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


def forge(tok, off, value, recompute_crc=True):
    """The token with the u32 at `off` set to value, and (the version-1
    recipe) the CRC32C of bytes 0..59 written to 60..63."""
    b = bytearray(tok)
    struct.pack_into("<I", b, off, value)
    if recompute_crc:
        struct.pack_into("<I", b, OFF_CRC, crc32c(bytes(b[:OFF_CRC])))
    return bytes(b)


def tensors(b):
    return [b.labels.clone(), b.dense.clone(), b.sparse.values.clone(), b.sparse.lengths.clone()]


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y)) for x, y in zip(a, b)
    )


def read_rest(c):
    out = []
    while True:
        try:
            out.append(tensors(c.next(timeout_s=60)))
        except dpp.EpochEnd:
            continue
        except dpp.SessionEnd:
            return out


def refused(cl, sid, tok, field, why):
    """dpp.Client() with tok must fail at once with DPP_ETOKEN naming field."""
    t0 = time.monotonic()
    try:
        c = dpp.Client(cl.master, sid, resume=tok, timeout_s=30)
    except dpp.DppError as e:
        took = time.monotonic() - t0
        assert e.code == dpp.DPP_ETOKEN, "%s: %r" % (why, e)
        assert field in e.detail, "%s: the error does not name %r: %r" % (why, field, e.detail)
        assert took < FAST_S, "%s: refused only after %.1f s" % (why, took)
        T.log("%s: refused in %.0f ms: %s" % (why, took * 1000, e.detail))
        return
    c.close()
    raise AssertionError("%s: dpp.Client() opened with a forged token" % why)


def restart_master(cl):
    """Stops the master and starts it again on the same address with the
    same state dir, so that it replays its journal."""
    for i, (name, p) in enumerate(cl.procs):
        if name == "master":
            p.terminate()
            p.wait(10)
            del cl.procs[i]
            break
    os.unlink(os.path.join(cl.tmp, "master.port"))
    state = os.path.join(cl.tmp, "master-state")
    addr = cl._start(
        "master",
        [T.need(os.path.join(T.BIN, "dpp-master")), "--listen", cl.master, "--state-dir", state, "--data-root", cl.root],
    )
    assert addr == cl.master, (addr, cl.master)


def main():
    with T.Cluster("forgery") as cl:
        cl.gen(rows=ROWS, shards=2, partitions=1)
        cl.start_master()
        cl.start_worker()
        path = cl.write_spec(T.criteo_spec(batch_size=BS, epochs=2, split_rows=400))

        ref_sid = cl.submit(path)
        with dpp.Client(cl.master, ref_sid) as c:
            ref = read_rest(c)
        T.log("reference: %d batches" % len(ref))

        sid = cl.submit(path)
        got = []
        with dpp.Client(cl.master, sid) as c:
            while len(got) < K:
                got.append(tensors(c.next(timeout_s=60)))
            tok = c.checkpoint()
            for _ in range(3):  # read past the checkpoint, then "crash"
                c.next(timeout_s=60)
        assert same(got, ref[:K]), "the batches before the checkpoint differ"
        (splits,) = struct.unpack_from("<I", tok, OFF_RANK_SPLITS)
        T.log("token after %d batches: %d bytes, rank_splits %d" % (K, len(tok), splits))

        cases = [
            (forge(tok, OFF_INDEX, 9999), "index", "index 9999, CRC32C recomputed"),
            (forge(tok, OFF_INDEX, 9999, False), "index", "index 9999, bytes 60.. untouched"),
            (forge(tok, OFF_RANK_SPLITS, splits + 3), "rank_splits", "rank_splits + 3, CRC32C recomputed"),
            (forge(tok, OFF_RANK_SPLITS, 0), "rank_splits", "rank_splits 0, CRC32C recomputed"),
        ]
        for bad, field, why in cases:
            refused(cl, sid, bad, field, why)

        # a token as version 1 wrote it: 64 bytes, version 1, CRC32C at 60
        v1 = bytearray(tok[:64])
        struct.pack_into("<H", v1, 4, 1)
        struct.pack_into("<I", v1, OFF_CRC, crc32c(bytes(v1[:OFF_CRC])))
        refused(cl, sid, bytes(v1), "older version", "a version-1 token")

        restart_master(cl)
        T.log("master restarted")
        refused(cl, sid, cases[0][0], "index", "after the restart: index 9999")
        with dpp.Client(cl.master, sid, resume=tok) as c:
            rest = read_rest(c)
        assert len(rest) == len(ref) - K, (len(rest), len(ref), K)
        assert same(rest, ref[K:]), "resumed after refused forgeries: the batches differ"
        T.log("the genuine token resumed: %d batches, equal to the reference's rest" % len(rest))
    T.log("OK")


if __name__ == "__main__":
    main()
