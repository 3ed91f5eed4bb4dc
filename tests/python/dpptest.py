# SPDX-License-Identifier: Apache-2.0
"""Helpers for the Python tests: daemons on 127.0.0.1 with --port-file, in a
temp dir, always stopped (try/finally through the context manager, atexit,
and PR_SET_PDEATHSIG so that they die with the test even on SIGKILL).

Environment (set by tests/python/CMakeLists.txt):
  DPP_BIN_DIR     build dir with dpp-master, dpp-worker, dppctl, dpp-gen
  DPP_SOURCE_DIR  source tree
  DPP_REFSUM      dpp-refsum
  DPP_LIB         libdppclient.so (read by the dpp package)
  DPP_KEEP_TMP=1  keep the temp dir and the daemons' logs
"""
import atexit
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("DPP_BIN_DIR", "")
SRC = os.environ.get("DPP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFSUM = os.environ.get("DPP_REFSUM") or os.path.join(BIN, "tests", "integration", "dpp-refsum")
PYTHON = "/usr/bin/python3"

_live = []  # every Cluster not yet stopped


# Resolved here, not in the forked child (which must not dlopen while the
# client library's I/O thread may hold a lock).
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent():
    # PR_SET_PDEATHSIG = 1: SIGTERM this daemon when the test process dies
    # (even by SIGKILL, as on a ctest timeout). Kept across exec.
    _prctl(1, signal.SIGTERM, 0, 0, 0)


def _stop_all_at_exit():
    for c in list(_live):
        c.stop()


atexit.register(_stop_all_at_exit)


def log(*a):
    print("[%s]" % os.path.basename(sys.argv[0]), *a, flush=True)


def need(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SystemExit("ERROR: %s is not built (DPP_BIN_DIR=%s)" % (path, BIN))
    return path


class Cluster:
    """A master and N workers on loopback over a temp dir's data root."""

    def __init__(self, name):
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="dpp-py-%s." % name)
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(self.root)
        self.procs = []  # (name, Popen)
        self.master = None
        self.env = dict(os.environ)
        self.env.pop("DPP_MASTER", None)
        self.failed = False
        _live.append(self)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.failed = True
        self.stop()

    # ---- daemons -------------------------------------------------------

    def _start(self, name, argv, timeout=20):
        port_file = os.path.join(self.tmp, name + ".port")
        logf = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(
            argv + ["--port-file", port_file],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            env=self.env,
        )
        logf.close()
        self.procs.append((name, p))
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(port_file) as f:
                    addr = f.read().strip()
                if addr:
                    return addr
            except FileNotFoundError:
                pass
            if p.poll() is not None:
                self.failed = True
                raise RuntimeError("%s exited (%d) before writing its port file:\n%s" % (name, p.returncode, self.log(name)))
            if time.monotonic() > deadline:
                self.failed = True
                raise RuntimeError("%s wrote no port file in %ds:\n%s" % (name, timeout, self.log(name)))
            time.sleep(0.05)

    def start_master(self, *extra):
        state = os.path.join(self.tmp, "master-state")
        os.makedirs(state, exist_ok=True)
        self.master = self._start(
            "master",
            [need(os.path.join(BIN, "dpp-master")), "--listen", "127.0.0.1:0", "--state-dir", state, "--data-root", self.root, *extra],
        )
        self.env["DPP_MASTER"] = self.master
        return self.master

    def restart_master(self, *extra):
        """Stops the master (SIGTERM) and starts it again on the same
        address and state dir: it replays its journal; workers and clients
        reconnect."""
        for i, (name, p) in enumerate(self.procs):
            if name == "master" and p.poll() is None:
                p.terminate()
                p.wait(10)
        self.procs = [(n, p) for n, p in self.procs if n != "master"]
        os.unlink(os.path.join(self.tmp, "master.port"))
        state = os.path.join(self.tmp, "master-state")
        self.master = self._start(
            "master",
            [need(os.path.join(BIN, "dpp-master")), "--listen", self.master, "--state-dir", state,
             "--data-root", self.root, *extra],
        )
        return self.master

    def start_worker(self, threads=2, *extra):
        n = sum(1 for name, _ in self.procs if name.startswith("worker"))
        return self._start(
            "worker-%d" % n,
            [need(os.path.join(BIN, "dpp-worker")), "--master", self.master, "--listen", "127.0.0.1:0", "--threads", str(threads), *extra],
        )

    def log(self, name):
        try:
            with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
                return "".join(f.readlines()[-100:])
        except OSError as e:
            return str(e)

    def stop(self):
        if self not in _live:
            return
        _live.remove(self)
        for _, p in self.procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 5
        for name, p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log("%s ignored SIGTERM; SIGKILL" % name)
                p.kill()
                p.wait()
        if self.failed:
            for name, _ in self.procs:
                sys.stderr.write("----- %s log (last 100 lines) -----\n%s" % (name, self.log(name)))
        if os.environ.get("DPP_KEEP_TMP") == "1":
            log("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- tools ---------------------------------------------------------

    def run(self, argv, timeout=120, **kw):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, **kw)
        if r.returncode != 0:
            self.failed = True
            raise RuntimeError("%s exited %d:\n%s%s" % (" ".join(argv), r.returncode, r.stdout, r.stderr))
        return r.stdout

    def gen(self, table="criteo", rows=20000, shards=2, partitions=2, seed=7):
        out = os.path.join(self.root, table)
        self.run([need(os.path.join(BIN, "dpp-gen")), "--rows", str(rows), "--shards", str(shards), "--partitions", str(partitions), "--seed", str(seed), "--index", "--out", out])
        return out

    def refsum_table(self, table="weighted", rows=1200, files=2):
        out = os.path.join(self.root, table)
        self.run([need(REFSUM), "--write-table", out, "--rows", str(rows), "--files", str(files)])
        return out

    def write_spec(self, spec, name="spec.json"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(spec, f, indent=1)
        return path

    def submit(self, spec_path):
        out = self.run([need(os.path.join(BIN, "dppctl")), "submit", spec_path])
        sid = out.strip().splitlines()[-1].strip()
        assert sid and " " not in sid, out
        return sid

    def refsum_check(self, spec_path, table_dir, lines, rank=0):
        """Compares JSON lines in dppctl read's format with dpp-refsum."""
        actual = os.path.join(self.tmp, "actual-%d.jsonl" % rank)
        with open(actual, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        r = subprocess.run(
            [need(REFSUM), "--spec", spec_path, "--table", table_dir, "--check", actual, "--rank", str(rank)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if r.returncode != 0:
            self.failed = True
            raise AssertionError("dpp-refsum found a mismatch (exit %d):\n%s%s\nactual:\n%s" % (r.returncode, r.stdout, r.stderr, open(actual).read()))
        return r.stdout


def criteo_spec(batch_size=1000, epochs=2, **extra):
    """examples/criteo.json with another batch size and epoch count."""
    with open(os.path.join(SRC, "examples", "criteo.json")) as f:
        spec = json.load(f)
    spec["batch_size"] = batch_size
    spec["epochs"] = epochs
    spec.update(extra)
    return spec


class EpochSums:
    """The per-epoch totals of dppctl read --output json, from Batch tensors."""

    def __init__(self, epoch, weighted_keys=()):
        self.epoch = epoch
        self.weighted_keys = set(weighted_keys)  # features with spec `weights`
        self.rows = self.batches = self.lengths = 0
        self.label_sum = self.dense_sum = self.weights_sum = 0.0
        self.ids_sum = self.ids_wsum = 0
        self.weighted = bool(self.weighted_keys)
        self.labelled = True  # dppctl leaves label_sum out for a session without a label

    def add(self, b):
        self.rows += b.rows
        self.batches += 1
        self.labelled = b.labels is not None
        if self.labelled:
            self.label_sum += float(b.labels.double().sum())
        for t in b.dense_features.values():
            self.dense_sum += float(t.double().sum())
        sp = b.sparse
        for k, key in enumerate(sp.keys):
            j = sp[key]
            s = int(j.values.sum()) if j.values.numel() else 0
            self.lengths += j.values.numel()
            self.ids_sum += s
            self.ids_wsum += (k + 1) * s
            if key in self.weighted_keys:
                # KJT weights are 1.0 for unweighted features: sum only these.
                self.weighted = True
                self.weights_sum += float(j.weights.double().sum())

    def line(self):
        def i64(v):
            v &= (1 << 64) - 1
            return v - (1 << 64) if v >= 1 << 63 else v

        d = {
            "epoch": self.epoch,
            "rows": self.rows,
            "batches": self.batches,
            "label_sum": self.label_sum,
            "dense_sum": self.dense_sum,
            "sparse_lengths_sum": self.lengths,
            "sparse_ids_sum": i64(self.ids_sum),
            "sparse_ids_wsum": i64(self.ids_wsum),
        }
        if self.weighted:
            d["sparse_weights_sum"] = self.weights_sum
        if not self.labelled:
            del d["label_sum"]
        return d
