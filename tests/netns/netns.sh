#!/usr/bin/env bash
# Multi-host: the master, two workers and a trainer each in its own network
# namespace, joined by veth pairs to a bridge in a fifth one (10.77.N.0/24):
# nothing is on loopback, so the daemons refuse to start without a token
# (shown), then run with one; the session is read from the trainer's
# namespace and its sums are checked against dpp-refsum. Then compression
# "auto": no worker compresses over the fast bridge; with the trainer's link
# cut to 40 Mbit/s (tc tbf) the workers measure it and compress, and the
# sums still match. Needs root (exits 77 when namespaces cannot be made).
set -euo pipefail
# shellcheck source=../integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"
dpp_setup netns "$DPP_REFSUM"

command -v ip >/dev/null || dpp_skip "ip(8) is not installed"
command -v tc >/dev/null || dpp_skip "tc(8) is not installed"
((EUID == 0)) || dpp_skip "network namespaces need root"
tag=dpp$$
net=10.77.$(($$ % 200 + 20))
if ! ip netns add "${tag}s" 2>/dev/null; then
    dpp_skip "cannot create network namespaces here"
fi
dpp_on_cleanup "for n in s m w0 w1 c; do ip netns del ${tag}\$n 2>/dev/null; done"
ip -n "${tag}s" link add br0 type bridge || dpp_skip "no bridge support"
ip -n "${tag}s" link set br0 up
i=1
for n in m w0 w1 c; do
    ns=$tag$n
    ip netns add "$ns"
    ip link add "v$tag$n" type veth peer name eth0 netns "$ns"
    ip link set "v$tag$n" netns "${tag}s"
    ip -n "${tag}s" link set "v$tag$n" master br0 up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    eval "ip_$n=$net.$i"
    i=$((i + 1))
done

root=$DPP_TMP/root
dpp_gen --rows 30000 --shards 4 --partitions 2 --seed 99 --out "$root/criteo"
tok=$DPP_TMP/token
head -c 32 /dev/urandom | base64 >"$tok"
chmod 600 "$tok"
spec=$DPP_TMP/spec.json
sed 's/"batch_size": 4096/"batch_size": 1500, "epochs": 2/; s/"epochs": 1,//' \
    "$DPP_SOURCE_DIR/examples/criteo.json" >"$spec"

dpp_step "without a token, daemons refuse the non-loopback address"
rc=0
ip netns exec "${tag}m" "$DPP_MASTER_BIN" --listen "$ip_m:7070" --data-root "$root" \
    --state-dir "$DPP_TMP/x" 2>"$DPP_TMP/refused" || rc=$?
((rc == 2)) && grep -q "not a loopback address" "$DPP_TMP/refused" ||
    dpp_fail "the master listened on $ip_m without a token (exit $rc)"

dpp_step "master, two workers and a trainer in four namespaces, with a token"
mkdir -p "$DPP_TMP/state"
dpp_start_in_netns master "${tag}m" "$DPP_MASTER_BIN" --listen "$ip_m:7070" --data-root "$root" \
    --state-dir "$DPP_TMP/state" --token-file "$tok"
dpp_wait_log master master_listening
dpp_start_in_netns worker-0 "${tag}w0" "$DPP_WORKER_BIN" --master "$ip_m:7070" --listen "$ip_w0:0" \
    --threads 1 --token-file "$tok" --data-root "$root"
dpp_start_in_netns worker-1 "${tag}w1" "$DPP_WORKER_BIN" --master "$ip_m:7070" --listen "$ip_w1:0" \
    --threads 1 --token-file "$tok" --data-root "$root"
dpp_wait_log worker-0 worker_registered
dpp_wait_log worker-1 worker_registered
ctl() { ip netns exec "${tag}c" timeout -k 5 120 "$DPPCTL" --master "$ip_m:7070" --token-file "$tok" "$@"; }
ctl workers | tee "$DPP_TMP/workers"
grep -q "$ip_w0:" "$DPP_TMP/workers" && grep -q "$ip_w1:" "$DPP_TMP/workers" ||
    dpp_fail "the master does not list both workers at their namespace addresses"
session=$(ctl submit "$spec" | tail -n 1)
ctl read "$session" --output json >"$DPP_TMP/read.jsonl"
cat "$DPP_TMP/read.jsonl"
dpp_refsum_check "$spec" "$root/criteo" "$DPP_TMP/read.jsonl"
rc=0
ip netns exec "${tag}c" timeout 20 "$DPPCTL" --master "$ip_m:7070" list 2>"$DPP_TMP/notoken" || rc=$?
((rc == 1)) && grep -q "requires the cluster token" "$DPP_TMP/notoken" ||
    dpp_fail "a trainer without the token was served across hosts"
# Compression "auto" from the link as measured: the trainer's fast link
# above kept up (or its reader was the limit), so no worker compressed; the
# same link cut to 40 Mbit/s by tc falls behind, and the workers measure it
# and compress. The sums are the same either way.
dpp_step "compression auto: raw over the bridge, zstd once the trainer's link is cut to 40 Mbit/s"
if grep -h "compression_auto" "$DPP_TMP"/worker-*.log | grep -q "compress=zstd"; then
    grep -h "compression_auto" "$DPP_TMP"/worker-*.log >&2
    dpp_fail "a worker compressed for a link that was not behind"
fi
ip netns exec "${tag}s" tc qdisc add dev "v${tag}c" root tbf rate 40mbit burst 64kb latency 100ms ||
    dpp_fail "tc could not shape the trainer's link (tbf)"
session=$(ctl submit "$spec" | tail -n 1)
ctl read "$session" --output json >"$DPP_TMP/read2.jsonl"
dpp_refsum_check "$spec" "$root/criteo" "$DPP_TMP/read2.jsonl"
grep -h "compression_auto" "$DPP_TMP"/worker-*.log | grep "compress=zstd" >"$DPP_TMP/auto.txt" ||
    dpp_fail "no worker compressed for a trainer behind a 40 Mbit/s link: $(grep -h compression_auto "$DPP_TMP"/worker-*.log)"
dpp_log "compression auto over 40 Mbit/s: $(head -n 1 "$DPP_TMP/auto.txt")"
dpp_log "PASS: a 2-epoch session over 4 namespaces ($net.0/24) matched dpp-refsum"
