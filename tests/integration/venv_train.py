# SPDX-License-Identifier: Apache-2.0
"""Run by install.sh in a fresh venv holding only what `pip install ./python`
put there (and Debian's torch through --system-site-packages): submits a
session from Python, trains a logistic regression on it for its 2 epochs
through a DataLoader, checks every row came once per epoch, the loss fell
and the master calls the session done.

usage: venv_train.py MASTER TABLE_ROWS SPEC_JSON_PATH
"""
import json
import sys

import torch

import dpp

master, rows, spec_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(spec_path) as f:
    spec = json.load(f)  # a dict, as a training script builds one
spec["epochs"] = 2
spec["batch_size"] = 500
session = dpp.submit(spec, master=master)
print("submitted", session.id, "from", dpp.__file__, "with", dpp.library_path())

ds = dpp.TorchDataset(session)
loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0, pin_memory=False)
model = None
losses = []
for epoch in range(ds.num_epochs):
    seen = 0
    for batch in loader:
        x = torch.log1p(batch.dense.float().clamp(min=0))
        y = batch.labels.float()
        if model is None:
            model = torch.nn.Linear(x.shape[1], 1)
            # from zero: the first loss is log(2), and a quarter of the
            # labels are 1 (dpp-gen), so learning the bias alone lowers it
            torch.nn.init.zeros_(model.weight)
            torch.nn.init.zeros_(model.bias)
            opt = torch.optim.Adam(model.parameters(), lr=0.05)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        seen += batch.rows
    assert seen == rows, "epoch %d: %d rows, expected %d" % (epoch, seen, rows)
ds.close()
first, last = losses[0], sum(losses[-5:]) / 5
assert last < first, "the loss did not fall: %.4f -> %.4f" % (first, last)
st = session.status()
assert st["state"] == "done" and st["epochs_done"] == 2, st
print("trained %d steps on %d rows x 2 epochs: loss %.4f -> %.4f; session %s" % (
    len(losses), rows, first, last, st["state"]))
