# SPDX-License-Identifier: Apache-2.0
"""dpp.submit, dpp.status, dpp.cancel: sessions driven from Python.
  1. submit a dict, a spec file's path and JSON text: each a dpp.Session
     that dppctl status knows, with the state dppctl reports;
  2. TorchDataset(session) and Client(session) read it: every row once,
     checked against dppctl read of the same spec; status() afterwards is
     "done" with the rows, as dppctl status -o json says;
  3. a spec with two mistakes: DppError DPP_ESPEC naming both, with paths;
  4. cancel a running session: the state before, then "cancelled", the
     reader fails with an error that says so; cancel of an unknown
     session: DPP_ENOSESSION; the listing holds every session;
  5. a closed port: DppError ECONNREFUSED from submit;
  6. a spec over the master's frame limit (17 MB): DppError DPP_EFRAMESIZE
     naming the message and the limit, as 15 MB gets DPP_ESPEC (not a
     connection reset).
"""
import errno
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import dpp  # noqa: E402
import torch  # noqa: E402

ROWS = 3000


def dppctl_json(cl, *args):
    out = cl.run([os.path.join(T.BIN, "dppctl"), *args, "-o", "json"])
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def main():
    with T.Cluster("submit") as cl:
        cl.gen(rows=ROWS, shards=2, partitions=1, seed=11)
        master = cl.start_master()
        spec = T.criteo_spec(batch_size=250, epochs=1)

        T.log("case 1: submit a dict, a path and JSON text")
        s1 = dpp.submit(spec, master=master)
        path = cl.write_spec(spec)
        s2 = dpp.submit(path, master=master)
        with open(path) as f:
            s3 = dpp.submit(f.read(), master=master)
        ids = {s1.id, s2.id, s3.id}
        assert len(ids) == 3, ids
        for s in (s1, s2, s3):
            assert isinstance(s, dpp.Session) and s.master == master and str(s) == s.id
            st = s.status()
            ref = dppctl_json(cl, "status", s.id)[-1]
            assert st["session"] == s.id == ref["session"], (st, ref)
            assert st["state"] == ref["state"] and st["state"] in ("indexing", "running"), st
            assert st["table"].endswith("criteo") and st["consumers"] == 1, st

        T.log("case 2: TorchDataset(session) and Client(session) read every row")
        cl.start_worker(threads=2)
        ds = dpp.TorchDataset(s1)
        assert ds.master == master and ds.session == s1.id
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
        rows = 0
        dense_sum = 0.0
        for b in loader:
            rows += b.rows
            dense_sum += float(b.dense.double().sum())
        ds.close()
        assert rows == ROWS, rows
        ref = dppctl_json(cl, "read", s2.id)[0]
        assert ref["rows"] == ROWS and abs(ref["dense_sum"] - dense_sum) <= 1e-6 * abs(ref["dense_sum"]), (
            ref,
            dense_sum,
        )
        with dpp.Client(s3) as c:
            assert sum(b.rows for b in c.epoch_iter(timeout_s=60)) == ROWS
        st = s1.status()
        assert st["state"] == "done" and st["rows_produced"] == ROWS, st
        assert st["ranks"][0]["batches"] == ROWS // 250, st
        ref = dppctl_json(cl, "status", s1.id)[-1]
        for k in ("state", "rows_produced", "splits_consumed", "epochs_done", "files"):
            assert ref[k] == st[k], (k, ref, st)
        T.log("read", rows, "rows; status:", st["state"], st["rows_produced"])

        T.log("case 3: two mistakes, both named")
        bad = dict(spec)
        bad["batch_sise"] = bad.pop("batch_size")
        bad["features"] = json.loads(json.dumps(spec["features"]))
        bad["features"]["dense"][0]["transforms"] = [{"op": "log1pp"}]
        try:
            dpp.submit(bad, master=master)
            raise AssertionError("a spec with two mistakes was accepted")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_ESPEC, repr(e)
            lines = e.detail.splitlines()
            assert 'batch_sise: unknown key; did you mean "batch_size"?' in lines, lines
            assert any(
                l.startswith('features.dense[0].transforms[0].op: unknown op "log1pp"; did you mean "log1p"?')
                for l in lines
            ), lines
            T.log("refused as expected:", e)

        T.log("case 4: cancel")
        forever = dpp.submit(T.criteo_spec(batch_size=100, epochs="unbounded"), master=master)
        with dpp.Client(forever) as c:
            c.next(timeout_s=60)  # running
            assert forever.cancel() == "running"
            assert forever.state == "cancelled"
            # what was prefetched before the cancel comes first
            for _ in range(100000):
                try:
                    c.next(timeout_s=60)
                except dpp.EpochEnd:
                    continue
                except dpp.DppError as e:
                    assert "cancel" in str(e), repr(e)
                    T.log("the reader ended:", e)
                    break
            else:
                raise AssertionError("the reader of a cancelled session went on")
        try:
            dpp.cancel("s-no-such", master=master)
            raise AssertionError("cancelled a session that does not exist")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_ENOSESSION, repr(e)
        listing = dpp.status(master=master)
        assert isinstance(listing, list)
        assert {s1.id, s2.id, s3.id, forever.id} <= {x["session"] for x in listing}, listing
        assert all("ranks" not in x for x in listing)

        T.log("case 6: a spec over the frame limit gets the limit, not a reset")
        for size, code, words in (
            (15_000_000, dpp.DPP_ESPEC, "this master takes at most 1048576"),
            (17_000_000, dpp.DPP_EFRAMESIZE, "more than the 16777216 bytes this end takes"),
        ):
            big = dict(spec, pad="x" * size)
            try:
                dpp.submit(big, master=master)
                raise AssertionError("a spec of %d bytes was accepted" % size)
            except dpp.DppError as e:
                assert e.code == code and words in str(e), repr(e)
                T.log("refused as expected:", str(e)[:160])

        T.log("case 5: a closed port")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        try:
            dpp.submit(spec, master="127.0.0.1:%d" % port, timeout_s=5)
            raise AssertionError("submitted to a closed port")
        except dpp.DppError as e:
            assert e.code in (-errno.ECONNREFUSED, dpp.DPP_ETIMEDOUT), repr(e)
            assert "127.0.0.1:%d" % port in str(e), str(e)
            T.log("raised as expected:", e)
    T.log("PASS")


if __name__ == "__main__":
    main()
