# SPDX-License-Identifier: Apache-2.0
"""Checkpoint tokens and padding through the Python binding:
  1. TorchDataset.state_dict() after k batches of a shuffled, padded
     session; a new TorchDataset with load_state_dict() yields exactly the
     batches a reference session (same spec, read without a break) had after
     batch k, tensor for tensor, across the epoch boundary;
  2. remainder "pad": epoch_batches is known before the epoch's first batch;
     each epoch's last batch has batch_size rows, the mask
     marks the padding (False, after every real row), padded rows are zero,
     valid_rows counts the real ones, stats count the padded rows; the
     epoch's batch count is known from the start;
  3. a token of another rank or a damaged one: DppError DPP_ETOKEN; order
     "fastest": checkpoint() raises DPP_EINVAL.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import torch  # noqa: E402

import dpp  # noqa: E402

ROWS, BS = 2500, 300  # 8 full batches + 100 rows padded to 300, per epoch


def spec(**extra):
    s = T.criteo_spec(batch_size=BS, epochs=2, split_rows=400, remainder="pad", shuffle={"seed": 5})
    s.update(extra)
    return s


def tensors(b):
    """Every tensor of a batch, copied."""
    out = [b.labels.clone(), b.dense.clone(), b.mask.clone(), b.sparse.values.clone(), b.sparse.lengths.clone()]
    return out


def same(a, b):
    """Two lists of batches (lists of tensors) are equal, tensor for tensor."""
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y)) for x, y in zip(a, b)
    )


def read_all(ds):
    batches = []
    for _ in range(ds.num_epochs):
        batches += [tensors(b) for b in ds]
    return batches


def case_resume(cl, path):
    T.log("case 1: state_dict / load_state_dict")
    ref_sid = cl.submit(path)
    with dpp.TorchDataset(cl.master, ref_sid) as ds:
        ref = read_all(ds)
    per_epoch = (ROWS + BS - 1) // BS
    assert len(ref) == 2 * per_epoch, len(ref)
    for k in (3, per_epoch - 1, per_epoch + 2):
        sid = cl.submit(path)
        ds = dpp.TorchDataset(cl.master, sid)
        assert ds.state_dict() == {}
        got, it = [], iter(ds)
        while len(got) < k:
            try:
                got.append(tensors(next(it)))
            except StopIteration:  # epoch end
                it = iter(ds)
        state = ds.state_dict()
        token = state["dpp_token"]
        assert isinstance(token, bytes) and len(token) == dpp.CHECKPOINT_SIZE == 96
        for _ in range(2):  # read past the checkpoint, then "crash"
            next(it, None)
        ds.close()
        ds2 = dpp.TorchDataset(cl.master, sid)
        ds2.load_state_dict(state)
        assert ds2.state_dict() == state  # not opened yet: the position it starts from
        rest = []
        while not ds2.client.session_done:  # one epoch per iteration
            rest += [tensors(b) for b in ds2]
        ds2.close()
        assert same(got, ref[:k]), "the batches before the checkpoint differ"
        assert len(rest) == len(ref) - k, (k, len(rest), len(ref))
        assert same(rest, ref[k:]), "resumed at %d: the batches differ from the reference" % k
        T.log("resumed at batch %d: %d batches, equal to the reference's rest" % (k, len(rest)))


def case_pad(cl, path):
    T.log("case 2: remainder pad")
    sid = cl.submit(path)
    with dpp.Client(cl.master, sid) as c:
        padded = 0
        for epoch in range(2):
            # known before the epoch's first batch, padding included
            for _ in range(100):
                if c.epoch_batches is not None:
                    break
                time.sleep(0.05)
            assert c.epoch_batches == (ROWS + BS - 1) // BS, c.epoch_batches
            got = [b for b in c.epoch_iter()]
            assert c.epoch == epoch + 1
            assert len(got) == (ROWS + BS - 1) // BS
            for b in got[:-1]:
                assert b.rows == b.valid_rows == BS and bool(b.mask.all())
            last = got[-1]
            assert last.rows == BS and last.valid_rows == ROWS % BS
            assert last.mask.dtype == torch.bool
            assert int(last.mask.sum()) == last.valid_rows
            assert bool(last.mask[: last.valid_rows].all()) and not bool(last.mask[last.valid_rows :].any())
            assert float(last.labels[last.valid_rows :].abs().sum()) == 0.0
            assert float(last.dense[last.valid_rows :].abs().sum()) == 0.0
            assert int(last.sparse.lengths.view(-1, BS)[:, last.valid_rows :].sum()) == 0
            pinned = last.pin_memory()
            assert torch.equal(pinned.mask, last.mask) and pinned.valid_rows == last.valid_rows
            padded += BS - last.valid_rows
        assert c.stats()["rows_padded"] == padded == 2 * (BS - ROWS % BS)
        assert c.stats()["rows"] == 2 * ROWS
    T.log("padding masked and counted: %d rows" % padded)


def case_errors(cl, path):
    T.log("case 3: tokens that do not fit")
    sid = cl.submit(path)
    with dpp.Client(cl.master, sid) as c:
        b = c.next()
        del b
        tok = c.checkpoint()
    for bad, kw in (
        (tok, {"rank": 1}),  # another rank's position
        (tok[:-1] + bytes([tok[-1] ^ 1]), {}),  # damaged
        (tok[:10], {}),  # cut short
    ):
        try:
            dpp.Client(cl.master, sid, resume=bad, **kw)
            raise AssertionError("opened with a bad token")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_ETOKEN, repr(e)
    fast = cl.submit(cl.write_spec(spec(order="fastest"), "fastest.json"))
    with dpp.Client(cl.master, fast) as c:
        try:
            c.checkpoint()
            raise AssertionError("checkpoint() in order fastest")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_EINVAL, repr(e)
    T.log("DPP_ETOKEN and DPP_EINVAL as expected")


def main():
    with T.Cluster("resume") as cl:
        cl.gen(rows=ROWS, shards=2, partitions=1)
        cl.start_master()
        cl.start_worker()
        cl.start_worker()
        path = cl.write_spec(spec())
        case_resume(cl, path)
        case_pad(cl, path)
        case_errors(cl, path)
    T.log("OK")


if __name__ == "__main__":
    main()
