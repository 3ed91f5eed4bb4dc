#!/usr/bin/env bash
# bench/ttfb.sh BUILD_DIR [FORMAT [FILES [s3]]]: time to first batch of a
# table of many small files. Writes FILES files (default 10,000) of 2 rows
# each in FORMAT (tfrecord with .idx sidecars, or parquet, default); with
# s3 they are objects in a loopback s3rver (uploaded by boto3, not timed)
# read through --data-root s3://. Starts a master and two workers on
# loopback, submits a one-feature spec and starts bench_first_batch right
# after `dppctl submit` returns; prints submit's time, the time to the first
# batch (submit + the reader's wait) and to the last row, for a first
# session and for a second one over the same table. Planning reads every
# file's sidecar or footer (index tasks on the workers) unless the master
# knows it from an earlier session; the figure is what a user waits before
# training starts.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}
build=${1:?usage: bench/ttfb.sh BUILD_DIR [FORMAT [FILES [s3]]]}
format=${2:-parquet}
files=${3:-10000}
store=${4:-}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir ttfb "$build"
dpp_setup ttfb
# DPP_TTFB_TABLES=DIR keeps the generated tables there for the next run
# (writing 100,000 files takes longer than reading them)
root=${DPP_TTFB_TABLES:-$DPP_TMP}/$format-$files
extra=(--index)
[[ $format == parquet ]] && extra=(--format parquet)
if [[ ! -e $root/criteo/.complete ]]; then
    rm -rf "$root"
    "$DPP_GEN" --rows $((files * 2)) --shards "$files" --partitions 1 --seed 3 "${extra[@]}" \
        --out "$root/criteo" >/dev/null
    touch "$root/criteo/.complete"
fi
table=criteo
data_root=$root
if [[ $store == s3 ]]; then
    dpp_start_s3
    export AWS_ENDPOINT_URL=http://$DPP_S3_STORE # past the checking proxy: its CPU is no store's
    dpp_s3_put bench "$root/criteo" t/criteo
    table=s3://bench/t/criteo
    data_root=s3://bench/t
    # The store's own pace, for scale: every object by curl, 32 GETs in flight.
    if command -v curl >/dev/null; then
        (cd "$root/criteo" && find . -type f -name "*.$format" | sed 's|^\./||') |
            sed "s|.*|url = http://$DPP_S3_STORE/bench/t/criteo/&\\noutput = /dev/null|" >"$DPP_TMP/urls"
        t0=$(date +%s%N)
        curl -sS -Z --parallel-max 32 -K "$DPP_TMP/urls" || dpp_fail "curl could not GET the objects"
        echo "ttfb: the store: $(wc -l <"$DPP_TMP/urls" | awk '{print $1 / 2}') GETs by curl, 32 in flight," \
            "$((($(date +%s%N) - t0) / 1000000)) ms"
    fi
fi
dpp_start_master --data-root "$data_root"
dpp_start_worker --threads 2 --data-root "$data_root"
dpp_start_worker --threads 2 --data-root "$data_root"
cat >"$DPP_TMP/spec.json" <<JSON
{"table": "$table", "format": "$format", "batch_size": 256, "remainder": "keep",
 "features": {"dense": [{"name": "i1", "transforms": [{"op": "fill_missing", "value": 0}]}]},
 "label": {"name": "label"}}
JSON
# first_batch LABEL: submits the spec, reads the session whole, prints the times
first_batch() {
    local t0 t1 out submit_ms first_ms all_ms
    t0=$(date +%s%N)
    dpp_submit "$DPP_TMP/spec.json"
    t1=$(date +%s%N)
    out=$("$build/bench/bench_first_batch" "$DPP_MASTER_ADDR" "$DPP_SESSION")
    submit_ms=$(((t1 - t0) / 1000000))
    first_ms=$(sed -n 's/^first batch \([0-9]*\) ms.*/\1/p' <<<"$out")
    all_ms=$(sed -n 's/.* rows \([0-9]*\) ms$/\1/p' <<<"$out")
    echo "ttfb: $format, $files files${store:+ in $store}, $1: submit ${submit_ms} ms," \
        "first batch $((submit_ms + first_ms)) ms, all $((files * 2)) rows $((submit_ms + all_ms)) ms" \
        "after submit started"
}
first_batch "first session (every file indexed)"
# The master keeps file indexes by size and mtime (a file) or ETag (an
# object): a second session over the same table plans without index tasks.
first_batch "second session (indexes kept by the master)"
