#!/usr/bin/env bash
# dpp's tokenizer beside npm tiktoken, one core each, the same documents, in
# one run: bench/tokenize.sh [BUILD_DIR] [ENCODING] [SECONDS]. Needs the npm
# cache of scripts/install-npm-tools.sh (tiktoken).
set -euo pipefail
build=${1:-build}
enc=${2:-cl100k_base}
secs=${3:-5}
cache=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}
[ -f "$cache/node_modules/tiktoken/package.json" ] || {
    echo "tokenize.sh: no npm tiktoken in $cache; run scripts/install-npm-tools.sh" >&2
    exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-bench-tokenize.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
peer=$(taskset -c 0 node "$here/tokenize.mjs" "$cache/node_modules" "$enc" "$tmp" "$secs")
ours=$(taskset -c 0 "$build/bench/bench_tokenize" "$tmp/$enc.tiktoken" "$enc" "$tmp/corpus.bin" "$secs")
echo "$peer"
echo "$ours"
python3 - "$peer" "$ours" <<'PY'
import re, sys
mb = [float(re.search(r"([0-9.]+) MB/s", s).group(1)) for s in sys.argv[1:]]
print(f"ratio: dpp {mb[1] / mb[0]:.2f}x tiktoken per core")
PY
