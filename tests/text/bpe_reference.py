# SPDX-License-Identifier: Apache-2.0
"""dpp's tokenizer against a second, plain one written here, offline.

A small byte-level BPE vocabulary is trained on a seeded corpus (256 byte
tokens in a shuffled order, then the most frequent pairs merged), written
as a tiktoken rank file, and a corpus of mixed scripts, emoji, digits,
whitespace runs, long runs of one letter (the heap merge of long pieces)
and invalid UTF-8 is encoded by both: here with Python's `regex` (the
cl100k_base split pattern), bytes.decode("utf-8", "replace") and the
merge rule written out naively (lowest rank first, leftmost on ties); there
by tokenize_ids. Also: rank files and tokenizer.json files dpp must
refuse, each with its message.

Usage: bpe_reference.py TOKENIZE_IDS
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

import regex

CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ["the", "quick", "Brown", "FOX", "don't", "I'LL", "naïve", "café", "straße", "日本語",
         "中文", "Привет", "مرحبا", "👍", "👍🏽", "👨‍👩‍👧", "x²", "12345678", "3.14", " ", "   ",
         "\t", "\n", "\n\n", "\r\n", "!!!", "...", "#include", "<|endoftext|>", "aaaa", "ab"]
INVALID = [b"\xff", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"]


def pieces(text):
    return [m.group(0).encode("utf-8") for m in regex.finditer(CL100K, text)]


def train(corpus, merges):
    """256 single bytes in a shuffled order, then `merges` merges."""
    rng = random.Random(3)
    order = list(range(256))
    rng.shuffle(order)
    ranks = {bytes([b]): r for r, b in enumerate(order)}
    words = {}
    for doc in corpus:
        for p in pieces(doc.decode("utf-8", "replace")):
            words[p] = words.get(p, 0) + 1
    split = {w: [w[i:i + 1] for i in range(len(w))] for w in words}
    for _ in range(merges):
        counts = {}
        for w, parts in split.items():
            for a, b in zip(parts, parts[1:]):
                counts[a + b] = counts.get(a + b, 0) + words[w]
        # dpp takes tokens of up to 256 bytes (DPP_BPE_MAX_TOKEN)
        counts = {k: v for k, v in counts.items() if k not in ranks and len(k) <= 256}
        if not counts:
            break
        best = max(sorted(counts), key=lambda k: counts[k])
        ranks[best] = len(ranks)
        for w, parts in split.items():
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] + parts[i + 1] == best:
                    out.append(best)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            split[w] = out
    return ranks


def encode(ranks, data):
    """The reference: the text a UTF-8 decoder makes, split, merged naively."""
    ids = []
    for p in pieces(data.decode("utf-8", "replace")):
        if p in ranks:
            ids.append(ranks[p])
            continue
        parts = [p[i:i + 1] for i in range(len(p))]
        while True:
            best, at = None, None
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        ids.extend(ranks[x] for x in parts)
    return ids


def make_corpus(seed, n):
    rng = random.Random(seed)
    docs = []
    for d in range(n):
        parts = []
        for _ in range(1 + rng.randrange(60)):
            k = rng.randrange(100)
            if k < 70:
                parts.append((rng.choice(WORDS) + rng.choice(["", " "])).encode())
            elif k < 85:
                parts.append(chr(rng.choice([rng.randrange(0x20, 0x7f), rng.randrange(0xa0, 0x250),
                                             rng.randrange(0x4e00, 0x4e40),
                                             rng.randrange(0x1f600, 0x1f640)])).encode())
            elif k < 92:
                parts.append(rng.choice(INVALID))
            elif k < 96:
                parts.append(b"ab" * rng.randrange(65, 200))  # over 128 bytes: the heap merge
            else:
                parts.append(b" " * rng.randrange(1, 200))
        docs.append(b"".join(parts))
    docs.append(b"")
    return docs


def write_ranks(path, ranks):
    import base64
    with open(path, "w") as f:
        for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(tok).decode()} {r}\n")


def run(tool, ranks_path, pattern_path, docs, tmp):
    """tokenize_ids over docs; pattern_path None: ranks_path is a tokenizer.json."""
    corpus = os.path.join(tmp, "corpus.bin")
    with open(corpus, "wb") as f:
        for d in docs:
            f.write(struct.pack("<I", len(d)) + d)
    out = os.path.join(tmp, "ids.txt")
    how = "hf" if pattern_path is None else "@" + pattern_path
    p = subprocess.run([tool, ranks_path, how, corpus, out], capture_output=True, text=True)
    return p, out


def main():
    tool = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="dpp-bpe.") as tmp:
        ranks = train(make_corpus(1, 300), 400)
        ranks_path = os.path.join(tmp, "small.tiktoken")
        write_ranks(ranks_path, ranks)
        pattern_path = os.path.join(tmp, "pattern")
        with open(pattern_path, "w") as f:
            f.write(CL100K)
        docs = make_corpus(2, 400)
        p, out = run(tool, ranks_path, pattern_path, docs, tmp)
        if p.returncode != 0:
            sys.exit(f"bpe_reference: tokenize_ids failed: {p.stderr}")
        got = open(out).read().split("\n")
        total = 0
        for i, d in enumerate(docs):
            want = encode(ranks, d)
            total += len(want)
            if [int(x) for x in got[i].split()] != want:
                sys.exit(f"bpe_reference: document {i} differs: reference {want[:20]}..., "
                         f"dpp {got[i][:120]}...; bytes {d[:120]!r}")
        print(f"bpe_reference: {len(docs)} documents, {total} ids equal to the reference "
              f"({len(ranks)} tokens)")

        # rank files dpp refuses, each with the line and what was expected
        good = open(ranks_path).read().splitlines()
        cases = [
            ("bad base64", good[:5] + ["!!!! 5"] + good[6:], "line 6: the token is not base64"),
            ("no rank", good[:3] + ["QQ=="] + good[4:], "line 4: no rank"),
            ("rank not a number", ["QQ== x"] + good[1:], "line 1: the rank is not a number"),
            ("rank twice", good + [good[0].split()[0][:0] + "QUJD " + good[0].split()[1]],
             "twice"),
            ("token twice", good + [good[1].split()[0] + f" {len(good)}"],
             "a token that an earlier line has already"),
            ("a byte missing", [x for x in good if x.split()[1] != "7"],
             "past the"),
            ("rank past the end", good[:-1] + [good[-1].split()[0] + " 99999"], "is past the"),
            ("empty line", good[:2] + [""] + good[2:], "line 3: empty line"),
        ]
        for name, lines, want in cases:
            path = os.path.join(tmp, "bad.tiktoken")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            p, _ = run(tool, path, pattern_path, [b"x"], tmp)
            if p.returncode == 0 or want not in p.stderr or "bad.tiktoken" not in p.stderr:
                sys.exit(f"bpe_reference: {name}: expected a refusal with {want!r}, got "
                         f"exit {p.returncode}: {p.stderr!r}")
        # 255 single bytes: one is missing, said by its value
        lines = [x for x in good if not (x.split()[0] == "QQ==")]  # the byte "A"
        renum = [f"{x.split()[0]} {i}" for i, x in enumerate(lines)]
        path = os.path.join(tmp, "bad.tiktoken")
        with open(path, "w") as f:
            f.write("\n".join(renum) + "\n")
        p, _ = run(tool, path, pattern_path, [b"x"], tmp)
        if p.returncode == 0 or "no token for the byte 0x41" not in p.stderr:
            sys.exit(f"bpe_reference: a missing byte token: exit {p.returncode}: {p.stderr!r}")
        with open(pattern_path, "w") as f:
            f.write("(unclosed")
        p, _ = run(tool, ranks_path, pattern_path, [b"x"], tmp)
        if p.returncode == 0 or "tokenizer pattern: " not in p.stderr:
            sys.exit(f"bpe_reference: a bad pattern: exit {p.returncode}: {p.stderr!r}")
        print(f"bpe_reference: {len(cases) + 2} bad rank files and patterns refused by name")
        hf_refusals(tool, ranks, tmp)


def hf_json(ranks, **over):
    """A tokenizer.json of the trained vocabulary (byte-level strings)."""
    alphabet, nxt = {}, 256
    for b in range(256):
        printable = 0x21 <= b <= 0x7e or 0xa1 <= b <= 0xac or b >= 0xae
        alphabet[b] = chr(b if printable else nxt)
        nxt += not printable
    chars = lambda t: "".join(alphabet[x] for x in t)
    vocab = {chars(t): r for t, r in ranks.items()}
    merges = []
    for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        for i in range(1, len(t)):
            if t[:i] in ranks and t[i:] in ranks:
                merges.append(f"{chars(t[:i])} {chars(t[i:])}")
                break
    doc = {"normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "model": {"type": "BPE", "vocab": vocab, "merges": merges, "dropout": None},
           "added_tokens": [{"id": len(ranks), "content": "<|eot|>", "special": True}]}
    for k, v in over.items():
        if k.startswith("model_"):
            doc["model"][k[6:]] = v
        else:
            doc[k] = v
    return doc


def hf_refusals(tool, ranks, tmp):
    """tokenizer.json files dpp must refuse, each with the part named."""
    import json
    good = hf_json(ranks)
    no_byte = hf_json(ranks)
    del no_byte["model"]["vocab"]["A"]
    bad_merge = hf_json(ranks)
    bad_merge["model"]["merges"].append("A zzz")
    cases = [
        ("not JSON", "{\"model\": ", "not JSON at line 1"),
        ("WordPiece", hf_json(ranks, model_type="WordPiece"), "model type WordPiece"),
        ("byte_fallback", hf_json(ranks, model_byte_fallback=True), "byte_fallback"),
        ("dropout", hf_json(ranks, model_dropout=0.1), "dropout"),
        ("suffix", hf_json(ranks, model_end_of_word_suffix="</w>"), "end_of_word_suffix"),
        ("NFC", hf_json(ranks, normalizer={"type": "NFC"}), "normalizer NFC"),
        ("Whitespace", hf_json(ranks, pre_tokenizer={"type": "Whitespace"}),
         "pre_tokenizer Whitespace"),
        ("Removed", hf_json(ranks, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed"},
            {"type": "ByteLevel", "use_regex": False}]}), "behavior Removed"),
        ("two splits", hf_json(ranks, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": True}]}), "two splitting steps"),
        ("no byte A", no_byte, "no token for the byte 0x41"),
        ("merge of no token", bad_merge, "\"zzz\" is not a token of the vocab"),
        ("bad regex", hf_json(ranks, pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": False}]}), "tokenizer pattern: "),
    ]
    path = os.path.join(tmp, "tokenizer.json")
    for name, doc, want in [("good", good, None)] + cases:
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        p, _ = run(tool, path, None, [b"Hello world"], tmp)
        if want is None:
            if p.returncode != 0:
                sys.exit(f"bpe_reference: the good tokenizer.json was refused: {p.stderr!r}")
            continue
        if p.returncode == 0 or want not in p.stderr or "tokenizer.json" not in p.stderr:
            sys.exit(f"bpe_reference: tokenizer.json {name}: expected a refusal with {want!r}, "
                     f"got exit {p.returncode}: {p.stderr!r}")
    print(f"bpe_reference: {len(cases)} bad tokenizer.json files refused by name")


if __name__ == "__main__":
    main()
