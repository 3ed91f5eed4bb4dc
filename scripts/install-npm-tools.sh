#!/usr/bin/env bash
# Installs the npm packages the tests use as independent references into a
# cache folder outside the tree ($DPP_NPM_CACHE, default $HOME/.cache/dpp-npm):
# DuckDB's Node API (Parquet conformance, sums of generated tables) and
# hyparquet (a second Parquet reader for dpp-gen's files, gen_check.sh),
# tiktoken (OpenAI's tokenizer, WASM: the reference of tests/text/tiktoken.sh),
# @huggingface/tokenizers (Hugging Face's, in JS: tests/text/hf.sh) and
# s3rver (an S3 server on loopback: tests/integration/s3.sh).
#
# Idempotent: when the pinned version is already there it touches no network.
# When the registry cannot be reached it says so on stderr and exits 0: the
# tests then fall back to the expectations committed under tests/data/.
# Several installs into the same cache may run at once (a lock serialises them).
set -euo pipefail

# Pinned: tests/data/parquet-testing/expected.jsonl was produced by this version
# (see tests/parquet/regen_expected.sh). Change both together.
DUCKDB_NODE_API_VERSION="1.5.6-r.1"
PACKAGES=(
    "@duckdb/node-api@$DUCKDB_NODE_API_VERSION"
    "hyparquet@1.33.0"
    "hyparquet-compressors@1.1.2"
    "tiktoken@1.0.22"
    "@huggingface/tokenizers@0.2.0"
    "s3rver@3.7.1"
)

cache="${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}"

installed_version() { # NAME
    # Read with sed, not node: the check must work before anything else does.
    local pkg_json="$cache/node_modules/$1/package.json"
    [ -f "$pkg_json" ] || return 0
    sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg_json" | head -n 1
}

# The native binding is a separate package; a half-finished install can leave
# node-api without it, so check that it loads, not only that it is present.
usable() {
    local spec
    for spec in "${PACKAGES[@]}"; do
        [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || return 1
    done
    command -v node >/dev/null || return 1
    (cd "$cache" && node -e 'require("@duckdb/node-api")' >/dev/null 2>&1)
}

if usable; then
    exit 0
fi

if ! command -v npm >/dev/null; then
    echo "install-npm-tools: npm not found; Parquet tests will use the committed expectations" >&2
    exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.install.lock"
if command -v flock >/dev/null; then
    flock 9
fi
# Someone else may have finished the install while we waited for the lock.
if usable; then
    exit 0
fi

echo "install-npm-tools: installing ${PACKAGES[*]} into $cache" >&2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
rc=0
timeout 150 npm install --no-audit --no-fund --save-exact --fetch-retries=1 --fetch-timeout=60000 \
    --prefix "$cache" "${PACKAGES[@]}" >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
    # 124: timeout(1) ended it, which here means a registry that never answers.
    unreachable='ENOTFOUND|EAI_AGAIN|ECONN(REFUSED|RESET)|ETIMEDOUT|network|fetch failed|ERR_SOCKET'
    if [ "$rc" -eq 124 ] || grep -qiE "$unreachable" "$log"; then
        echo "install-npm-tools: the npm registry cannot be reached;" \
            "Parquet tests will use the committed expectations" >&2
        tail -n 5 "$log" >&2
        exit 0
    fi
    echo "install-npm-tools: npm install failed:" >&2
    cat "$log" >&2
    exit 1
fi
if ! usable; then
    echo "install-npm-tools: ${PACKAGES[*]} installed, but a version differs" \
        "or DuckDB does not load" >&2
    exit 1
fi
echo "install-npm-tools: ${PACKAGES[*]} ready" >&2
