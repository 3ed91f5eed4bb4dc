# SPDX-License-Identifier: Apache-2.0
"""Weighted mixtures of tables (docs/spec.md#mixtures) end to end.

Three TFRecord tables (web, code, books) written here with
test_elastic.py's hand-rolled tf.Example encoder, each row with its own
row_id (source i's ids start at i x 100000), read back by its plain framing
reader. A shuffled mixture over them, weights 0.5/0.3/0.2, windows of 4
batches of 10 rows (20, 12 and 8 rows of each source in every window of a
rank), 2 ranks, 2 epochs; the tables hold exactly 10 windows of both ranks
(400, 240, 160 rows). Two workers are SIGKILLed while the ranks read (each
rank waits at batches 20 and 50 until the kill is done and a new worker
started, so the kills land mid-read whatever the machine's speed).

Checked:
  1. every window of every rank holds 20, 12 and 8 rows of the three
     sources, by the batches' source_ids, and each source_id row's row_id
     is of that source's table;
  2. each epoch delivers every row of every table exactly once (the sums
     per source equal each table's own), over both ranks, which got equal
     batch counts;
  3. dppctl status -o json: rows per source equal twice each table's rows;
     a restarted master replays the session with its sources;
  4. exhausted "repeat" with a smaller third table: its rows come more
     than once per epoch, equally often (within one pass), the others once;
  5. a source too small for one window of every rank fails the session
     loudly, naming the source ("stop").
"""
import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402
import test_elastic as E  # noqa: E402

import dpp  # noqa: E402

BS, WINDOW, RANKS = 10, 4, 2
SOURCES = [("web", 0.5, 400), ("code", 0.3, 240), ("books", 0.2, 160)]
SHARES = [20, 12, 8]


def write(root, name, first, rows, files=2):
    os.makedirs(os.path.join(root, name))
    for f in range(files):
        with open(os.path.join(root, name, "part-%05d.tfrecord" % f), "wb") as out:
            for i in range(first + f * rows // files, first + (f + 1) * rows // files):
                p = E.example(i)
                head = struct.pack("<Q", len(p))
                out.write(head + struct.pack("<I", E.masked(E.crc32c(head))) + p +
                          struct.pack("<I", E.masked(E.crc32c(p))))
    return sorted(os.path.join(root, name, n) for n in os.listdir(os.path.join(root, name)))


def spec(sources, **extra):
    s = {"batch_size": BS, "epochs": 2, "consumers": RANKS, "split_rows": 32,
         "shuffle": {"seed": 21}, "mixture": {"window": WINDOW},
         "features": {"dense": [{"name": "x"}], "sparse": [{"name": "row_id"}]},
         "label": {"name": "label"},
         "sources": [{"table": t, "weight": w} for t, w, _ in sources]}
    s.update(extra)
    return s


def read(cl, sid, rank, out, stops, sources):
    """Reads the whole session: out[rank] = [(epoch, row_ids, source_ids)]
    per batch. At each batch count in stops, waits (barrier, event)."""
    try:
        got = []
        with dpp.Client(cl.master, sid, rank=rank, prefetch_splits=1) as c:
            assert c.sources == [t for t, _, _ in sources], c.sources
            while True:
                try:
                    b = c.next(60)
                except dpp.EpochEnd:
                    continue
                except dpp.SessionEnd:
                    break
                jt = b.sparse["row_id"]
                assert jt.lengths.tolist() == [1] * b.rows
                got.append((c.epoch, jt.values.tolist(), b.source_ids.tolist()))
                if len(got) in stops:
                    barrier, done = stops[len(got)]
                    barrier.wait(60)
                    done.wait(60)
        out[rank] = got
    except Exception as e:  # noqa: BLE001 (main reports it)
        out.setdefault("errors", []).append("rank %d: %r" % (rank, e))
        for barrier, done in stops.values():
            barrier.abort()


def kill_worker(cl, n):
    name, p = [(name, p) for name, p in cl.procs if name.startswith("worker")][n]
    p.kill()
    p.wait()
    T.log("  %s killed (SIGKILL) mid-read; a new worker started" % name)
    cl.start_worker(2)


def main():
    with T.Cluster("mixture") as cl:
        want = {}
        for i, (name, _, rows) in enumerate(SOURCES):
            paths = write(cl.root, name, i * 100000, rows)
            want[i] = Counter(E.reference_ids(paths))
            assert len(want[i]) == rows and all(v // 100000 == i for v in want[i])
        cl.start_master()
        for _ in range(3):
            cl.start_worker(2)

        T.log("case 1-3: 3 sources, 0.5/0.3/0.2, 2 ranks, 2 epochs, 2 worker kills")
        sid = cl.submit(cl.write_spec(spec(SOURCES)))
        stops = {k: (threading.Barrier(RANKS + 1), threading.Event()) for k in (20, 50)}
        out = {}
        th = [threading.Thread(target=read, args=(cl, sid, r, out, stops, SOURCES))
              for r in range(RANKS)]
        for t in th:
            t.start()
        for k, victim in ((20, 0), (50, 1)):
            barrier, done = stops[k]
            barrier.wait(120)
            kill_worker(cl, victim)
            done.set()
        for t in th:
            t.join()
        if "errors" in out:
            raise AssertionError("; ".join(out["errors"]))
        per_epoch = {}
        for r in range(RANKS):
            batches = out[r]
            assert len(batches) == len(out[0]), "unequal batches: %d and %d" % (
                len(batches), len(out[0]))
            for w in range(0, len(batches), WINDOW):
                counts = Counter(s for _, _, src in batches[w:w + WINDOW] for s in src)
                assert [counts[i] for i in range(3)] == SHARES, (r, w // WINDOW, counts)
            for e, ids, src in batches:
                for v, si in zip(ids, src):
                    assert v // 100000 == si, "row %d came as source %d" % (v, si)
                    per_epoch.setdefault(e, Counter())[v] += 1
        for e in (0, 1):
            for i, (name, _, rows) in enumerate(SOURCES):
                got = Counter({v: n for v, n in per_epoch[e].items() if v // 100000 == i})
                assert got == want[i], "epoch %d, %s: %d rows missing, %d extra" % (
                    e, name, sum((want[i] - got).values()), sum((got - want[i]).values()))
        T.log("  %d batches per rank; every window 20/12/8; each epoch every row of each "
              "table once" % len(out[0]))
        r = subprocess.run([os.path.join(T.BIN, "dppctl"), "status", sid, "-o", "json"],
                           env=cl.env, capture_output=True, text=True, timeout=60)
        st = json.loads(r.stdout)
        st = st[0] if isinstance(st, list) else st
        rows = [x["rows"] for x in st["sources"]]
        assert rows == [2 * n for _, _, n in SOURCES], st["sources"]
        assert [x["window_rows"] for x in st["sources"]] == SHARES, st["sources"]
        T.log("  status: rows per source %s" % rows)
        cl.restart_master()  # the journal keeps the sources and their files
        r = subprocess.run([os.path.join(T.BIN, "dppctl"), "status", sid, "-o", "json"],
                           env=cl.env, capture_output=True, text=True, timeout=60)
        st = json.loads(r.stdout)
        st = st[0] if isinstance(st, list) else st
        assert st["state"] == "done" and [x["table"] for x in st["sources"]] == [
            t for t, _, _ in SOURCES], st
        T.log("  after a master restart: %s, sources %s" % (
            st["state"], [x["table"] for x in st["sources"]]))

        T.log("case 4: exhausted repeat, a third table of 60 rows")
        small = SOURCES[:2] + [("few", 0.2, 60)]
        write(cl.root, "few", 200000, 60)
        sid = cl.submit(cl.write_spec(spec(small, epochs=1, mixture={"window": WINDOW,
                                                                  "exhausted": "repeat"}),
                                      "repeat.json"))
        out = {}
        th = [threading.Thread(target=read, args=(cl, sid, r, out, {}, small))
              for r in range(RANKS)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        if "errors" in out:
            raise AssertionError("; ".join(out["errors"]))
        assert len(out[0]) == len(out[1])
        ids = Counter(v for r in range(RANKS) for b in out[r] for v in b[1])
        few = Counter({v: n for v, n in ids.items() if v // 100000 == 2})
        assert set(few) == set(range(200000, 200060)), "not every row of the small table came"
        assert max(few.values()) - min(few.values()) <= 1 and max(few.values()) > 1, few
        web = Counter({v: n for v, n in ids.items() if v // 100000 == 0})
        assert set(web.values()) == {1}, "the largest source came more than once"
        T.log("  the small table's rows came %d to %d times, the largest table's once" % (
            min(few.values()), max(few.values())))

        T.log("case 5: a source too small for one window of every rank fails loudly")
        write(cl.root, "tiny", 300000, 10, files=1)
        sid = cl.submit(cl.write_spec(spec(SOURCES[:2] + [("tiny", 0.2, 10)]), "tiny.json"))
        msg = ""
        for _ in range(200):
            r = subprocess.run([os.path.join(T.BIN, "dppctl"), "status", sid, "-o", "json"],
                               env=cl.env, capture_output=True, text=True, timeout=60)
            st = json.loads(r.stdout)
            st = st[0] if isinstance(st, list) else st
            if st["state"] != "indexing":
                msg = st.get("error", "")
                break
            time.sleep(0.05)
        assert st["state"] == "failed" and "source 2 (table tiny)" in msg, st
        T.log("  " + msg[:160])
    T.log("ok")


if __name__ == "__main__":
    main()
