#!/usr/bin/env bash
# dpp's tokenizer (src/text/bpe.c, through tokenize_ids) against OpenAI's
# (the npm `tiktoken` package, WASM of the Rust core) on cl100k_base and
# o200k_base: the same ids, id for id, for every document of a seeded corpus
# of mixed scripts, emoji, digits, whitespace runs, long runs and invalid
# UTF-8 (tests/text/tiktoken_ref.mjs). The ranks come from the package too.
# Usage: tiktoken.sh TOKENIZE_IDS SOURCE_DIR. Exit 77 (not run) when the
# package is not in the npm cache (scripts/install-npm-tools.sh could not
# reach the registry).
set -euo pipefail
tool=${1:?usage: tiktoken.sh TOKENIZE_IDS SOURCE_DIR}
src=${2:?usage: tiktoken.sh TOKENIZE_IDS SOURCE_DIR}
cache=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}
if ! command -v node >/dev/null || [ ! -f "$cache/node_modules/tiktoken/package.json" ]; then
    echo "tiktoken: no npm tiktoken package in $cache (scripts/install-npm-tools.sh installs it" \
        "when the registry answers): not run" >&2
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-tiktoken.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
node "$src/tests/text/tiktoken_ref.mjs" "$cache/node_modules" "$tmp" 7
for enc in cl100k_base o200k_base; do
    "$tool" "$tmp/$enc.tiktoken" "$enc" "$tmp/corpus.bin" "$tmp/$enc.dpp"
    python3 - "$tmp/$enc.expected" "$tmp/$enc.dpp" "$tmp/corpus.bin" "$enc" <<'PY'
import struct, sys
want = open(sys.argv[1]).read().split("\n")
got = open(sys.argv[2]).read().split("\n")
corpus = open(sys.argv[3], "rb").read()
docs, at = [], 0
while at < len(corpus):
    (n,) = struct.unpack_from("<I", corpus, at)
    docs.append(corpus[at + 4:at + 4 + n])
    at += 4 + n
bad = 0
tokens = 0
for i, doc in enumerate(docs):
    w, g = want[i].split(), got[i].split()
    tokens += len(w)
    if w != g:
        bad += 1
        if bad <= 3:
            k = next((j for j in range(min(len(w), len(g))) if w[j] != g[j]), min(len(w), len(g)))
            print(f"tiktoken: {sys.argv[4]}: document {i} differs at id {k}: "
                  f"tiktoken {w[max(0, k - 3):k + 4]}, dpp {g[max(0, k - 3):k + 4]}; "
                  f"document bytes {doc[:200]!r}", file=sys.stderr)
if bad:
    sys.exit(f"tiktoken: {sys.argv[4]}: {bad} of {len(docs)} documents differ")
print(f"tiktoken: {sys.argv[4]}: {len(docs)} documents, {tokens} ids, all equal to tiktoken's")
PY
done
