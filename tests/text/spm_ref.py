# SPDX-License-Identifier: Apache-2.0
"""SentencePiece references for tests/text/sentencepiece.sh.

spm_ref.py OUT_DIR SEED [long]: writes a seeded corpus of documents (ASCII,
accents, CJK, emoji, whitespace runs, a user-defined symbol, characters NFKC
folds, a few byte strings that are not UTF-8) to OUT_DIR/corpus.bin (uint32 LE length, bytes) and, with Debian's
python3-sentencepiece (libsentencepiece's trainer and encoder), trains on
another draw of the same generator and writes the models and the ids they
give, one line per document:

  unigram  Unigram, nmt_nfkc, byte_fallback, user-defined symbol <sep>
  bpe      BPE, nmt_nfkc, byte_fallback, user-defined symbol <sep>
  unigram_identity  Unigram, identity normalization, no byte fallback,
                    spaces kept as written (remove_extra_whitespaces off)
  bpe_nfkc_cf  BPE, nfkc_cf (case folded), no dummy prefix

With "long", the corpus ends with a few long documents (tens to hundreds of
kilobytes: the short ones joined, CJK without spaces, whitespace and <sep>
runs), which dpp encodes a stretch at a time (src/text/spm.c).
"""
import os
import random
import struct
import sys

import sentencepiece as spm

WORDS = ("the data loader reads tables from object storage and trains models "
         "quickly while workers decode batches of features for every rank").split()
ACCENTED = "café naïve résumé über straße façade São Paulo Zürich crème brûlée".split()
CJK = ["数据", "预处理", "服务", "训练", "東京", "日本語", "한국어", "모델", "データ", "ｶﾀｶﾅ"]
EMOJI = ["🙂", "🚀", "👩‍💻", "🇫🇷", "✨", "🧪"]
FOLDS = ["ﬁ", "①", "Ⅻ", "ｆｕｌｌｗｉｄｔｈ", "½", "㎏", "Å", "ǆ", "\u00a0", "\u3000"]
SPACES = [" ", "  ", "\t", "   ", "\n", " \u3000 "]


def document(rng):
    parts = []
    for _ in range(rng.randint(1, 30)):
        r = rng.random()
        if r < 0.55:
            w = rng.choice(WORDS)
            parts.append(w.capitalize() if rng.random() < 0.2 else w)
        elif r < 0.68:
            parts.append(rng.choice(ACCENTED))
        elif r < 0.78:
            parts.append(rng.choice(CJK))
        elif r < 0.84:
            parts.append(rng.choice(EMOJI))
        elif r < 0.90:
            parts.append(rng.choice(FOLDS))
        elif r < 0.94:
            parts.append(str(rng.randint(0, 100000)))
        elif r < 0.97:
            parts.append("<sep>")
        else:
            parts.append("".join(chr(rng.randint(0x4E00, 0x4E7F)) for _ in range(rng.randint(1, 3))))
        parts.append(rng.choice(SPACES) if rng.random() < 0.2 else " ")
    text = "".join(parts)
    if rng.random() < 0.1:
        text = rng.choice(SPACES) + text
    return text


def main():
    out, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    train = os.path.join(out, "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        for _ in range(3000):
            f.write(document(rng).replace("\n", " ") + "\n")
    docs = [document(rng) for _ in range(1200)]
    docs += ["", " ", "   \t ", "<sep>", "<sep><sep>", "a<sep>b", "▁", "x▁y", "\u3000lead"]
    docs = [d.encode("utf-8") for d in docs]
    if len(sys.argv) > 3 and sys.argv[3] == "long":
        lrng = random.Random(seed + 1)
        joined = [document(lrng) for _ in range(400)]
        docs.append(" ".join(joined).encode("utf-8"))
        docs.append("".join(joined).encode("utf-8"))
        docs.append("".join(lrng.choice(CJK) for _ in range(20000)).encode("utf-8"))
        docs.append(("<sep>" * 3000 + "   " * 3000 + "ab" * 9000 + "\u3000" * 3000).encode("utf-8"))
        docs.append(b"\xff".join(d.encode("utf-8") for d in joined[:200]))
    # not UTF-8: each invalid byte is U+FFFD to libsentencepiece
    docs += [b"a\xffb\xc3", b"\xe2\x96", b"emoji \xf0\x9f\x99 cut", b"\xc0\xaf over",
             b"\xed\xa0\x80 surrogate", b"caf\xe9"]
    with open(os.path.join(out, "corpus.bin"), "wb") as f:
        for b in docs:
            f.write(struct.pack("<I", len(b)) + b)
    common = dict(input=train, vocab_size=1000, character_coverage=0.995, num_threads=1,
                  minloglevel=2, user_defined_symbols=["<sep>"])
    models = {
        "unigram": dict(model_type="unigram", byte_fallback=True),
        "bpe": dict(model_type="bpe", byte_fallback=True),
        "unigram_identity": dict(model_type="unigram", normalization_rule_name="identity",
                                 remove_extra_whitespaces=False),
        "bpe_nfkc_cf": dict(model_type="bpe", normalization_rule_name="nfkc_cf",
                            add_dummy_prefix=False),
    }
    for name, extra in models.items():
        prefix = os.path.join(out, name)
        spm.SentencePieceTrainer.train(model_prefix=prefix, **common, **extra)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        with open(prefix + ".expected", "w") as f:
            for d in docs:
                f.write(" ".join(map(str, sp.encode(d))) + "\n")


if __name__ == "__main__":
    main()
