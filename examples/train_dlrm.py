#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a small DLRM-style model on CPU from a live dpp session.

    DPP_LIB=build/libdppclient.so PYTHONPATH=python /usr/bin/python3 \\
        examples/train_dlrm.py --master 127.0.0.1:7070 --session SESSION --steps 300

The model: a bottom MLP over the dense features, one EmbeddingBag (sum) per
sparse feature fed with that feature's ids and offsets, pairwise dot-product
interaction of the bottom output and the embeddings, a top MLP, binary
cross-entropy with logits. It prints the mean loss every --log-every steps
and the share of the time spent waiting for data, then the mean loss of the
first and the last --log-every steps. `make demo-train` runs it against a
generated table (scripts/demo_train.sh).
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

import dpp


def mlp(sizes, last_relu=True):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, num_dense, sparse_keys, num_embeddings, dim):
        super().__init__()
        self.keys = list(sparse_keys)
        self.num_embeddings = num_embeddings
        self.bottom = mlp([num_dense, 64, dim])
        # One table per feature; sparse gradients: a step touches only the
        # rows its ids select (SGD applies them as such).
        self.embs = nn.ModuleList(
            nn.EmbeddingBag(num_embeddings, dim, mode="sum", sparse=True) for _ in self.keys
        )
        for e in self.embs:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        n = 1 + len(self.keys)
        iu = torch.triu_indices(n, n, offset=1)
        self.register_buffer("iu0", iu[0], persistent=False)
        self.register_buffer("iu1", iu[1], persistent=False)
        self.top = mlp([dim + iu.shape[1], 64, 32, 1], last_relu=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)  # [B, dim]
        feats = [x]
        for k, emb in zip(self.keys, self.embs):
            j = sparse[k]  # values int64 (ids), offsets int32 [B + 1] from 0
            # The spec maps ids into [0, num_embeddings) (modulo); remainder
            # keeps any other spec from indexing out of the table.
            ids = torch.remainder(j.values, self.num_embeddings)
            feats.append(emb(ids, j.offsets[:-1].long()))
        t = torch.stack(feats, dim=1)  # [B, 1 + keys, dim]
        z = torch.bmm(t, t.transpose(1, 2))  # pairwise dot products
        inter = z[:, self.iu0, self.iu1]  # the upper triangle, [B, pairs]
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default=os.environ.get("DPP_MASTER", "127.0.0.1:7070"),
                    help="HOST:PORT of the dpp master (default $DPP_MASTER or 127.0.0.1:7070)")
    ap.add_argument("--session", required=True, help="session id from `dppctl submit`")
    ap.add_argument("--rank", type=int, default=0, help="trainer rank (default 0)")
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    ap.add_argument("--log-every", type=int, default=50, help="steps between loss lines (default 50)")
    ap.add_argument("--embedding-rows", type=int, default=100000, help="rows per embedding table")
    ap.add_argument("--embedding-dim", type=int, default=16)
    ap.add_argument("--device", default="cpu", help="torch device (default cpu)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=120.0,
                    help="longest wait for one batch, in seconds (default 120)")
    ap.add_argument("--checkpoint", metavar="PATH",
                    help="save model, optimizer and data position here every --checkpoint-every "
                         "steps and at the end; when PATH exists, resume from it first")
    ap.add_argument("--checkpoint-every", type=int, default=100,
                    help="steps between checkpoints (default 100)")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.log_every < 1:
        ap.error("--steps and --log-every must be >= 1")

    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    ds = dpp.TorchDataset(a.master, a.session, rank=a.rank, next_timeout_s=a.timeout_s)
    ckpt = None
    if a.checkpoint and os.path.exists(a.checkpoint):
        ckpt = torch.load(a.checkpoint)
        ds.load_state_dict(ckpt["data"])  # before the client opens: it starts there
    client = ds.client
    print("dpp session %s at %s: batch_size %d, %s epochs, %d dense (%d values), %d sparse features"
          % (a.session, a.master, client.batch_size, client.num_epochs, len(client.dense_names),
             sum(client.dense_dims), len(client.sparse_names)), flush=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0,
                                         pin_memory=device.type == "cuda")

    model = DLRM(sum(client.dense_dims), client.sparse_names, a.embedding_rows, a.embedding_dim).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    # per row, so that padded rows (spec remainder "pad") can be masked out
    loss_fn = nn.BCEWithLogitsLoss(reduction="none")

    def save(step, epoch):
        tmp = a.checkpoint + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "epoch": epoch, "data": ds.state_dict()}, tmp)
        os.replace(tmp, a.checkpoint)

    step = 0
    epoch = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        step, epoch = ckpt["step"], ckpt["epoch"]
        print("resumed from %s at step %d (epoch %d)" % (a.checkpoint, step, epoch), flush=True)
    window, first_avg, last_avg = [], None, None
    wait_s = step_s = 0.0  # since the last loss line
    rows = 0
    wait_total = run_total = 0.0
    stats0 = client.stats()
    t_start = t_prev = time.perf_counter()
    while step < a.steps:
        got = 0
        it = iter(loader)
        while step < a.steps:
            try:
                batch = next(it)  # the time in here is time spent waiting for data
            except StopIteration:
                break
            t_data = time.perf_counter()
            got += 1
            batch = batch.to(device, non_blocking=True) if device.type != "cpu" else batch
            pred = model(batch.dense, batch.sparse)
            mask = batch.mask.to(pred.dtype)
            loss = (loss_fn(pred, batch.labels) * mask).sum() / mask.sum().clamp(min=1.0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            rows += batch.valid_rows
            del batch  # hands the batch back to the client's memory budget
            t_end = time.perf_counter()
            wait_s += t_data - t_prev
            step_s += t_end - t_prev
            t_prev = t_end
            step += 1
            window.append(float(loss))
            if a.checkpoint and step % a.checkpoint_every == 0:
                save(step, epoch)
            if step % a.log_every == 0 or step == a.steps:
                avg = sum(window) / len(window)
                if first_avg is None:
                    first_avg = avg
                last_avg = avg
                print("step %5d  epoch %d  loss %.4f  data wait %4.1f%% of step time  %.0f rows/s"
                      % (step, epoch, avg, 100.0 * wait_s / step_s if step_s else 0.0,
                         rows / step_s if step_s else 0.0), flush=True)
                wait_total += wait_s
                run_total += step_s
                window, wait_s, step_s, rows = [], 0.0, 0.0, 0
        if step >= a.steps:
            break
        if got == 0:
            print("the session ended after %d of %d steps (%d epochs): submit it with more epochs"
                  % (step, a.steps, epoch), flush=True)
            break
        epoch += 1
    total = time.perf_counter() - t_start
    if a.checkpoint:
        save(step, epoch)
    st = client.stats()
    ds.close()
    if window:  # a partial window at the end of the session
        last_avg = sum(window) / len(window)
        first_avg = last_avg if first_avg is None else first_avg
    client_wait = (st["wait_ns"] - stats0["wait_ns"]) / 1e9
    print("done: %d steps in %.1f s; waiting for data: %.1f%% of the time by next() timing, "
          "%.1f%% inside dpp_client_next (client stats)"
          % (step, total, 100.0 * (wait_total + wait_s) / max(run_total + step_s, 1e-9),
             100.0 * client_wait / max(total, 1e-9)), flush=True)
    if first_avg is not None:
        print("loss: first %d steps %.4f -> last %d steps %.4f"
              % (min(a.log_every, step), first_avg, min(a.log_every, step), last_avg), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
