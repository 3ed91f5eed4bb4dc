#!/usr/bin/env bash
# Runs the fuzz targets built in BUILD_DIR (make fuzz-build) for SECONDS each,
# one after the other, over their seed corpora. New inputs are kept in
# BUILD_DIR/fuzz-corpus/<target>/ (scratch, never in git; reused by the next
# run), crash files land in BUILD_DIR/fuzz-crashes/<target>/ and each
# target's output in BUILD_DIR/fuzz-logs/<target>.log.
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]   (exit 1 on a crash)
set -uo pipefail

build=${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(frame spec tfrecord tfindex example block parquet_meta parquet_page
                                     parquet_file cache_entry)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "${targets[@]}"; do
    bin=$build/tests/fuzz/fuzz_$t
    if [ ! -x "$bin" ]; then
        echo "fuzz: $bin is missing (make fuzz-build)" >&2
        exit 2
    fi
    scratch=$build/fuzz-corpus/$t
    crashes=$build/fuzz-crashes/$t
    log=$build/fuzz-logs/$t.log
    mkdir -p "$scratch" "$crashes" "$(dirname "$log")"
    stamp=$(mktemp)
    args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -error_exitcode=1
          -print_final_stats=1 -artifact_prefix="$crashes/")
    [ -f "$src/dict/$t.dict" ] && args+=(-dict="$src/dict/$t.dict")
    before=$(find "$scratch" -type f | wc -l)
    start=$(date +%s)
    "$bin" "${args[@]}" "$scratch" "$src/corpus/$t" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    after=$(find "$scratch" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        printf 'fuzz: %-12s ok    %3ss  %s runs  %s  corpus +%d (%s)\n' "$t" "$took" \
            "${execs:-?}" "${cov:-cov: ?}" $((after - before)) "$scratch"
    else
        failed+=("$t")
        printf 'fuzz: %-12s FAIL  %3ss  exit %d, log %s\n' "$t" "$took" "$rc" "$log"
        # The sanitizer's or the check's report, without libFuzzer's progress lines.
        grep -v -E '^#[0-9]+\s' "$log" | grep -A40 -m1 -E 'ERROR: |fuzz check failed|runtime error' |
            sed 's/^/    /'
        find "$crashes" -type f -newer "$stamp" | while read -r f; do
            echo "    crash file: $f"
            echo "    reproduce:  $bin $f"
        done
    fi
    rm -f "$stamp"
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]} (crash files under $build/fuzz-crashes/)" >&2
    exit 1
fi
echo "fuzz: all ${#targets[@]} targets ran ${seconds}s each without a crash"
