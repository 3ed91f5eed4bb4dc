# SPDX-License-Identifier: Apache-2.0
"""dpp.TorchDataset in torch's DataLoader:
  1. DataLoader(ds, batch_size=None, num_workers=0, pin_memory=True) over 3
     epochs, one `for` per epoch, sums checked with dpp-refsum; a 4th
     iteration ends at once.
  2. Batch.pin_memory() (what DataLoader's pinning calls for a custom type,
     through torch.utils.data._utils.pin_memory) and Batch.to(): TensorBatch
     copies that no longer reference the library's memory, equal values.
  3. num_workers=2 refuses with one line in the trainer (WorkerProcessError,
     no traceback of the worker process in its message).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import torch  # noqa: E402
import torch.utils.data  # noqa: E402
from torch.utils.data._utils.pin_memory import pin_memory as torch_pin_memory  # noqa: E402

import dpp  # noqa: E402

EPOCHS = 3


def all_ptrs(b):
    ptrs = {b.labels.data_ptr(), b.sparse.values.data_ptr(), b.sparse.lengths.data_ptr(), b.sparse.offsets.data_ptr()}
    ptrs |= {t.data_ptr() for t in b.dense_features.values()}
    return ptrs


def check_copy(b, c, what):
    assert isinstance(c, dpp.TensorBatch), type(c)
    assert (c.rows, c.epoch) == (b.rows, b.epoch)
    assert torch.equal(c.labels, b.labels) and torch.equal(c.dense, b.dense), what
    for name, t in b.dense_features.items():
        assert torch.equal(c.dense_features[name], t), (what, name)
    for f in ("values", "lengths", "offsets"):
        assert torch.equal(getattr(c.sparse, f), getattr(b.sparse, f)), (what, f)
    assert c.sparse.keys == b.sparse.keys and c.sparse.stride == b.sparse.stride
    for key in b.sparse.keys:
        assert torch.equal(c.sparse[key].values, b.sparse[key].values), (what, key)
        assert torch.equal(c.sparse[key].offsets, b.sparse[key].offsets), (what, key)
    # Nothing of the copy lies in the batch's memory.
    lib_lo = min(all_ptrs(b))
    copy_ptrs = {c.labels.data_ptr(), c.dense.data_ptr(), c.sparse.values.data_ptr(), c.sparse.lengths.data_ptr(), c.sparse.offsets.data_ptr()}
    assert not (copy_ptrs & all_ptrs(b)), "%s still references the library's memory" % what
    assert lib_lo not in copy_ptrs


def main():
    with T.Cluster("dataloader") as cl:
        table = cl.gen(rows=15000, shards=2, partitions=1)
        cl.start_master()
        cl.start_worker()
        cl.start_worker()
        spec = T.criteo_spec(batch_size=700, epochs=EPOCHS)
        path = cl.write_spec(spec)
        sid = cl.submit(path)

        T.log("case 1: DataLoader(pin_memory=True), one loop per epoch")
        ds = dpp.TorchDataset(cl.master, sid, next_timeout_s=120, timeout_s=30)
        assert ds.num_epochs == EPOCHS and ds.batch_size == 700
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0, pin_memory=True)
        lines = []
        first = None
        for epoch in range(ds.num_epochs):
            sums = T.EpochSums(epoch)
            for b in loader:
                assert isinstance(b, (dpp.Batch, dpp.TensorBatch)), type(b)
                assert b.epoch == epoch, (b.epoch, epoch)
                sums.add(b)
                if first is None and isinstance(b, dpp.Batch):
                    first = b  # kept for case 2 (holds one batch of the budget)
            T.log("epoch", epoch, sums.rows, "rows", sums.batches, "batches")
            lines.append(sums.line())
        assert [line["rows"] for line in lines] == [15000] * EPOCHS, lines
        assert sum(1 for _ in loader) == 0, "an iteration after the last epoch yielded batches"
        T.log(cl.refsum_check(path, table, lines).strip())

        T.log("case 2: pin_memory() and to()")
        b = first
        assert b is not None
        pinned = torch_pin_memory(b)  # what DataLoader's pinning does with a Batch
        check_copy(b, pinned, "pin_memory()")
        if torch.cuda.is_available():
            assert pinned.labels.is_pinned()
        moved = b.to("cpu")
        check_copy(b, moved, "to('cpu')")
        again = pinned.to("cpu", non_blocking=True)
        assert torch.equal(again.dense, b.dense) and isinstance(again.pin_memory(), dpp.TensorBatch)
        b.release()
        del first, b
        assert float(pinned.labels.sum()) == float(moved.labels.sum())  # the copies survive the release
        ds.close()

        T.log("case 3: num_workers=2 is refused")
        ds2 = dpp.TorchDataset(cl.master, sid)
        loader2 = torch.utils.data.DataLoader(ds2, batch_size=None, num_workers=2)
        try:
            for _ in loader2:
                raise AssertionError("a batch came through a worker process")
            raise AssertionError("num_workers=2 was not refused")
        except RuntimeError as e:
            # one line in the trainer: the worker's traceback is not in it
            assert isinstance(e, dpp.WorkerProcessError), repr(e)
            assert str(e) == dpp.WORKERS_MESSAGE, str(e)
            assert "\n" not in str(e) and "num_workers=0" in str(e)
            T.log("refused:", type(e).__name__, str(e))
        assert ds2._client is None, "the refusing dataset opened a client in the trainer"
    T.log("PASS")


if __name__ == "__main__":
    main()
