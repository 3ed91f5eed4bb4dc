#!/usr/bin/env bash
# dpp's SentencePiece encoder (src/text/spm.c, through tokenize_ids)
# against libsentencepiece (Debian's python3-sentencepiece): four models
# trained here by its trainer on a seeded corpus (tests/text/spm_ref.py:
# Unigram and BPE with nmt_nfkc, byte fallback and a user-defined symbol;
# Unigram with identity normalization and spaces kept; BPE with nfkc_cf and
# no dummy prefix) give the same ids, id for id, for every document of
# another draw of the corpus, not-UTF-8 ones included, and long ones that
# dpp encodes a stretch at a time. Usage:
# sentencepiece.sh TOKENIZE_IDS SOURCE_DIR.
set -euo pipefail
tool=${1:?usage: sentencepiece.sh TOKENIZE_IDS SOURCE_DIR}
src=${2:?usage: sentencepiece.sh TOKENIZE_IDS SOURCE_DIR}
/usr/bin/python3 -c 'import sentencepiece' 2>/dev/null || {
    echo "sentencepiece: no python3-sentencepiece (scripts/install-deps.sh installs it)" >&2
    exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-spm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$src/tests/text/spm_ref.py" "$tmp" 7 long
for name in unigram bpe unigram_identity bpe_nfkc_cf; do
    "$tool" "$tmp/$name.model" spm "$tmp/corpus.bin" "$tmp/$name.dpp"
    /usr/bin/python3 "$src/tests/text/compare_ids.py" "$tmp/$name.expected" "$tmp/$name.dpp" \
        "$tmp/corpus.bin" "sentencepiece: $name"
done
