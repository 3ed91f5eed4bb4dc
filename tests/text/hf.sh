#!/usr/bin/env bash
# dpp's tokenizer on Hugging Face tokenizer.json files (src/text/hf.c,
# through tokenize_ids) against the npm `@huggingface/tokenizers` package
# (its own JS): GPT-2's model with ByteLevel's regex and as a Split, a
# Llama 3 layout on cl100k_base's ranks (Split, ByteLevel, ignore_merges),
# and a small model whose merge lines are out of id order with
# add_prefix_space (tests/text/hf_ref.mjs). The same ids, id for id, for
# every document of the seeded corpus. Usage: hf.sh TOKENIZE_IDS SOURCE_DIR.
# Exit 77 (not run) without the packages in the npm cache.
set -euo pipefail
tool=${1:?usage: hf.sh TOKENIZE_IDS SOURCE_DIR}
src=${2:?usage: hf.sh TOKENIZE_IDS SOURCE_DIR}
cache=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}
if ! command -v node >/dev/null || [ ! -f "$cache/node_modules/tiktoken/package.json" ] ||
    [ ! -f "$cache/node_modules/@huggingface/tokenizers/package.json" ]; then
    echo "hf: no npm @huggingface/tokenizers and tiktoken in $cache" \
        "(scripts/install-npm-tools.sh installs them when the registry answers): not run" >&2
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-hf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
node "$src/tests/text/hf_ref.mjs" "$cache/node_modules" "$tmp" 7
for name in gpt2 gpt2_split split pairs; do
    "$tool" "$tmp/$name.json" hf "$tmp/corpus.bin" "$tmp/$name.dpp"
    python3 "$src/tests/text/compare_ids.py" "$tmp/$name.expected" "$tmp/$name.dpp" \
        "$tmp/corpus.bin" "hf: $name"
done
