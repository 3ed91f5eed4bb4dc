# SPDX-License-Identifier: Apache-2.0
"""dpp.Client batches as tensors, over whole sessions:
  1. examples/criteo.json (13 dense, 26 sparse) on a dpp-gen table, 2 epochs:
     per-epoch sums of the tensors match dpp-refsum (label_sum exact,
     dense_sum to 1e-9 relative, sparse sums exact, rows and batches);
     every tensor of every batch is a view of the pointer the C accessor
     returns (data_ptr equality: no copy per batch); shapes, dense = the
     dense features concatenated, per-key slices = dpp_batch_sparse_at;
     epoch_batches and stats agree with what arrived.
  2. dpp-refsum's own table: a dim-4 dense feature and a weighted sparse
     feature: KJT weights (1.0 for the unweighted feature), sums with
     sparse_weights_sum against dpp-refsum.
  3. Lifetime: a tensor keeps its C batch alive after the Batch is gone, the
     batch is released when the last view goes, release() is early and
     idempotent, batches outlive Client.close().
  4. Case 1's dense features alone, then its sparse features alone, both
     without a label: label_name and labels None (also after pin_memory()
     and to()), dense [rows, 0] without dense features, a Sparse of no keys
     without sparse ones; the rows, batches and the sums of the features
     there are those case 1 read.
"""
import ctypes
import gc
import importlib.util
import os
import sys
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import torch  # noqa: E402

import dpp  # noqa: E402
from dpp import _lib  # noqa: E402

LIB = _lib.load()
P = ctypes.c_void_p


def ptr_labels(b):
    p = P()
    assert LIB.dpp_batch_labels(b.handle, ctypes.byref(p)) == 0
    return p.value


def ptr_dense(b, i):
    p, d = P(), ctypes.c_uint()
    assert LIB.dpp_batch_dense_at(b.handle, i, ctypes.byref(p), ctypes.byref(d)) == 0
    return p.value, d.value


def sparse_at(b, k):
    v, l, n = P(), P(), ctypes.c_size_t()
    assert LIB.dpp_batch_sparse_at(b.handle, k, ctypes.byref(v), ctypes.byref(l), ctypes.byref(n)) == 0
    return v.value, l.value, n.value


def kjt(b):
    k = _lib.Kjt()
    assert LIB.dpp_batch_kjt(b.handle, ctypes.byref(k)) == 0
    return k


def from_ptr(addr, n, ctype, dtype):
    """A copy of n C values at addr, for comparisons."""
    if n == 0:
        return torch.empty(0, dtype=dtype)
    return torch.tensor(list((ctype * n).from_address(addr)), dtype=dtype)


def check_batch(client, b, weighted_keys):
    """Every tensor of b views the accessors' memory and has the right shape."""
    rows = b.rows
    assert isinstance(b, dpp.Batch)
    if client.label_name is None:
        p = P()
        assert b.labels is None
        assert LIB.dpp_batch_labels(b.handle, ctypes.byref(p)) == dpp.ERRORS["DPP_ENOFEATURE"]
        assert not p.value
    else:
        assert b.labels.dtype == torch.float32 and tuple(b.labels.shape) == (rows,)
        assert b.labels.data_ptr() == ptr_labels(b), "labels were copied"
    cols = []
    for i, name in enumerate(client.dense_names):
        t = b.dense_features[name]
        addr, dim = ptr_dense(b, i)
        assert dim == client.dense_dims[i]
        assert t.dtype == torch.float32 and tuple(t.shape) == (rows, dim), (name, t.shape)
        assert t.data_ptr() == addr, "dense %s was copied" % name
        cols.append(t)
    assert list(b.dense_features) == client.dense_names
    d = b.dense
    assert tuple(d.shape) == (rows, sum(client.dense_dims))
    if cols:
        assert torch.equal(d, torch.cat(cols, dim=1))
    if len(cols) == 1:
        assert d.data_ptr() == cols[0].data_ptr()

    k = kjt(b)
    sp = b.sparse
    nk = len(client.sparse_names)
    assert k.nkeys == nk and k.stride == rows and sp.stride == rows
    assert sp.keys == client.sparse_names
    assert sp.values.dtype == torch.int64 and sp.values.numel() == k.nvalues
    assert sp.lengths.dtype == torch.int32 and sp.lengths.numel() == nk * rows
    assert sp.offsets.dtype == torch.int32 and sp.offsets.numel() == nk * rows + 1
    if k.nvalues:
        assert sp.values.data_ptr() == k.values, "KJT values were copied"
    if nk:
        assert sp.lengths.data_ptr() == k.lengths, "KJT lengths were copied"
        assert sp.offsets.data_ptr() == k.offsets, "KJT offsets were copied"
    else:  # no sparse features: nothing to view, and the one offset
        assert not k.values and not k.lengths and k.offsets
        assert sp.offsets.tolist() == [0] and len(sp) == 0
    assert int(sp.offsets[0]) == 0 and int(sp.offsets[-1]) == k.nvalues
    assert torch.equal(sp.offsets[1:].long(), torch.cumsum(sp.lengths.long(), 0))
    if weighted_keys:
        assert sp.weights is not None and sp.weights.data_ptr() == k.weights
        assert sp.weights.dtype == torch.float32 and sp.weights.numel() == k.nvalues
    else:
        assert sp.weights is None and not k.weights
    for kk, key in enumerate(client.sparse_names):
        j = sp[key]
        vaddr, laddr, n = sparse_at(b, kk)
        assert j.values.numel() == n and j.lengths.numel() == rows
        assert j.offsets.numel() == rows + 1 and int(j.offsets[0]) == 0 and int(j.offsets[-1]) == n
        assert torch.equal(j.values, from_ptr(vaddr, n, ctypes.c_int64, torch.int64)), key
        assert torch.equal(j.lengths, from_ptr(laddr, rows, ctypes.c_int32, torch.int32)), key
        if n:
            # The per-key slice is a view of the KJT buffer.
            assert j.values.data_ptr() == k.values + 8 * int(sp.offsets[kk * rows])
        if key in weighted_keys:
            w = P()
            assert LIB.dpp_batch_sparse_weights(b.handle, key.encode(), ctypes.byref(w)) == 0
            assert torch.equal(j.weights, from_ptr(w.value, n, ctypes.c_float, torch.float32))
        elif sp.weights is not None:
            assert bool((j.weights == 1.0).all()), "weights of unweighted %s are not 1.0" % key


def check_to_kjt(b):
    """to_kjt(): a KeyedJaggedTensor over the same tensors with torchrec, else
    an ImportError that says what to do."""
    if importlib.util.find_spec("torchrec") is None:
        try:
            b.sparse.to_kjt()
            raise AssertionError("to_kjt() without torchrec did not raise")
        except ImportError as e:
            assert "torchrec" in str(e) and "sparse.keys" in str(e), str(e)
            T.log("to_kjt() without torchrec:", e)
        # With a stand-in for torchrec: the constructor gets the batch's views.
        import types

        class KeyedJaggedTensor:
            def __init__(self, keys, values, weights=None, lengths=None, offsets=None, stride=None):
                self.args = dict(keys=keys, values=values, weights=weights, lengths=lengths, offsets=offsets, stride=stride)

        names = ("torchrec", "torchrec.sparse", "torchrec.sparse.jagged_tensor")
        mods = {n: types.ModuleType(n) for n in names}
        mods["torchrec.sparse.jagged_tensor"].KeyedJaggedTensor = KeyedJaggedTensor
        sys.modules.update(mods)
        try:
            a = b.sparse.to_kjt().args
        finally:
            for n in names:
                del sys.modules[n]
        sp = b.sparse
        assert a["keys"] == sp.keys and a["stride"] == sp.stride == b.rows
        for f in ("values", "lengths", "offsets"):
            assert a[f] is getattr(sp, f), f
        assert a["weights"] is sp.weights
        return
    k = b.sparse.to_kjt()
    assert k.keys() == b.sparse.keys
    assert k.values().data_ptr() == b.sparse.values.data_ptr()
    T.log("to_kjt():", type(k).__name__)


def read_session(cl, sid, spec, table, weighted_keys=(), epochs=2):
    """Reads every batch, checking each, and compares the sums with dpp-refsum."""
    with dpp.Client(cl.master, sid, timeout_s=30) as c:
        assert c.num_epochs == epochs
        assert c.batch_size == spec["batch_size"]
        assert c.sparse_weighted == [k in weighted_keys for k in c.sparse_names]
        lines, sums, batches, total_rows = [], T.EpochSums(0, weighted_keys), 0, 0
        short = False  # the epoch's short last batch came
        while True:
            try:
                b = c.next(timeout_s=120)
            except dpp.EpochEnd as e:
                assert e.epoch == sums.epoch, (e.epoch, sums.epoch)
                eb = c.epoch_batches
                assert eb is None or eb == sums.batches, (eb, sums.batches)
                lines.append(sums.line())
                sums = T.EpochSums(e.epoch + 1, weighted_keys)
                short = False
                continue
            except dpp.SessionEnd:
                break
            assert b.epoch == sums.epoch
            # Exact batch_size, except an epoch's last batch (remainder keep).
            assert 0 < b.rows <= spec["batch_size"]
            assert not short, "a batch after the short one of epoch %d" % sums.epoch
            short = b.rows < spec["batch_size"]
            check_batch(c, b, weighted_keys)
            if batches == 0:
                check_to_kjt(b)
            sums.add(b)
            batches += 1
            total_rows += b.rows
            del b
        try:
            c.next(timeout_s=5)
            raise AssertionError("next() after SessionEnd returned a batch")
        except dpp.SessionEnd:
            pass
        assert c.session_done
        st = c.stats()
        assert st["batches"] == batches and st["rows"] == total_rows, (st, batches, total_rows)
        assert len(st["wait_hist"]) == 16 and sum(st["wait_hist"]) > 0
        assert st["wait_ns"] > 0
        T.log("stats:", st)
    assert len(lines) == epochs
    T.log(cl.refsum_check(spec_path_of(spec), table, lines).strip())
    for line in lines:
        T.log("epoch", line)
    return lines


_spec_paths = {}


def spec_path_of(spec):
    return _spec_paths[id(spec)]


def case_criteo(cl):
    T.log("case 1: examples/criteo.json, 2 epochs, batch_size 1000, split_rows 3000")
    table = cl.gen(rows=21000, shards=2, partitions=2)
    spec = T.criteo_spec(batch_size=1000, epochs=2, split_rows=3000)
    _spec_paths[id(spec)] = path = cl.write_spec(spec, "criteo.json")
    sid = cl.submit(path)
    lines = read_session(cl, sid, spec, table)
    assert all(line["rows"] == 21000 and line["batches"] == 21 for line in lines), lines
    return lines


def case_weighted(cl):
    T.log("case 2: dim 4 and weights on dpp-refsum's table")
    table = cl.refsum_table(rows=1200, files=2)
    spec = {
        "table": "weighted",
        "batch_size": 128,
        "remainder": "keep",
        "split_rows": 500,
        "epochs": 2,
        "max_reject_ratio": 1,  # the table's ~7% bad records are the point here
        "features": {
            "dense": [
                {"name": "emb", "dim": 4, "transforms": [{"op": "fill_missing", "value": 0.25}]},
                {"name": "price", "transforms": [{"op": "clamp", "min": 1}, {"op": "log1p"}]},
            ],
            "sparse": [
                {"name": "ids", "weights": "ids_w", "transforms": [{"op": "hash", "n": 1000003, "salt": -5}]},
                {"name": "hist", "transforms": [{"op": "modulo", "n": 97}]},
            ],
        },
        "label": {"name": "label"},
        "filters": [{"op": "require", "feature": "ids"}],
    }
    _spec_paths[id(spec)] = path = cl.write_spec(spec, "weighted.json")
    sid = cl.submit(path)
    lines = read_session(cl, sid, spec, table, weighted_keys=("ids",))
    assert all("sparse_weights_sum" in line for line in lines)


def case_lifetime(cl):
    T.log("case 3: lifetime of batches and views")
    table = os.path.join(cl.root, "criteo")
    assert os.path.isdir(table)
    spec = T.criteo_spec(batch_size=500, epochs=1)
    sid = cl.submit(cl.write_spec(spec, "lifetime.json"))
    c = dpp.Client(cl.master, sid, timeout_s=30)
    b = c.next(timeout_s=60)
    h = weakref.ref(b._handle)
    labels = b.labels
    want = labels.clone()
    col = b.dense_features["i3"][:, 0]  # a slice of a view
    ids = b.sparse["c7"].values
    del b
    gc.collect()
    assert h() is not None and not h().released, "the batch went while its tensors live"
    assert torch.equal(labels, want)
    del labels
    gc.collect()
    assert h() is not None, "released while a slice of a view lives"
    float(col.sum()), int(ids.sum())
    del col, ids
    gc.collect()
    assert h() is None, "the batch outlived every view of it"

    b = c.next(timeout_s=60)
    h = weakref.ref(b._handle)
    b.release()
    assert b.released and b.handle is None
    b.release()  # idempotent
    del b
    gc.collect()
    assert h() is None

    # Batches outlive the client.
    b = c.next(timeout_s=60)
    keep = b.dense.clone(), b.sparse.values.clone()
    c.close()
    c.close()
    assert c.closed
    assert torch.equal(b.dense, keep[0]) and torch.equal(b.sparse.values, keep[1])
    try:
        c.next()
        raise AssertionError("next() on a closed client")
    except ValueError:
        pass
    del b
    gc.collect()

    # Batches dropped unread hand their memory back: with a budget for a few
    # batches, reading the whole epoch (each batch dropped at once) works.
    T.log("  whole epoch with memory_budget 4 MiB, prefetch 2")
    with dpp.Client(cl.master, cl.submit(cl.write_spec(spec, "budget.json")), prefetch=2, memory_budget=4 << 20) as c2:
        n = sum(x.rows for x in c2.epoch_iter(timeout_s=60))
        assert n == 21000, n


def case_one_kind_no_label(cl, criteo_lines):
    T.log("case 4: case 1's dense features alone, then its sparse ones alone, without a label")
    for kind, other in (("dense", "sparse"), ("sparse", "dense")):
        spec = T.criteo_spec(batch_size=1000, epochs=1, split_rows=3000)
        del spec["label"]
        # one list left out, the other given empty: both mean "none"
        if kind == "dense":
            del spec["features"][other]
        else:
            spec["features"][other] = []
        sid = cl.submit(cl.write_spec(spec, "%s-only.json" % kind))
        with dpp.Client(cl.master, sid, timeout_s=30) as c:
            assert c.label_name is None
            assert (c.dense_names == []) == (kind == "sparse")
            assert (c.sparse_names == []) == (kind == "dense")
            sums = T.EpochSums(0)
            for b in c.epoch_iter(timeout_s=120):
                check_batch(c, b, ())
                assert b.pin_memory().labels is None and b.to("cpu").labels is None
                if kind == "sparse":
                    assert tuple(b.dense.shape) == (b.rows, 0) and b.dense_features == {}
                    assert tuple(b.to("cpu").dense.shape) == (b.rows, 0)
                else:
                    assert b.sparse.keys == [] and b.sparse.values.numel() == 0
                    assert b.sparse.lengths.numel() == 0 and b.sparse.offsets.tolist() == [0]
                    assert b.pin_memory().sparse.offsets.tolist() == [0]
                sums.add(b)
        got, want = sums.line(), criteo_lines[0]
        T.log("  %s only:" % kind, got)
        assert "label_sum" not in got
        assert got["rows"] == want["rows"] and got["batches"] == want["batches"], (got, want)
        if kind == "dense":
            assert abs(got["dense_sum"] - want["dense_sum"]) <= 1e-9 * abs(want["dense_sum"]), (got, want)
            assert got["sparse_lengths_sum"] == 0 and got["sparse_ids_sum"] == 0
        else:
            assert got["dense_sum"] == 0
            for key in ("sparse_lengths_sum", "sparse_ids_sum", "sparse_ids_wsum"):
                assert got[key] == want[key], (key, got, want)


def main():
    with T.Cluster("tensors") as cl:
        cl.start_master()
        cl.start_worker()
        cl.start_worker()
        criteo_lines = case_criteo(cl)
        case_weighted(cl)
        case_lifetime(cl)
        case_one_kind_no_label(cl, criteo_lines)
    T.log("PASS")


if __name__ == "__main__":
    main()
