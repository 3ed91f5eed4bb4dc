#!/usr/bin/env bash
# bench/s3.sh BUILD_DIR [ROWS [SHARDS]]: reading a TFRecord table from an
# S3-compatible store on loopback (s3rver, as the tests start it), per
# CPU-second of the reader, one after the other in one run:
#   - awscli: `aws s3 cp --recursive` of the table's objects to local disk
#     (CPU of aws: /usr/bin/time);
#   - dpp-s3cat: dpp's S3 client alone, `get` of every object in 512 KiB
#     ranged GETs, 4 in flight (a worker reader's settings);
#   - worker: a session of examples/criteo.json over s3:// read with dppctl:
#     the worker's CPU (/proc/PID/stat) for GETs, CRCs, decoding, transforms
#     and sending, so its bytes per CPU-second are a floor of its reading's.
# Bytes are the table's (every object once). s3rver's own CPU is not
# counted for anyone. Needs aws (Debian: apt-get install awscli) and
# python3-boto3. Builds nothing. A benchmark: it prints figures and fails
# only when a read fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}
build=${1:?usage: bench/s3.sh BUILD_DIR [ROWS [SHARDS]]}
rows=${2:-300000}
shards=${3:-4}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir s3bench "$build"
dpp_setup s3bench
aws=$(command -v aws) || dpp_fail "no aws: apt-get install awscli"
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

# awscli
read -r wall user sys < <(/usr/bin/time -f '%e %U %S' "$aws" s3 cp --recursive --quiet \
    --endpoint-url "$AWS_ENDPOINT_URL" s3://bench/t/criteo "$DPP_TMP/awsout" 2>&1 >/dev/null | tail -1)
aws_cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')
echo "s3: awscli cp: $(mb) MiB in ${wall} s wall, ${aws_cpu} CPU-s: $(per_cpu "$aws_cpu")"

# dpp's client alone
s3cat=$DPP_BIN_DIR/tests/integration/dpp-s3cat
t_user=0
start=$(date +%s%N)
for k in $(cd "$root/criteo" && find . -type f -name '*.tfrecord' | sed 's|^\./||'); do
    c=$( { /usr/bin/time -f '%U %S' "$s3cat" get "s3://bench/t/criteo/$k" --chunk 524288 --depth 4 \
        >/dev/null; } 2>&1 | tail -1)
    t_user=$(awk -v t="$t_user" -v c="$c" 'BEGIN {split(c, a, " "); print t + a[1] + a[2]}')
done
wall=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
echo "s3: dpp-s3cat get: $(mb) MiB in ${wall} s wall, ${t_user} CPU-s: $(per_cpu "$t_user")"

# a worker, end to end
dpp_start_master --data-root s3://bench/t
dpp_start_worker --threads 2 --data-root s3://bench/t
worker=$(dpp_pid_of worker-0)
sed 's|"table": "criteo"|"table": "s3://bench/t/criteo"|' "$DPP_SOURCE_DIR/examples/criteo.json" >"$DPP_TMP/spec.json"
c0=$(cpu_of "$worker")
start=$(date +%s%N)
dpp_submit "$DPP_TMP/spec.json"
dpp_read "$DPP_SESSION" "$DPP_TMP/read.json"
wall=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}')
wcpu=$(awk -v a="$c0" -v b="$(cpu_of "$worker")" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}')
got=$(sed -n 's/.*"rows":\([0-9]*\).*/\1/p' "$DPP_TMP/read.json" | head -1)
[[ $got == "$rows" ]] || dpp_fail "the session delivered ${got:-no} rows of $rows"
echo "s3: worker (2 threads), session read: $(mb) MiB, $rows rows in ${wall} s wall, ${wcpu} CPU-s: $(per_cpu "$wcpu")"
