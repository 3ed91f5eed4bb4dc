#!/usr/bin/env bash
# bench/compression.sh: compression "auto" on links of several speeds. A
# master and one worker (one thread) in one network namespace, the trainer
# (`dppctl read`) in another, joined by a veth pair whose worker side tc
# (tbf) limits to each RATE in turn. Per rate it reads the same session spec
# with "compression": "off", "zstd" and "auto" and prints rows/s of each, and
# what auto decided (the worker's compression_auto log lines for that
# session: the link it measured, its make and zstd MB/s, zstd's ratio).
# Usage: bench/compression.sh BUILD_DIR [ROWS (default 200000) [RATES
# (default "100mbit 1gbit none")]]. Needs root (network namespaces, tc).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
if (($# < 1)) || [[ $1 == -h || $1 == --help ]]; then
    echo "usage: $0 BUILD_DIR [ROWS [RATES]]   (ROWS default 200000, RATES default \"100mbit 1gbit none\")" >&2
    exit 2
fi
rows=${2:-200000}
rates=${3:-100mbit 1gbit none}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-info}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir compression "$1"
dpp_setup compression
((EUID == 0)) || dpp_fail "network namespaces and tc need root"
command -v tc >/dev/null || dpp_fail "tc(8) is not installed (iproute2)"

tag=dppz$$
ip netns add "${tag}w" || dpp_fail "cannot create network namespaces here"
dpp_on_cleanup "ip netns del ${tag}w 2>/dev/null; ip netns del ${tag}c 2>/dev/null"
ip netns add "${tag}c"
ip link add "v${tag}" netns "${tag}w" type veth peer name "v${tag}c" netns "${tag}c"
ip -n "${tag}w" addr add 10.78.0.1/24 dev "v${tag}"
ip -n "${tag}c" addr add 10.78.0.2/24 dev "v${tag}c"
for ns in w c; do
    ip -n "$tag$ns" link set "v${tag}$([[ $ns == c ]] && echo c)" up
    ip -n "$tag$ns" link set lo up
done

root=$DPP_TMP/root
dpp_gen --rows "$rows" --shards 4 --partitions 2 --seed 1 --out "$root/criteo" >/dev/null
tok=$DPP_TMP/token
head -c 32 /dev/urandom | base64 >"$tok"
chmod 600 "$tok"
mkdir -p "$DPP_TMP/state"
dpp_start_in_netns master "${tag}w" "$DPP_MASTER_BIN" --listen 10.78.0.1:7070 --data-root "$root" \
    --state-dir "$DPP_TMP/state" --token-file "$tok"
dpp_wait_log master master_listening
dpp_start_in_netns worker "${tag}w" "$DPP_WORKER_BIN" --master 10.78.0.1:7070 --listen 10.78.0.1:0 --threads 1 \
    --token-file "$tok" --data-root "$root"
dpp_wait_log worker worker_registered
ctl() { ip netns exec "${tag}c" "$DPPCTL" --master 10.78.0.1:7070 --token-file "$tok" "$@"; }

printf '%-8s %-6s %10s %8s  %s\n' rate mode rows/s seconds "auto's decisions (worker log)" >"$DPP_TMP/table"
for rate in $rates; do
    tc -n "${tag}w" qdisc del dev "v${tag}" root 2>/dev/null || true
    if [[ $rate != none ]]; then
        tc -n "${tag}w" qdisc add dev "v${tag}" root tbf rate "$rate" burst 256kb latency 100ms ||
            dpp_fail "tc could not shape the link to $rate"
    fi
    for mode in off zstd auto; do
        spec=$DPP_TMP/$mode.json
        sed "s/\"batch_size\": 4096,/\"batch_size\": 4096, \"compression\": \"$mode\",/" \
            "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"
        session=$(ctl submit "$spec" | tail -n 1)
        t0=$(date +%s%N)
        ctl read "$session" --output json >"$DPP_TMP/read.jsonl" ||
            dpp_fail "dppctl read $session failed at $rate"
        t1=$(date +%s%N)
        got=$(sed -n 's/.*"rows":\([0-9]*\).*/\1/p' "$DPP_TMP/read.jsonl" | head -n 1)
        ((got == rows)) || dpp_fail "read $got rows of $rows at $rate ($mode)"
        decided=$(grep "compression_auto session=$session" "$DPP_TMP/worker.log" |
            sed 's/.* compress=/compress=/' | tr '\n' ';' || true)
        awk -v r="$rate" -v m="$mode" -v n="$rows" -v ns=$((t1 - t0)) -v d="${decided:--}" \
            'BEGIN { printf "%-8s %-6s %10.0f %8.2f  %s\n", r, m, n / (ns / 1e9), ns / 1e9, d }' \
            >>"$DPP_TMP/table"
    done
done
printf '\ncompression: %d rows of examples/criteo.json per read, 1 worker (1 thread), trainer across a veth pair\n' "$rows"
cat "$DPP_TMP/table"
