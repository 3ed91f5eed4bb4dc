# SPDX-License-Identifier: Apache-2.0
"""The ids of dpp and of a reference, document by document (tests/text/).

compare_ids.py EXPECTED GOT CORPUS LABEL: EXPECTED and GOT hold one line of
ids per document of CORPUS (uint32 LE length, bytes). Prints the first
differences with the document's bytes; exits 1 when any document differs.
"""
import struct
import sys


def main():
    expected, got, corpus_path, label = sys.argv[1:5]
    want = open(expected).read().split("\n")
    have = open(got).read().split("\n")
    corpus = open(corpus_path, "rb").read()
    docs, at = [], 0
    while at < len(corpus):
        (n,) = struct.unpack_from("<I", corpus, at)
        docs.append(corpus[at + 4:at + 4 + n])
        at += 4 + n
    bad = tokens = 0
    for i, doc in enumerate(docs):
        w, g = want[i].split(), have[i].split()
        tokens += len(w)
        if w != g:
            bad += 1
            if bad <= 3:
                k = next((j for j in range(min(len(w), len(g))) if w[j] != g[j]),
                         min(len(w), len(g)))
                print(f"{label}: document {i} differs at id {k}: reference "
                      f"{w[max(0, k - 3):k + 4]}, dpp {g[max(0, k - 3):k + 4]}; "
                      f"document bytes {doc[:200]!r}", file=sys.stderr)
    if bad:
        sys.exit(f"{label}: {bad} of {len(docs)} documents differ")
    print(f"{label}: {len(docs)} documents, {tokens} ids, all equal to the reference's")


if __name__ == "__main__":
    main()
