# SPDX-License-Identifier: Apache-2.0
"""Text sessions end to end (format "jsonl"), against a reference written here.

A corpus of JSON Lines files (documents of varied length with escapes,
accents, CJK and emoji, a "lang" field, blank lines, malformed lines and a
line without the text field; one file zstd-compressed in two frames) and a small BPE vocabulary trained on it are
written to the data root. The reference reads the files with Python's json
module, tokenizes with tests/text/bpe_reference.py (Python's `regex`, the
merge rule written out naively), cuts splits as docs/spec.md says (every
split_rows lines, a split that makes no sequence growing until one does)
and packs each split (concat; best_fit) as the spec says. Checked:
  1. concat, 2 ranks, shuffled, remainder "keep": the sequences both ranks
     receive are the reference's, each exactly once (so every token of
     every document appears once, and no label crosses a document);
     rejects and filtered documents are counted, and so are the session's
     documents, tokens and padding (dppctl status);
     dppctl read's text sums equal the reference's;
  2. the same spec again: each rank's sequence order is identical
     (deterministic shuffle);
  3. remainder "drop": both ranks get the same number of full batches;
  4. best_fit with bos and a window: the reference's sequences exactly;
  5. a misspelt text field: the session fails, naming the field;
  6. a truncated .zst file: the session fails, naming the file;
  7. dppctl validate/submit --table: a sample read as the worker reads it
     (documents counted, a misspelt field and a missing special refused);
  8. the tokenizer file replaced in place: a tokenizer that cuts otherwise
     gives a new session its own sequences (the index the master holds of
     the old one is not taken), also after a master restart; one that cuts
     the same with other ids, replaced while a session reads, fails that
     session naming the file (its version was pinned at submit), after
     batches that all carry the old ids.
"""
import base64
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

sys.path.insert(0, os.path.join(T.SRC, "tests", "text"))
import bpe_reference as R  # noqa: E402

import dpp  # noqa: E402

EOS, BOS = "<|endoftext|>", "<|bos|>"
WORDS = ("the a of to and in data worker master split token sequence batch epoch rank "
         "café naïve straße 日本語 中文 👍 Привет 3.14 2026 don't I'LL").split()


def make_corpus(root):
    """Three files of documents; returns their relative paths, sorted."""
    rng = random.Random(11)
    os.makedirs(os.path.join(root, "corpus"), exist_ok=True)
    names = []
    doc_id = 0
    for f in range(3):
        lines = []
        for _ in range(140 + 30 * f):
            n = rng.choice([1, 2, 5, 12, 30, 80, 200])
            words = [rng.choice(WORDS) for _ in range(rng.randrange(1, n + 1))]
            text = " ".join(words)
            if rng.random() < 0.2:
                text += '\n\n"quoted" \\ tab\there'
            lang = "de" if rng.random() < 0.15 else "en"
            line = json.dumps({"id": doc_id, "lang": lang, "text": text},
                              ensure_ascii=rng.random() < 0.5)
            doc_id += 1
            lines.append(line)
            r = rng.random()
            if r < 0.02:
                lines.append('{"id": 1, "text": "unterminated')
            elif r < 0.03:
                lines.append('{"id": 2, "body": "no text field"}')
            elif r < 0.05:
                lines.append("   ")
        name = "corpus/part-%d.jsonl" % f
        with open(os.path.join(root, name), "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + ("\n" if f != 1 else ""))  # file 1 ends without a newline
        if f == 2:  # compressed, in two zstd frames
            half = len(lines) // 2
            parts = ["\n".join(lines[:half]) + "\n", "\n".join(lines[half:]) + "\n"]
            blob = b"".join(subprocess.run(["zstd", "-q", "-c"], input=x.encode(), check=True,
                                           capture_output=True).stdout for x in parts)
            os.remove(os.path.join(root, name))
            name += ".zst"
            with open(os.path.join(root, name), "wb") as fh:
                fh.write(blob)
        names.append(name)
    return names


def read_docs(path, spec):
    """Per line of the file: ("doc", text bytes), ("filtered",), ("rejected",) or ("blank",)."""
    t = spec.get("text", {})
    field, where = t.get("field", "text"), t.get("where", {})
    out = []
    data = open(path, "rb").read()
    if path.endswith(".zst"):
        data = subprocess.run(["zstd", "-q", "-dc"], input=data, check=True,
                              capture_output=True).stdout
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for raw in lines:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if raw.strip(b" \t") == b"":
            out.append(("blank",))
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            out.append(("rejected",))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
            out.append(("rejected",))
            continue
        if any(obj.get(k) != v for k, v in where.items()):
            out.append(("filtered",))
            continue
        text = obj[field].encode("utf-8")
        if not t.get("min_bytes", 0) <= len(text) <= t.get("max_bytes", 1 << 62):
            out.append(("filtered",))
            continue
        out.append(("doc", text))
    return out


def item_of(tokens, bos, eos):
    return ([bos] if bos is not None else []) + tokens + ([eos] if eos is not None else [])


def sequence(L, pieces):
    """One sequence from pieces (item tokens, the item's next token after
    the piece or None, position of the piece's first token), padded."""
    ids, labels, pos, cu = [], [], [], [0]
    for toks, after, p0 in pieces:
        for i, tok in enumerate(toks):
            ids.append(tok)
            nxt = toks[i + 1] if i + 1 < len(toks) else after
            labels.append(-100 if nxt is None else nxt)
            pos.append(p0 + i)
        cu.append(len(ids))
    pad = L - len(ids)
    if pad:
        ids += [PAD] * pad
        labels += [-100] * pad
        pos += [0] * pad
        cu.append(L)
    return (tuple(ids), tuple(labels), tuple(pos), tuple(cu), pad)


def pack_concat(items, L):
    """items joined and cut every L tokens; the last sequence padded."""
    out, cur = [], []  # cur: pieces of the sequence being filled
    used = 0
    for it in items:
        at = 0
        while at < len(it):
            take = min(L - used, len(it) - at)
            after = it[at + take] if at + take < len(it) else None
            cur.append((it[at:at + take], after, at))
            at += take
            used += take
            if used == L:
                out.append(sequence(L, cur))
                cur, used = [], 0
    if cur:
        out.append(sequence(L, cur))
    return out


def pack_best_fit(items, L, window):
    out = []
    for w in range(0, len(items), window):
        rest = []
        for it in items[w:w + window]:
            at = 0
            while len(it) - at > L:
                out.append(sequence(L, [(it[at:at + L], it[at + L], at)]))
                at += L
            if at < len(it):
                rest.append((it[at:], at))
        order = sorted(range(len(rest)), key=lambda i: -len(rest[i][0]))  # stable
        bins = []  # [room, pieces]
        for i in order:
            toks, p0 = rest[i]
            best = None
            for b in bins:
                if b[0] >= len(toks) and (best is None or b[0] < best[0]):
                    best = b
            if best is None:
                best = [L, []]
                bins.append(best)
            best[0] -= len(toks)
            best[1].append((toks, None, p0))
        out += [sequence(L, b[1]) for b in bins]
    return out


def reference(root, files, spec, ranks, ids):
    """Every sequence of an epoch, and the documents, filtered and rejected lines."""
    seq = spec["sequence"]
    L, split_rows = seq["length"], spec["split_rows"]
    bos = ids.get(seq.get("bos")) if seq.get("bos") else None
    eos = ids.get(seq.get("eos", EOS)) if seq.get("eos", EOS) else None
    counts = Counter()
    out = []

    def pack(items):
        if seq.get("pack", "concat") == "best_fit":
            return pack_best_fit(items, L, seq.get("window", 256))
        return pack_concat(items, L)

    for name in files:
        items, lines = [], 0
        for kind, *rest in read_docs(os.path.join(root, name), spec):
            counts[kind] += 1
            lines += 1
            if kind == "doc":
                items.append(item_of(R.encode(ranks, rest[0]), bos, eos))
            if lines >= split_rows:
                made = pack(items)
                if made:
                    out += made
                    items, lines = [], 0
        out += pack(items)
    return out, counts


def read_rank(master, sid, rank, got, batches):
    try:
        read_rank_(master, sid, rank, got, batches)
    except Exception as e:  # noqa: BLE001 (the caller reports it)
        got.setdefault("errors", []).append("rank %d: %s" % (rank, e))


def read_rank_(master, sid, rank, got, batches):
    seqs, n = [], 0
    with dpp.Client(master, sid, rank=rank) as c:
        for b in c:
            t = b.text
            assert t is not None, "a text session's batch has no .text"
            n += 1
            cu = t.row_cu_seqlens
            for r in range(t.input_ids.shape[0]):
                row_cu = cu.values[int(cu.offsets[r]):int(cu.offsets[r + 1])].tolist()
                seqs.append((tuple(t.input_ids[r].tolist()), tuple(t.labels[r].tolist()),
                             tuple(t.position_ids[r].tolist()), tuple(row_cu), int(t.padding[r])))
            # the flattened cu_seqlens: every row boundary, ending at rows * L
            flat = t.cu_seqlens.tolist()
            L = t.length
            assert flat[0] == 0 and flat[-1] == t.input_ids.numel(), flat
            assert all(r * L in flat for r in range(t.input_ids.shape[0] + 1)), flat
            assert t.pad_tokens == sum(x[4] for x in seqs[-t.input_ids.shape[0]:])
    got[rank] = seqs
    batches[rank] = n


def read_all(master, sid, consumers):
    got, batches = {}, {}
    th = [threading.Thread(target=read_rank, args=(master, sid, r, got, batches)) for r in range(consumers)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    if "errors" in got:
        raise RuntimeError("; ".join(got["errors"]))
    return got, batches


def status(cl, sid):
    """dppctl status as JSON (it exits 3 for a failed session)."""
    r = subprocess.run([os.path.join(T.BIN, "dppctl"), "status", sid, "-o", "json"], env=cl.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 3), r.stderr
    return json.loads(r.stdout)


def main():
    global PAD
    with T.Cluster("text") as cl:
        files = make_corpus(cl.root)
        docs = [d[1] for f in files for d in read_docs(os.path.join(cl.root, f), {}) if d[0] == "doc"]
        ranks = R.train(docs[:200], 300)
        R.write_ranks(os.path.join(cl.root, "corpus", "_tok.tiktoken"), ranks)
        ids = {EOS: len(ranks), BOS: len(ranks) + 1}
        PAD = ids[EOS]
        cl.start_master()
        cl.start_worker(2)
        cl.start_worker(2)

        base = {
            "table": "corpus", "format": "jsonl", "batch_size": 4, "consumers": 2,
            "split_rows": 40, "shuffle": {"seed": 3}, "remainder": "keep", "max_reject_ratio": 0.2,
            "text": {"field": "text", "where": {"lang": "en"}},
            "tokenizer": {"file": "corpus/_tok.tiktoken", "pattern": "cl100k_base",
                          "specials": ids},
            "sequence": {"length": 48, "pack": "concat", "eos": EOS},
        }

        T.log("case 1: concat, 2 ranks, against the reference")
        want, counts = reference(cl.root, files, base, ranks, ids)
        sid = cl.submit(cl.write_spec(base))
        got, batches = read_all(cl.master, sid, 2)
        all_got = Counter(got[0] + got[1])
        if all_got != Counter(want):
            missing = Counter(want) - all_got
            extra = all_got - Counter(want)
            raise AssertionError("sequences differ from the reference: %d missing, %d extra "
                                 "(of %d); first missing %r, first extra %r" % (
                                     sum(missing.values()), sum(extra.values()), len(want),
                                     next(iter(missing), None), next(iter(extra), None)))
        tokens = sum(len(x[0]) - x[4] for x in want)
        T.log("  %d sequences (%d tokens, %d documents) equal the reference; %d filtered, "
              "%d rejected lines" % (len(want), tokens, counts["doc"], counts["filtered"],
                                     counts["rejected"]))
        st = status(cl, sid)
        T.log("  status:", {k: st.get(k) for k in ("state", "rows_produced", "rows_filtered",
                                                    "records_rejected")})
        assert st.get("state") == "done", st
        assert st["records_rejected"] == counts["rejected"], (st, counts)
        assert st["rows_filtered"] == counts["filtered"], (st, counts)
        # the session's text counters: every split made once in a clean run
        want_text = {"documents": counts["doc"], "tokens": tokens,
                     "padding": sum(x[4] for x in want)}
        assert {k: st.get("text", {}).get(k) for k in want_text} == want_text, (st, want_text)

        T.log("case 1b: dppctl read's text sums (dpp_batch_text) equal the reference's")
        one = dict(base, consumers=1)
        sid1 = cl.submit(cl.write_spec(one, "one.json"))
        out = cl.run([os.path.join(T.BIN, "dppctl"), "read", sid1, "-o", "json"])
        got_sums = json.loads(out.strip().splitlines()[0])
        want_sums = {
            "sequences": len(want),
            "tokens": sum(48 - x[4] for x in want),
            "padding": sum(x[4] for x in want),
            "segments": sum(len(x[3]) - 1 - (x[4] > 0) for x in want),
            "targets": sum(sum(1 for v in x[1] if v != -100) for x in want),
            "token_ids_sum": sum(sum(x[0][:48 - x[4]]) for x in want),
        }
        assert {k: got_sums.get(k) for k in want_sums} == want_sums, (got_sums, want_sums)

        T.log("case 2: the same spec again: the same order on each rank")
        sid2 = cl.submit(cl.write_spec(base, "again.json"))
        again, _ = read_all(cl.master, sid2, 2)
        assert again[0] == got[0] and again[1] == got[1], "the order differs between two runs"

        T.log("case 3: remainder drop: equal full batches per rank")
        drop = dict(base, remainder="drop")
        sid3 = cl.submit(cl.write_spec(drop, "drop.json"))
        _, nb = read_all(cl.master, sid3, 2)
        assert nb[0] == nb[1] == len(want) // (2 * 4), (nb, len(want))

        T.log("case 4: best_fit with bos, window 16")
        bf = dict(base, sequence={"length": 48, "pack": "best_fit", "window": 16, "eos": EOS,
                                  "bos": BOS}, consumers=1)
        want_bf, _ = reference(cl.root, files, bf, ranks, ids)
        sid4 = cl.submit(cl.write_spec(bf, "bf.json"))
        got_bf, _ = read_all(cl.master, sid4, 1)
        assert Counter(got_bf[0]) == Counter(want_bf), "best_fit differs from the reference"
        pad = sum(x[4] for x in want_bf)
        T.log("  %d sequences equal the reference (%.1f%% padding)" % (
            len(want_bf), 100.0 * pad / (48 * len(want_bf))))

        T.log("case 5: a misspelt text field fails the session, naming it")
        bad = dict(base, text={"field": "txt"})
        sid5 = cl.submit(cl.write_spec(bad, "bad.json"))
        try:
            read_all(cl.master, sid5, 2)
        except Exception:
            pass
        st = status(cl, sid5)
        msg = json.dumps(st)
        assert st.get("state") == "failed" and 'no field \\"txt\\"' in msg, msg
        assert 'did you mean \\"text\\"' in msg, msg
        T.log("  failed:", st.get("error", "")[:200])
        T.log("case 6: a truncated .zst file fails the session, naming the file")
        os.makedirs(os.path.join(cl.root, "broken"))
        blob = open(os.path.join(cl.root, files[2]), "rb").read()
        with open(os.path.join(cl.root, "broken", "cut.jsonl.zst"), "wb") as fh:
            fh.write(blob[:len(blob) // 3])
        sid6 = cl.submit(cl.write_spec(dict(base, table="broken"), "broken.json"))
        for _ in range(100):
            st = status(cl, sid6)
            if st["state"] in ("failed", "done"):
                break
            time.sleep(0.05)
        assert st["state"] == "failed" and "cut.jsonl.zst" in st["error"] and \
            "truncated" in st["error"], st
        T.log("  failed:", st["error"][:200])
        T.log("case 7: dppctl validate --table reads a sample as the worker would")
        table = os.path.join(cl.root, "corpus")
        good = subprocess.run([os.path.join(T.BIN, "dppctl"), "validate", cl.write_spec(base, "v.json"),
                               "--table", table], capture_output=True, text=True, env=cl.env)
        assert good.returncode == 0 and "documents" in good.stdout and "tokens" in good.stdout, \
            (good.stdout, good.stderr)
        bad = subprocess.run([os.path.join(T.BIN, "dppctl"), "submit",
                              cl.write_spec(dict(base, text={"field": "txt"}), "vb.json"),
                              "--table", table], capture_output=True, text=True, env=cl.env)
        assert bad.returncode == 1 and 'did you mean "text"' in bad.stderr, (bad.stdout, bad.stderr)
        nospecial = dict(base, sequence={"length": 48, "eos": "<|eot|>"})
        bad = subprocess.run([os.path.join(T.BIN, "dppctl"), "validate",
                              cl.write_spec(nospecial, "vs.json"), "--table", table],
                             capture_output=True, text=True, env=cl.env)
        assert bad.returncode == 1 and 'no special token "<|eot|>"' in bad.stderr, bad.stderr
        T.log("  " + good.stdout.strip().splitlines()[-1])

        T.log("case 8a: the tokenizer replaced in place by one that cuts otherwise")
        tok = os.path.join(cl.root, "corpus", "_tok.tiktoken")
        st0 = os.stat(tok)
        ranks2 = R.train(docs[:200], 60)
        R.write_ranks(tok, ranks2)
        os.utime(tok, ns=(st0.st_atime_ns, st0.st_mtime_ns + 10**9))
        want2, _ = reference(cl.root, files, one, ranks2, ids)
        assert Counter(want2) != Counter(want), "the second tokenizer cuts as the first"

        def check_new(tag):
            sid = cl.submit(cl.write_spec(one, tag + ".json"))
            got2, _ = read_all(cl.master, sid, 1)
            assert Counter(got2[0]) == Counter(want2), \
                "%s: the sequences are not the new tokenizer's" % tag
            T.log("  %s: %d sequences of the new tokenizer" % (tag, len(want2)))
        check_new("replaced")
        cl.restart_master()
        check_new("replaced-restart")

        T.log("case 8b: replaced while a session reads: the session fails, naming the file")
        shifted = {k: v + 1000 for k, v in ranks2.items()}  # the same order: the same cuts
        two = dict(one, epochs=2, shuffle=False)
        sid8 = cl.submit(cl.write_spec(two, "pinned.json"))
        seen, err = [], None
        with dpp.Client(cl.master, sid8, rank=0) as c:
            try:
                for i, b in enumerate(c):
                    t = b.text
                    for r in range(t.input_ids.shape[0]):
                        seen.append(tuple(t.input_ids[r].tolist()))
                    if i == 2:
                        R.write_ranks(tok, shifted)
                        os.utime(tok, ns=(st0.st_atime_ns, st0.st_mtime_ns + 2 * 10**9))
            except dpp.DppError as e:
                err = e
        assert err is not None, "the session read on after its tokenizer changed"
        text = str(err) + " " + (getattr(err, "detail", "") or "")
        assert "corpus/_tok.tiktoken" in text and "changed since the session was submitted" in text, \
            text
        old_ids = Counter(x[0] for x in want2)
        assert seen and all(x in old_ids for x in seen), "a batch carried the replaced ids"
        T.log("  %d sequences of the pinned version, then: %s" % (len(seen), text[:240]))
    T.log("ok")


if __name__ == "__main__":
    main()
