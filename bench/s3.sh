#!/usr/bin/env bash
# bench/s3.sh BUILD_DIR [ROWS [SHARDS [FILES]]]: reading a TFRecord table from an
# S3-compatible store on loopback (s3rver, as the tests start it), per
# CPU-second of the reader, one after the other in one run:
#   - awscli: `aws s3 cp --recursive` of the table's objects to local disk
#     (CPU of aws: /usr/bin/time);
#   - dpp-s3cat: dpp's S3 client alone, `get` of every object in 512 KiB
#     ranged GETs, 4 in flight (a worker reader's settings);
#   - worker: a session of examples/criteo.json over s3:// read with dppctl:
#     the worker's CPU (/proc/PID/stat) for GETs, CRCs, decoding, transforms
#     and sending, so its bytes per CPU-second are a floor of its reading's.
# Bytes are the table's (every object once); each figure is the median of
# DPP_S3_BENCH_ROUNDS rounds (3), the three readers taking turns. s3rver's
# own CPU is not counted for anyone. Then bench/ttfb.sh's s3 mode: the time
# to the first batch of a Parquet table of FILES objects (10,000). Needs
# Debian's aws (apt-get install awscli; /usr/bin/aws is preferred to
# another on PATH) and python3-boto3. Builds nothing. A benchmark: it prints
# figures and fails only when a read fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}
build=${1:?usage: bench/s3.sh BUILD_DIR [ROWS [SHARDS [FILES]]]}
rows=${2:-300000}
shards=${3:-4}
files=${4:-10000}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir s3bench "$build"
dpp_setup s3bench
aws=/usr/bin/aws
[[ -x $aws ]] || aws=$(command -v aws) || dpp_fail "no aws: apt-get install awscli"
echo "s3: $("$aws" --version 2>&1)"
root=$DPP_TMP/root
dpp_gen --rows "$rows" --shards "$shards" --partitions 1 --seed 3 --out "$root/criteo" >/dev/null
bytes=$(find "$root/criteo" -type f -name '*.tfrecord' -printf '%s\n' | awk '{s += $1} END {print s}')
dpp_start_s3
export AWS_ENDPOINT_URL=http://$DPP_S3_STORE # past the checking proxy: its CPU is no store's
dpp_s3_put bench "$root/criteo" t/criteo
mb() { awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}'; }
per_cpu() { awk -v b="$bytes" -v c="$1" 'BEGIN {printf "%.1f MiB per CPU-s", b / 1048576 / c}'; }
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in ticks
hz=$(getconf CLK_TCK)

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
rounds=${DPP_S3_BENCH_ROUNDS:-3}
aws_cpus=() aws_walls=() cat_cpus=() cat_walls=() w_cpus=() w_walls=()
dpp_start_master --data-root s3://bench/t
dpp_start_worker --threads 2 --data-root s3://bench/t
worker=$(dpp_pid_of worker-0)
sed 's|"table": "criteo"|"table": "s3://bench/t/criteo"|' "$DPP_SOURCE_DIR/examples/criteo.json" >"$DPP_TMP/spec.json"
keys=$(cd "$root/criteo" && find . -type f -name '*.tfrecord' | sed 's|^\./||')
for _ in $(seq 1 "$rounds"); do
    # awscli
    rm -rf "$DPP_TMP/awsout"
    read -r wall user sys < <(/usr/bin/time -f '%e %U %S' "$aws" s3 cp --recursive --quiet \
        --endpoint-url "$AWS_ENDPOINT_URL" s3://bench/t/criteo "$DPP_TMP/awsout" 2>&1 >/dev/null | tail -1)
    aws_walls+=("$wall")
    aws_cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')")
    # dpp's client alone: one timed shell around the GETs of every object
    read -r wall user sys < <(/usr/bin/time -f '%e %U %S' bash -c '
        for k in $2; do "$1" get "s3://bench/t/criteo/$k" --chunk 524288 --depth 4 >/dev/null || exit 1; done' \
        _ "$DPP_BIN_DIR/tests/integration/dpp-s3cat" "$keys" 2>&1 >/dev/null | tail -1)
    cat_walls+=("$wall")
    cat_cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')")
    # a worker, end to end
    c0=$(cpu_of "$worker")
    start=$(date +%s%N)
    dpp_submit "$DPP_TMP/spec.json"
    dpp_read "$DPP_SESSION" "$DPP_TMP/read.json"
    w_walls+=("$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')")
    w_cpus+=("$(awk -v a="$c0" -v b="$(cpu_of "$worker")" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}')")
    got=$(sed -n 's/.*"rows":\([0-9]*\).*/\1/p' "$DPP_TMP/read.json" | head -1)
    [[ $got == "$rows" ]] || dpp_fail "the session delivered ${got:-no} rows of $rows"
done
line() { # NAME WALLS CPUS
    local wall cpu
    wall=$(tr ' ' '\n' <<<"$2" | median)
    cpu=$(tr ' ' '\n' <<<"$3" | median)
    echo "s3: $1: $(mb) MiB in ${wall} s wall, ${cpu} CPU-s: $(per_cpu "$cpu") (medians of $rounds)"
}
line "awscli cp" "${aws_walls[*]}" "${aws_cpus[*]}"
line "dpp-s3cat get" "${cat_walls[*]}" "${cat_cpus[*]}"
line "worker (2 threads), session read of $rows rows" "${w_walls[*]}" "${w_cpus[*]}"

# time to the first batch of a table of many objects, in the same run
"$here/ttfb.sh" "$build" parquet "$files" s3
