# SPDX-License-Identifier: Apache-2.0
"""PyTorch conventions and sessions that tell the truth (issue #14):
  1. rank and world size: explicit arguments win; else torch.distributed
     when initialized (a one-process gloo group); else RANK / LOCAL_RANK and
     WORLD_SIZE; else 0 of 1. A world size that is not the spec's consumers
     raises DppError DPP_ERANK naming both and where they came from; a RANK
     that is no number raises ValueError naming it. Each rank read through
     the defaults gets its own rows (the two ranks' rows add up to the table).
  2. len(ds) and len(DataLoader) are the epoch's batch count, equal to the
     batches an iteration yields; TypeError when the spec has filters.
  3. next() without a timeout on a finished session raises SessionEnd at
     once (it used to hang).
  4. a misspelt label fails the session: DppError DPP_EFAILED with the
     session, the rank and the master's sentence (did you mean "label"?).
"""
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import torch.distributed  # noqa: E402
import torch.utils.data  # noqa: E402

import dpp  # noqa: E402

ROWS = 6000
ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def set_env(**kv):
    for k in ENV:
        os.environ.pop(k, None)
    for k, v in kv.items():
        os.environ[k] = v


def rows_of(ds):
    return sum(b.rows for b in ds)


def case_ranks(cl, sid2):
    T.log("case 1: rank and world size")
    set_env()
    assert dpp.resolve_rank() == (0, 1, "the arguments and defaults")
    set_env(RANK="1", WORLD_SIZE="2")
    assert dpp.resolve_rank() == (1, 2, "RANK, WORLD_SIZE")
    assert dpp.resolve_rank(0, 0)[:2] == (0, 0), "explicit arguments must win"
    set_env(LOCAL_RANK="1", WORLD_SIZE="2")
    assert dpp.resolve_rank()[:2] == (1, 2)
    set_env(RANK="one")
    try:
        dpp.resolve_rank()
        raise AssertionError("RANK=one was taken")
    except ValueError as e:
        assert str(e) == "RANK='one' is not a rank number (expected an integer >= 0)", str(e)

    # the two ranks of a 2-consumer session, each from the environment
    total = 0
    for r in (0, 1):
        set_env(RANK=str(r), WORLD_SIZE="2")
        with dpp.TorchDataset(cl.master, sid2, next_timeout_s=60) as ds:
            assert (ds.rank, ds.world_size) == (r, 2)
            assert ds.client.rank == r
            n = rows_of(ds)
            assert 0 < n < ROWS, n
            total += n
    assert total == ROWS, "ranks 0 and 1 read %d rows of %d" % (total, ROWS)

    set_env(RANK="0", WORLD_SIZE="3")
    ds = dpp.TorchDataset(cl.master, sid2)
    try:
        ds.client
        raise AssertionError("world_size 3 opened a 2-consumer session")
    except dpp.DppError as e:
        assert e.code == dpp.DPP_ERANK, repr(e)
        want = (
            "world_size 3 does not match session %s, which has 2 consumers (ranks 0 to 1): give "
            "the trainers' world size to the spec's \"consumers\", or leave world_size 0 (rank 0 "
            "and world_size 3 came from RANK, WORLD_SIZE)" % sid2
        )
        assert e.detail == want, e.detail
        T.log("refused:", e)

    # torch.distributed wins over the environment
    set_env(RANK="1", WORLD_SIZE="2")
    store = tempfile.mktemp(prefix="dpp-pg-")
    torch.distributed.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
    try:
        assert dpp.resolve_rank() == (0, 1, "torch.distributed")
        ds = dpp.TorchDataset(cl.master, sid2)
        try:
            ds.client
            raise AssertionError("world_size 1 from torch.distributed opened a 2-consumer session")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_ERANK and "(rank 0 and world_size 1 came from torch.distributed)" in e.detail, e.detail
    finally:
        torch.distributed.destroy_process_group()
        if os.path.exists(store):
            os.unlink(store)
    set_env()


def case_len(cl, sid, sid_filtered):
    T.log("case 2: len()")
    with dpp.TorchDataset(cl.master, sid, next_timeout_s=60) as ds:
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
        n = len(ds)
        assert n == len(loader) == -(-ROWS // 500), (n, len(loader))
        got = sum(1 for _ in loader)
        assert got == n, "len() said %d, the epoch had %d batches" % (n, got)
    with dpp.TorchDataset(cl.master, sid_filtered, next_timeout_s=60) as ds:
        try:
            len(ds)
            raise AssertionError("len() of a filtered session before its epoch arrived")
        except TypeError as e:
            assert "the spec has filters" in str(e) and sid_filtered in str(e), str(e)


def case_finished(cl, sid):
    T.log("case 3: next() on a finished session")
    out = {}

    def read():
        with dpp.Client(cl.master, sid) as c:
            try:
                c.next()
                out["r"] = "a batch"
            except dpp.SessionEnd:
                out["r"] = "end"

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "next() on a finished session hangs"
    assert out.get("r") == "end", out


def case_failed(cl, table):
    T.log("case 4: a misspelt label")
    spec = T.criteo_spec(batch_size=500, epochs=1, remainder="keep")
    spec["label"] = {"name": "lable"}
    sid = cl.submit(cl.write_spec(spec, "lable.json"))
    ds = dpp.TorchDataset(cl.master, sid, next_timeout_s=60)
    try:
        for _ in ds:
            raise AssertionError("a batch of a session whose every record lacks the label")
        raise AssertionError("the epoch ended cleanly")
    except dpp.DppError as e:
        assert e.code == dpp.DPP_EFAILED, repr(e)
        assert (e.session, e.rank) == (sid, 0), (e.session, e.rank)
        # the first split's records (of two files) are all rejected: past
        # max_reject_ratio, the missing label is named at once
        want = 'feature "lable" (the label) is in none of the first %d records read: fix its name in the spec; did you mean "label"?' % (ROWS // 2)
        assert e.detail == want, e.detail
        assert ("session %s rank 0: " % sid) + want in str(e), str(e)
        T.log("raised:", e)
    ds.close()


def main():
    with T.Cluster("conventions") as cl:
        table = cl.gen(rows=ROWS, shards=2, partitions=1)
        cl.start_master()
        cl.start_worker()
        one = cl.submit(cl.write_spec(T.criteo_spec(batch_size=500, epochs=1, remainder="keep"), "one.json"))
        two = cl.submit(cl.write_spec(T.criteo_spec(batch_size=500, epochs=1, remainder="keep", consumers=2), "two.json"))
        filt = T.criteo_spec(batch_size=500, epochs=1, remainder="keep")
        filt["filters"] = [{"op": "sample", "p": 0.5, "seed": 1}]
        filtered = cl.submit(cl.write_spec(filt, "filtered.json"))
        case_ranks(cl, two)
        case_len(cl, one, filtered)
        case_finished(cl, one)
        case_failed(cl, table)
    T.log("PASS")


if __name__ == "__main__":
    main()
