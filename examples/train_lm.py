#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Trains a small causal transformer language model on CPU from a live dpp text session.

    DPP_LIB=build/libdppclient.so PYTHONPATH=python /usr/bin/python3 \\
        examples/train_lm.py --master 127.0.0.1:7070 --session SESSION \\
        --tokenizer ROOT/corpus/_tokenizer.tiktoken --steps 300

The model: a token embedding, --layers pre-norm transformer blocks
(multi-head self-attention with rotary position embeddings taken from the
batch's position_ids, a GELU MLP), a final LayerNorm and an output head tied
to the embedding. A batch holds packed sequences (batch.text: input_ids,
labels, position_ids, cu_seqlens); attention is block-diagonal and causal
within each segment of cu_seqlens, so a token never sees another document
packed into the same row. Loss: cross-entropy over the labels, -100 (a
document's last token, padding) ignored. It prints the mean loss every
--log-every steps, then the mean loss of the first and the last --log-every
steps. `make demo-lm` runs it against a generated corpus
(scripts/demo_lm.sh).

The vocabulary is --vocab-size, or the line count of --tokenizer (a tiktoken
rank file) plus --specials (the special tokens the spec adds after the
ranks, 1 for <|endoftext|>).

`train_lm.py --self-test` checks the model without dpp: the mask keeps the
segments of a packed batch apart and causal, a few steps of AdamW on
synthetic packed batches lower the loss, and a checkpoint resumes them
exactly.
"""
import argparse
import math
import os
import sys
import tempfile
import time
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F

IGNORE = -100  # the labels' "no target" (cross_entropy's default ignore_index)


def segment_ids(cu_seqlens, rows, length):
    """[rows, length] int64: the segment of each token, from cu_seqlens (the
    flash-attention varlen layout over the flattened rows * length tokens:
    from 0 to rows * length, increasing, every row boundary included).
    Raises ValueError when cu_seqlens does not have that layout."""
    n = rows * length
    cu = cu_seqlens.to(torch.int64).flatten()
    if cu.numel() < 2 or int(cu[0]) != 0 or int(cu[-1]) != n or bool((cu[1:] <= cu[:-1]).any()):
        raise ValueError("cu_seqlens %s is not 0 < ... < %d increasing" % (cu.tolist()[:8], n))
    start = torch.zeros(n, dtype=torch.int64)
    start[cu[1:-1]] = 1
    start = start.view(rows, length)
    if rows > 1 and not bool(start[1:, 0].all()):
        raise ValueError("cu_seqlens misses a row boundary (a multiple of %d)" % length)
    return start.flatten().cumsum(0).view(rows, length)


def segment_mask(seg):
    """[rows, 1, L, L] bool, True where query i may attend to key j: the same
    segment and j <= i. Every query sees at least itself, so no softmax row is
    all -inf."""
    length = seg.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return ((seg[:, :, None] == seg[:, None, :]) & causal)[:, None]


def rotary(x, pos, base=10000.0):
    """Rotary position embedding of x [B, H, L, D] at positions pos [B, L]
    (any non-negative ints: a document cut across rows keeps counting)."""
    half = x.shape[-1] // 2
    freq = base ** (-torch.arange(half, dtype=torch.float32) / half)
    ang = pos.to(torch.float32)[:, None, :, None] * freq  # [B, 1, L, half]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        if dim % heads or (dim // heads) % 2:
            raise ValueError("--dim %d must split into %d heads of an even size" % (dim, heads))
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, pos, mask):
        b, l, d = x.shape
        q, k, v = self.qkv(x).view(b, l, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotary(q, pos), rotary(k, pos)
        # Written out rather than F.scaled_dot_product_attention (torch >= 2.0):
        # the same mask semantics, on the torch this machine has.
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(b, l, d))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, pos, mask):
        x = x + self.attn(self.ln1(x), pos, mask)
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab_size, dim=128, layers=2, heads=4):
        super().__init__()
        self.config = {"vocab_size": vocab_size, "dim": dim, "layers": layers, "heads": heads}
        self.emb = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.emb.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)

    def forward(self, input_ids, position_ids, cu_seqlens):
        """Logits [B, L, vocab] of the next token at every position."""
        rows, length = input_ids.shape
        mask = segment_mask(segment_ids(cu_seqlens, rows, length))
        x = self.emb(input_ids)
        for blk in self.blocks:
            x = blk(x, position_ids, mask)
        return self.ln(x) @ self.emb.weight.t()  # tied head


def lm_loss(logits, labels):
    """Mean cross-entropy over the targets (labels != -100); 0, not NaN, for a
    batch with none (a row of remainder "pad" is all -100)."""
    v = logits.shape[-1]
    total = F.cross_entropy(logits.view(-1, v), labels.view(-1), ignore_index=IGNORE,
                            reduction="sum")
    return total / (labels != IGNORE).sum().clamp(min=1)


def train_step(model, opt, text, clip=1.0):
    """One AdamW step on a batch.text-like object; returns (loss, targets)."""
    logits = model(text.input_ids, text.position_ids, text.cu_seqlens)
    loss = lm_loss(logits, text.labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return float(loss), int((text.labels != IGNORE).sum())


def save_checkpoint(path, model, opt, step, epoch, data):
    """model, optimizer, step, epoch and the data position (a TorchDataset
    state_dict), written to a temporary file renamed over path, so a crash
    mid-save leaves the previous checkpoint."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "config": model.config,
                "step": step, "epoch": epoch, "data": data}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path, model, opt):
    """Loads path into model and opt; returns (step, epoch, data). Raises
    ValueError when the checkpoint's model is not this one."""
    ckpt = torch.load(path)
    if ckpt.get("config") != model.config:
        raise ValueError("%s holds a model %s, not %s: remove it or use its settings"
                         % (path, ckpt.get("config"), model.config))
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    return ckpt["step"], ckpt["epoch"], ckpt["data"]


def vocab_from_tokenizer(path, specials):
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip()) + specials


# ---- --self-test: the model on synthetic packed batches, without dpp ----

def fake_text(rows, length, vocab, gen, eos, pad_rows=0):
    """A batch.text-like object as the dpp API describes it, packed "concat"
    style: documents back to back, cut every `length` tokens (position_ids
    keep counting across a cut), labels the next token of the same document
    (-100 at a document's end and on padding), padding (eos, -100, position
    0) at the end as one segment. A document is a run of +1 steps mod
    vocab - 1 from a random start: learnable, so the loss can fall."""
    n_tokens = (rows - pad_rows) * length - int(torch.randint(0, length // 2, (1,), generator=gen))
    ids, labels, pos, starts = [], [], [], [0]
    while len(ids) < n_tokens:
        dl = min(int(torch.randint(2, 2 * length, (1,), generator=gen)), n_tokens - len(ids))
        first = int(torch.randint(0, vocab - 1, (1,), generator=gen))
        doc = [(first + i) % (vocab - 1) for i in range(dl)]
        ids += doc
        labels += doc[1:] + [IGNORE]
        pos += list(range(dl))
        starts.append(len(ids))
    total = rows * length
    pad = total - len(ids)
    ids += [eos] * pad
    labels += [IGNORE] * pad
    pos += [0] * pad
    bounds = set(starts) | set(range(0, total + 1, length)) | {total}
    cu = torch.tensor(sorted(b for b in bounds if b <= total), dtype=torch.int32)

    def grid(v):
        return torch.tensor(v, dtype=torch.int64).view(rows, length)

    return SimpleNamespace(input_ids=grid(ids), labels=grid(labels), position_ids=grid(pos),
                           cu_seqlens=cu, pad_tokens=pad)


def self_test():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    vocab, rows, length = 64, 4, 32
    eos = vocab - 1

    # the layout checks refuse what is not flash-attention varlen
    for bad in ([0, 5, 64], [0, 40, 128], [0, 32, 32, 128], [1, 128]):
        try:
            segment_ids(torch.tensor(bad), rows, length)
        except ValueError:
            continue
        raise AssertionError("segment_ids accepted cu_seqlens %s" % bad)

    model = TinyLM(vocab, dim=64, layers=2, heads=4).eval()
    text = fake_text(rows, length, vocab, gen, eos, pad_rows=1)
    seg = segment_ids(text.cu_seqlens, rows, length)
    segs = seg.unique()
    assert segs.numel() >= 6, "the test batch should pack several documents per row"
    with torch.no_grad():
        base = model(text.input_ids, text.position_ids, text.cu_seqlens)
        checked = 0
        for s in segs.tolist():
            inside = seg == s
            other = text.input_ids.clone()
            other[~inside] = torch.randint(0, vocab, (int((~inside).sum()),), generator=gen)
            out = model(other, text.position_ids, text.cu_seqlens)
            # a token's output must not change when another segment's tokens change ...
            assert torch.allclose(out[inside], base[inside], atol=1e-5), "segment %d sees others" % s
            # ... nor when a later token of its own segment does (causal) ...
            r, c = inside.nonzero()[-1].tolist()
            later = text.input_ids.clone()
            later[r, c] = (later[r, c] + 1) % vocab
            out = model(later, text.position_ids, text.cu_seqlens)
            keep = inside.clone()
            keep[r, c] = False
            assert torch.allclose(out[keep], base[keep], atol=1e-5), "segment %d is not causal" % s
            # ... but must when an earlier one does (the mask is not blocking everything)
            r0, c0 = inside.nonzero()[0].tolist()
            if inside.sum() > 1:
                first = text.input_ids.clone()
                first[r0, c0] = (first[r0, c0] + 1) % vocab
                out = model(first, text.position_ids, text.cu_seqlens)
                assert not torch.allclose(out[r, c], base[r, c]), "segment %d sees nothing" % s
            checked += 1
    print("self-test: mask: %d segments of a %dx%d packed batch (%d padding) stay apart and causal"
          % (checked, rows, length, text.pad_tokens), flush=True)

    model = TinyLM(vocab, dim=64, layers=2, heads=4).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    batches = [fake_text(rows, length, vocab, gen, eos) for _ in range(8)]
    losses = [train_step(model, opt, batches[i % len(batches)])[0] for i in range(40)]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first - 1.0, "the loss did not fall: %.3f -> %.3f" % (first, last)
    print("self-test: training: loss %.3f -> %.3f in %d AdamW steps" % (first, last, len(losses)),
          flush=True)

    # checkpoint and resume: the next steps are the same either way
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ckpt.pt")
        save_checkpoint(path, model, opt, 40, 0, {"dpp_token": b"\x01token"})
        ahead = [train_step(model, opt, b)[0] for b in batches[:3]]
        model2 = TinyLM(vocab, dim=64, layers=2, heads=4).train()
        opt2 = torch.optim.AdamW(model2.parameters(), lr=3e-3, weight_decay=0.01)
        step, epoch, data = load_checkpoint(path, model2, opt2)
        assert (step, epoch, data) == (40, 0, {"dpp_token": b"\x01token"}), (step, epoch, data)
        again = [train_step(model2, opt2, b)[0] for b in batches[:3]]
        assert all(abs(a - b) < 1e-6 for a, b in zip(ahead, again)), (ahead, again)
        try:
            load_checkpoint(path, TinyLM(vocab + 1, dim=64, layers=2, heads=4), opt2)
        except ValueError:
            pass
        else:
            raise AssertionError("a checkpoint of another model was loaded")
    print("self-test: checkpoint: resumed steps equal the uninterrupted ones", flush=True)
    print("self-test: PASS", flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--self-test", action="store_true",
                    help="check the model on synthetic packed batches (no dpp needed) and exit")
    ap.add_argument("--master", default=os.environ.get("DPP_MASTER", "127.0.0.1:7070"),
                    help="HOST:PORT of the dpp master (default $DPP_MASTER or 127.0.0.1:7070)")
    ap.add_argument("--session", help="session id from `dppctl submit` (a text session)")
    ap.add_argument("--rank", type=int, default=0, help="trainer rank (default 0)")
    ap.add_argument("--vocab-size", type=int, help="ids are 0..V-1 (else from --tokenizer)")
    ap.add_argument("--tokenizer", metavar="PATH",
                    help="the session's tiktoken rank file: V = its lines + --specials")
    ap.add_argument("--specials", type=int, default=1,
                    help="special tokens the spec numbers after the ranks (default 1)")
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate (default 0.002)")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--log-every", type=int, default=50, help="steps between loss lines (default 50)")
    ap.add_argument("--dim", type=int, default=128, help="model width (default 128)")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=120.0,
                    help="longest wait for one batch, in seconds (default 120)")
    ap.add_argument("--checkpoint", metavar="PATH",
                    help="save model, optimizer and data position here every --checkpoint-every "
                         "steps and at the end; when PATH exists, resume from it first")
    ap.add_argument("--checkpoint-every", type=int, default=100,
                    help="steps between checkpoints (default 100)")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.session:
        ap.error("--session is required (or --self-test)")
    if a.steps < 1 or a.log_every < 1:
        ap.error("--steps and --log-every must be >= 1")
    if a.vocab_size is None:
        if not a.tokenizer:
            ap.error("give --vocab-size, or --tokenizer to count it from the rank file")
        a.vocab_size = vocab_from_tokenizer(a.tokenizer, a.specials)

    import dpp  # here, so that --self-test runs without libdppclient

    torch.manual_seed(a.seed)
    ds = dpp.TorchDataset(a.master, a.session, rank=a.rank, next_timeout_s=a.timeout_s)
    model = TinyLM(a.vocab_size, a.dim, a.layers, a.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    step = epoch = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        step, epoch, data = load_checkpoint(a.checkpoint, model, opt)
        ds.load_state_dict(data)  # before the client opens: it starts there
        print("resumed from %s at step %d (epoch %d)" % (a.checkpoint, step, epoch), flush=True)
    client = ds.client
    print("dpp session %s at %s: batch_size %d, %s epochs; model: vocab %d, dim %d, %d layers, "
          "%d heads, %.2fM parameters"
          % (a.session, a.master, client.batch_size,
             "unbounded" if client.num_epochs is None else client.num_epochs, a.vocab_size, a.dim,
             a.layers, a.heads, sum(p.numel() for p in model.parameters()) / 1e6), flush=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)

    def save():
        save_checkpoint(a.checkpoint, model, opt, step, epoch, ds.state_dict())

    window, first_avg, last_avg = [], None, None
    wait_s = step_s = 0.0  # since the last loss line
    tokens = pads = 0
    t_start = t_prev = time.perf_counter()
    model.train()
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
            text = batch.text
            if text is None:
                raise SystemExit("session %s is not a text session (spec format \"jsonl\")"
                                 % a.session)
            top = int(text.input_ids.max())
            if top >= a.vocab_size:
                raise SystemExit("token id %d is past the vocabulary (%d): give --vocab-size, or "
                                 "--tokenizer and --specials as the spec has them"
                                 % (top, a.vocab_size))
            loss, _ = train_step(model, opt, text)
            tokens += text.input_ids.numel()
            pads += text.pad_tokens
            del batch, text  # hands the batch back to the client's memory budget
            t_end = time.perf_counter()
            wait_s += t_data - t_prev
            step_s += t_end - t_prev
            t_prev = t_end
            step += 1
            window.append(loss)
            if a.checkpoint and step % a.checkpoint_every == 0:
                save()
            if step % a.log_every == 0 or step == a.steps:
                avg = sum(window) / len(window)
                if first_avg is None:
                    first_avg = avg
                last_avg = avg
                print("step %5d  epoch %d  loss %.4f  data wait %4.1f%%  %.0f tokens/s  "
                      "padding %.1f%%"
                      % (step, epoch, avg, 100.0 * wait_s / step_s if step_s else 0.0,
                         tokens / step_s if step_s else 0.0, 100.0 * pads / max(tokens, 1)),
                      flush=True)
                window, wait_s, step_s, tokens, pads = [], 0.0, 0.0, 0, 0
        if step >= a.steps:
            break
        if got == 0:
            print("the session ended after %d of %d steps (%d epochs): submit it with more epochs"
                  % (step, a.steps, epoch), flush=True)
            break
        epoch += 1
    total = time.perf_counter() - t_start
    if a.checkpoint:
        save()
    ds.close()
    if window:  # a partial window at the end of the session
        last_avg = sum(window) / len(window)
        first_avg = last_avg if first_avg is None else first_avg
    print("done: %d steps in %.1f s" % (step, total), flush=True)
    if first_avg is not None:
        print("loss: first %d steps %.4f -> last %d steps %.4f"
              % (min(a.log_every, step), first_avg, min(a.log_every, step), last_avg), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
