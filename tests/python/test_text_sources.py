# SPDX-License-Identifier: Apache-2.0
"""Text sessions over plain text files and over a Parquet string column,
end to end, against a reference written here (the packing and BPE reference
of test_text.py; the documents read with plain Python).

  1. format "text", a document a line: lines with CRLF endings, blank and
     whitespace-only lines, a line too short for min_bytes, a file without
     a final newline and one zstd-compressed; concat, 2 ranks, shuffled:
     every sequence of the reference exactly once;
  2. format "text", unit "file": each file one document (an empty and a
     blank file make none), best_fit with bos: the reference's sequences;
  3. format "parquet" with a text section: a string column with nulls and
     a `where` on another string column, files of several row groups
     written by tests/python/parquet_min.py (not dpp's writer), split_rows
     that cut splits across row groups: the reference's sequences, the
     nulls counted as rejected and the other languages as filtered;
  4. a misspelt column fails the session with "did you mean"; a column
     that is not a string is refused by name; "field" under format "text"
     is refused at submit;
  5. dppctl validate --table samples documents as the workers read them;
  6. a SentencePiece .model (trained here by libsentencepiece's trainer,
     Debian's python3-sentencepiece, which also encodes the reference):
     format "text", best_fit with its <s> and the default eos </s>, 2
     ranks: every sequence of the reference exactly once; an eos the model
     lacks is refused by dppctl validate, naming its control pieces;
  7. a mixture of the plain-text and the Parquet table (docs/spec.md#mixtures):
     every window of both ranks holds equal shares of each, by source_ids,
     and every sequence is one of its source's reference, none twice.
"""
import os
import subprocess
import sys
import threading
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402
import parquet_min as P  # noqa: E402
import test_text as TT  # noqa: E402

import dpp  # noqa: E402

R = TT.R
EOS, BOS = TT.EOS, TT.BOS
WORDS = TT.WORDS


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, n + 1)))


def make_lines(root, rng):
    """corpus_lines/: plain text, a document a line. Returns the files."""
    os.makedirs(os.path.join(root, "lines"))
    names = []
    for f in range(3):
        lines = []
        for _ in range(120):
            r = rng.random()
            if r < 0.05:
                lines.append("")
            elif r < 0.08:
                lines.append("  \t ")
            elif r < 0.1:
                lines.append("ok")  # under min_bytes
            else:
                lines.append(words(rng, rng.choice([3, 10, 40, 120])))
        sep = "\r\n" if f == 0 else "\n"
        data = sep.join(lines) + ("" if f == 1 else sep)  # file 1: no final newline
        name = "lines/part-%d.txt" % f
        if f == 2:
            data = subprocess.run(["zstd", "-q", "-c"], input=data.encode(), check=True,
                                  capture_output=True).stdout
            name += ".zst"
        with open(os.path.join(root, name), "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode("utf-8"))
        names.append(name)
    return names


def line_inputs(root, name, min_bytes):
    """Per line: ("doc", bytes), ("filtered",) or ("blank",), as the worker reads them."""
    data = open(os.path.join(root, name), "rb").read()
    if name.endswith(".zst"):
        data = subprocess.run(["zstd", "-q", "-dc"], input=data, check=True,
                              capture_output=True).stdout
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for ln in lines:
        if ln.endswith(b"\r"):
            ln = ln[:-1]
        if ln.strip(b" \t\r") == b"":
            out.append(("blank",))
        elif len(ln) < min_bytes:
            out.append(("filtered",))
        else:
            out.append(("doc", ln))
    return out


def make_files(root, rng):
    """whole/: a document a file. Returns the files."""
    os.makedirs(os.path.join(root, "whole"))
    names = []
    for f in range(12):
        name = "whole/doc-%02d.txt" % f
        text = "" if f == 4 else " \n\n " if f == 7 else "\n".join(
            words(rng, 60) for _ in range(rng.randrange(1, 6)))
        with open(os.path.join(root, name), "w", encoding="utf-8") as fh:
            fh.write(text)
        names.append(name)
    return names


def file_inputs(root, name, min_bytes):
    data = open(os.path.join(root, name), "rb").read()
    if data.strip(b" \t\r\n") == b"":
        return [("blank",)]
    return [("filtered",)] if len(data) < min_bytes else [("doc", data)]


def make_parquet(root, rng):
    """pq/: id, lang and text columns (text null now and then), several row
    groups a file. Returns the files and their rows."""
    os.makedirs(os.path.join(root, "pq"))
    names, rows_of = [], {}
    cols = [("id", P.INT64, P.REQUIRED), ("lang", P.BYTE_ARRAY, P.OPTIONAL),
            ("text", P.BYTE_ARRAY, P.OPTIONAL)]
    for f in range(2):
        rows = []
        for i in range(90 + 25 * f):
            text = None if rng.random() < 0.06 else words(rng, rng.choice([2, 8, 30, 90]))
            lang = None if rng.random() < 0.05 else ("de" if rng.random() < 0.2 else "en")
            rows.append((1000 * f + i, lang, text))
        name = "pq/part-%d.parquet" % f
        P.write(os.path.join(root, name), cols, rows, row_group_rows=17 + 10 * f)
        names.append(name)
        rows_of[name] = rows
    return names, rows_of


def pq_inputs(rows):
    out = []
    for _, lang, text in rows:
        if text is None:
            out.append(("rejected",))
        elif lang != "en":
            out.append(("filtered",))
        else:
            out.append(("doc", text.encode("utf-8")))
    return out


def reference(inputs_of, files, spec, encode, ids, default_eos=EOS):
    """The sequences of an epoch: each file's inputs cut every split_rows
    (a split that makes no sequence grows), each split packed on its own;
    encode(bytes) is the tokenizer."""
    seq = spec["sequence"]
    L, split_rows = seq["length"], spec["split_rows"]
    bos = ids.get(seq.get("bos")) if seq.get("bos") else None
    eos = ids.get(seq.get("eos", default_eos)) if seq.get("eos", default_eos) else None
    counts = Counter()
    out = []

    def pack(items):
        if seq.get("pack", "concat") == "best_fit":
            return TT.pack_best_fit(items, L, seq.get("window", 256))
        return TT.pack_concat(items, L)

    for name in files:
        items, n = [], 0
        for kind, *rest in inputs_of(name):
            counts[kind] += 1
            n += 1
            if kind == "doc":
                items.append(TT.item_of(encode(rest[0]), bos, eos))
            if n >= split_rows:
                made = pack(items)
                if made:
                    out += made
                    items, n = [], 0
        out += pack(items)
    return out, counts


def check(cl, spec, want, consumers, what):
    sid = cl.submit(cl.write_spec(spec, what + ".json"))
    got, _ = TT.read_all(cl.master, sid, consumers)
    all_got = Counter(s for r in range(consumers) for s in got[r])
    if all_got != Counter(want):
        missing, extra = Counter(want) - all_got, all_got - Counter(want)
        raise AssertionError("%s: %d missing, %d extra of %d sequences" % (
            what, sum(missing.values()), sum(extra.values()), len(want)))
    return sid


def main():
    import random
    rng = random.Random(5)
    with T.Cluster("text_sources") as cl:
        root = cl.root
        lines = make_lines(root, rng)
        whole = make_files(root, rng)
        pq, pq_rows = make_parquet(root, rng)
        docs = [d[1] for n in lines for d in line_inputs(root, n, 0) if d[0] == "doc"]
        ranks = R.train(docs[:150], 250)
        os.makedirs(os.path.join(root, "tok"))
        R.write_ranks(os.path.join(root, "tok", "t.tiktoken"), ranks)
        ids = {EOS: len(ranks), BOS: len(ranks) + 1}
        TT.PAD = ids[EOS]
        tok = {"file": "tok/t.tiktoken", "pattern": "cl100k_base", "specials": ids}

        def enc(b):
            return R.encode(ranks, b)
        cl.start_master()
        cl.start_worker(2)
        cl.start_worker(2)

        T.log("case 1: format text, a document a line")
        spec = {"table": "lines", "format": "text", "batch_size": 4, "consumers": 2,
                "split_rows": 30, "shuffle": {"seed": 9}, "remainder": "keep",
                "text": {"min_bytes": 3}, "tokenizer": tok,
                "sequence": {"length": 40, "pack": "concat"}}
        want, counts = reference(lambda n: line_inputs(root, n, 3), lines, spec, enc, ids)
        sid = check(cl, spec, want, 2, "lines")
        st = TT.status(cl, sid)
        assert st["state"] == "done" and st["rows_filtered"] == counts["filtered"], (st, counts)
        T.log("  %d sequences from %d documents equal the reference (%d filtered, %d blank)" % (
            len(want), counts["doc"], counts["filtered"], counts["blank"]))

        T.log("case 2: format text, unit file, best_fit with bos")
        spec = {"table": "whole", "format": "text", "batch_size": 2, "split_rows": 1,
                "remainder": "keep", "text": {"unit": "file"}, "tokenizer": tok,
                "sequence": {"length": 64, "pack": "best_fit", "window": 8, "bos": BOS}}
        want, counts = reference(lambda n: file_inputs(root, n, 0), whole, spec, enc, ids)
        check(cl, spec, want, 1, "whole")
        T.log("  %d sequences from %d files (%d blank) equal the reference" % (
            len(want), counts["doc"], counts["blank"]))

        T.log("case 3: a Parquet string column, where lang = en")
        spec = {"table": "pq", "format": "parquet", "batch_size": 4, "consumers": 2,
                "split_rows": 13, "shuffle": {"seed": 2}, "remainder": "keep",
                "max_reject_ratio": 0.5, "text": {"field": "text", "where": {"lang": "en"}},
                "tokenizer": tok, "sequence": {"length": 32, "pack": "concat"}}
        want, counts = reference(lambda n: pq_inputs(pq_rows[n]), pq, spec, enc, ids)
        sid = check(cl, spec, want, 2, "parquet")
        st = TT.status(cl, sid)
        assert st["state"] == "done", st
        assert st["records_rejected"] == counts["rejected"], (st, counts)
        assert st["rows_filtered"] == counts["filtered"], (st, counts)
        assert st["text"]["documents"] == counts["doc"] and st["text"]["tokens"] == sum(
            32 - x[4] for x in want), (st["text"], counts)
        T.log("  %d sequences from %d rows equal the reference; %d null texts rejected, "
              "%d rows of other languages filtered" % (len(want), sum(counts.values()),
                                                       counts["rejected"], counts["filtered"]))

        T.log("case 4: what is refused, by name")
        bad = dict(spec, text={"field": "txt"}, max_reject_ratio=0.01)
        sid = cl.submit(cl.write_spec(bad, "bad.json"))
        try:
            TT.read_all(cl.master, sid, 2)
        except Exception:  # noqa: BLE001 (the session fails: that is checked below)
            pass
        st = TT.status(cl, sid)
        msg = st.get("error", "")
        assert st["state"] == "failed" and 'no column "txt"' in msg and \
            'did you mean "text"' in msg, st
        T.log("  " + msg[:160])
        notstr = dict(spec, text={"field": "id"})
        sid = cl.submit(cl.write_spec(notstr, "notstr.json"))
        try:
            TT.read_all(cl.master, sid, 2)
        except Exception:  # noqa: BLE001
            pass
        st = TT.status(cl, sid)
        assert st["state"] == "failed" and '"id"' in st.get("error", "") and \
            "is INT64, not a string column" in st.get("error", ""), st
        T.log("  " + st["error"][:160])
        r = subprocess.run([os.path.join(T.BIN, "dppctl"), "submit",
                            cl.write_spec({"table": "lines", "format": "text", "batch_size": 4,
                                           "text": {"field": "body"}, "tokenizer": tok,
                                           "sequence": {"length": 40}}, "field.json")],
                           capture_output=True, text=True, env=cl.env)
        assert r.returncode != 0 and "text.field" in r.stderr and "plain text" in r.stderr, \
            (r.returncode, r.stderr)
        T.log("  " + r.stderr.strip().splitlines()[-1][:160])

        T.log("case 5: dppctl validate --table samples the documents as the workers read them")
        ctl = os.path.join(T.BIN, "dppctl")
        pq_spec = cl.write_spec(spec, "v_pq.json")
        good = subprocess.run([ctl, "validate", pq_spec, "--table", os.path.join(root, "pq")],
                              capture_output=True, text=True, env=cl.env)
        assert good.returncode == 0 and "rows sampled" in good.stdout and \
            "filtered out" in good.stdout and "would be rejected" in good.stdout, \
            (good.stdout, good.stderr)
        T.log("  " + good.stdout.strip().splitlines()[-1][:200])
        bad = subprocess.run([ctl, "validate", cl.write_spec(dict(spec, text={"field": "txt"}),
                                                             "v_bad.json"),
                              "--table", os.path.join(root, "pq")],
                             capture_output=True, text=True, env=cl.env)
        assert bad.returncode == 1 and 'did you mean "text"' in bad.stderr, bad.stderr
        lines_spec = {"table": "lines", "format": "text", "batch_size": 4, "tokenizer": tok,
                      "sequence": {"length": 40}}
        good = subprocess.run([ctl, "validate", cl.write_spec(lines_spec, "v_lines.json"),
                               "--table", os.path.join(root, "lines")],
                              capture_output=True, text=True, env=cl.env)
        assert good.returncode == 0 and "lines sampled" in good.stdout, (good.stdout, good.stderr)
        T.log("  " + good.stdout.strip().splitlines()[-1][:200])

        T.log("case 6: a SentencePiece model, its ids from libsentencepiece")
        import sentencepiece
        train = os.path.join(cl.tmp, "spm_train.txt")
        with open(train, "w", encoding="utf-8") as f:
            f.writelines(d.decode("utf-8") + "\n" for d in docs[:200])
        sentencepiece.SentencePieceTrainer.train(
            input=train, model_prefix=os.path.join(root, "tok", "sp"), vocab_size=400,
            model_type="unigram", byte_fallback=True, hard_vocab_limit=False, num_threads=1,
            minloglevel=2)
        sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(root, "tok", "sp.model"))
        sp_ids = {"<s>": sp.bos_id(), "</s>": sp.eos_id()}
        TT.PAD = sp.eos_id()
        spec = {"table": "lines", "format": "text", "batch_size": 4, "consumers": 2,
                "split_rows": 40, "shuffle": {"seed": 3}, "remainder": "keep",
                "tokenizer": {"file": "tok/sp.model"},
                "sequence": {"length": 48, "pack": "best_fit", "window": 16, "bos": "<s>"}}
        want, counts = reference(lambda n: line_inputs(root, n, 0), lines, spec,
                                 lambda b: sp.encode(b.decode("utf-8")), sp_ids,
                                 default_eos="</s>")
        check(cl, spec, want, 2, "spm")
        T.log("  %d sequences from %d documents equal libsentencepiece's" % (
            len(want), counts["doc"]))
        bad = dict(spec, sequence=dict(spec["sequence"], eos="<|endoftext|>"))
        r = subprocess.run([ctl, "validate", cl.write_spec(bad, "v_spm.json"),
                            "--table", os.path.join(root, "lines")],
                           capture_output=True, text=True, env=cl.env)
        assert r.returncode == 1 and "sequence.eos" in r.stderr and \
            "no control or user-defined piece" in r.stderr and "</s> (2)" in r.stderr, r.stderr
        T.log("  " + r.stderr.strip().splitlines()[-1][:200])

        T.log("case 7: a mixture of a plain-text and a Parquet source, 1:1, windows of 2 batches")
        TT.PAD = ids[EOS]
        seq = {"length": 32, "pack": "concat"}
        mix = {"batch_size": 4, "consumers": 2, "split_rows": 30, "shuffle": {"seed": 4},
               "max_reject_ratio": 0.5, "tokenizer": tok, "sequence": seq,
               "mixture": {"window": 2},
               "sources": [{"table": "lines", "format": "text", "weight": 1,
                            "text": {"min_bytes": 3}},
                           {"table": "pq", "format": "parquet", "weight": 1,
                            "text": {"field": "text", "where": {"lang": "en"}}}]}
        one = {"split_rows": 30, "sequence": seq}
        want = [Counter(reference(lambda n: line_inputs(root, n, 3), lines, one, enc, ids)[0]),
                Counter(reference(lambda n: pq_inputs(pq_rows[n]), pq, one, enc, ids)[0])]
        sid = cl.submit(cl.write_spec(mix, "mix.json"))
        got = {}

        def read_mix(rank):
            rows = []
            with dpp.Client(cl.master, sid, rank=rank) as c:
                for b in c:
                    t, cu = b.text, b.text.row_cu_seqlens
                    for r in range(t.input_ids.shape[0]):
                        row_cu = cu.values[int(cu.offsets[r]):int(cu.offsets[r + 1])].tolist()
                        rows.append((int(b.source_ids[r]), (
                            tuple(t.input_ids[r].tolist()), tuple(t.labels[r].tolist()),
                            tuple(t.position_ids[r].tolist()), tuple(row_cu),
                            int(t.padding[r]))))
            got[rank] = rows
        th = [threading.Thread(target=read_mix, args=(r,)) for r in range(2)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        assert len(got) == 2 and len(got[0]) == len(got[1]) > 0, {k: len(v) for k, v in got.items()}
        for r in range(2):
            for w in range(0, len(got[r]), 8):
                shares = Counter(src for src, _ in got[r][w:w + 8])
                assert shares == Counter({0: 4, 1: 4}), (r, w, shares)
        for src in (0, 1):
            seen = Counter(x for r in range(2) for sid_, x in got[r] if sid_ == src)
            assert not seen - want[src], "source %d: sequences that are not its own" % src
            assert max(seen.values()) == 1, "source %d: a sequence came twice" % src
        T.log("  %d sequences per rank, every window 4 + 4; each a sequence of its own source's "
              "reference, none twice" % len(got[0]))
    T.log("ok")


if __name__ == "__main__":
    main()
