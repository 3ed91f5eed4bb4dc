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
    python3 "$src/tests/text/compare_ids.py" "$tmp/$enc.expected" "$tmp/$enc.dpp" "$tmp/corpus.bin" \
        "tiktoken: $enc"
done
