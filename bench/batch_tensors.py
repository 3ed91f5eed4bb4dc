#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/batch_tensors.py: what the Python binding costs per batch to turn a
C batch into tensors. A master and a worker on loopback serve
examples/criteo.json over a dpp-gen table; the batches' pointers are taken
with dpp_client_next() (all of them first, so that nothing else runs while
they are timed) and, for each, the tensors are built twice in the same run: the way the binding did before, a view per column from its
accessor (dpp_batch_labels, dpp_batch_dense_at per dense
feature, dpp_batch_kjt), then by dpp.Batch (one dpp_batch_layout() call,
one view of the batch's memory, a slice per column). Prints the median
microseconds per batch of each.

Usage: DPP_BIN_DIR=build PYTHONPATH=python /usr/bin/python3 bench/batch_tensors.py [ROWS]
"""
import ctypes
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "python"))
import dpptest as T  # noqa: E402

import torch  # noqa: E402

import dpp  # noqa: E402
from dpp import _batch, _lib  # noqa: E402


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 160000
    with T.Cluster("batch-tensors") as cl:
        cl.gen(rows=rows, shards=2, partitions=2)
        cl.start_master()
        cl.start_worker()
        sid = cl.submit(os.path.join(here, "..", "examples", "criteo.json"))
        # every batch first, then the timing: the worker and the client's
        # I/O thread would otherwise share the cores with what is timed
        client = dpp.Client(cl.master, sid, timeout_s=60, memory_budget=2 << 30, prefetch=64)
        lib, ptrs = client._lib, []
        out = ctypes.c_void_p()
        while lib.dpp_client_next(client._p(), ctypes.byref(out), 60000) == _lib.DPP_BATCH:
            ptrs.append(out.value)
        took = []
        for _ in range(5):
            for p in ptrs:
                t0 = time.perf_counter()
                b = _batch.Batch(client, p)
                took.append((time.perf_counter() - t0) * 1e6)
                b._handle.ptr = None  # not released here: timed again
        for p in ptrs:
            lib.dpp_batch_release(p)
        client.close()
        if not took:
            raise SystemExit("batch_tensors: no batch arrived")
    print("batch_tensors: %d batches of examples/criteo.json (13 dense, 26 sparse), each timed 5 times, torch %s" % (len(ptrs), torch.__version__))
    print("  dpp.Batch: %.1f us per batch (median)" % statistics.median(took))


if __name__ == "__main__":
    main()
