#!/usr/bin/env bash
# bench/peers.sh BUILD_DIR [ROWS] [ROUNDS]: dpp's worker pipeline beside two
# readers a trainer could use instead, one thread each, the same TFRecord
# files and the same transforms (examples/criteo.json) (issue #17):
#   - dpp: bench_pipeline --table (read + CRC, decode, transform, blocks;
#     its "without compression" figure);
#   - C++: bench/peers/cxx_reader.cc on Debian's libprotobuf and protoc's
#     generated tensorflow::Example (CRCs verified, arena reused);
#   - PyTorch: bench/peers/torch_reader.py, an IterableDataset parsing with
#     the protobuf module's example_pb2 and a DataLoader (num_workers 0)
#     collating tensors (CRCs verified with crcmod's C extension).
# Generates a ROWS-row table (default 1,000,000) as bench_pipeline does
# (dpp-gen, 4 shards x 2 partitions, seed 1); with DPP_PEERS_WRITER=python
# bench/peers/py_writer.py writes it instead, as another team's Python
# pipeline would (numpy's draws, example_pb2, keys in a different order per
# record); DPP_PEERS_TABLE=DIR takes a TFRecord table that exists (ROWS is
# then ignored). Checks both peers' totals
# against dpp-refsum's (exit 1 on a difference), runs the three one after the
# other ROUNDS times (default 3), pinned to one core, and prints the medians
# and ratios. The PyTorch reader gets only the first DPP_PEERS_TORCH_FILES
# files (default 1 of the 8) because it is ~85x slower: compare rates.
# Installs the Debian packages it needs when missing; builds only the C++
# reader, into BUILD_DIR/bench/peers/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: bench/peers.sh BUILD_DIR [ROWS] [ROUNDS]}
[ -d "$build" ] || {
    echo "peers.sh: no build directory $build (build first: make build)" >&2
    exit 2
}
build=$(cd "$build" && pwd)
rows=${2:-1000000}
rounds=${3:-3}
torch_files=${DPP_PEERS_TORCH_FILES:-1}
cpu=${DPP_PEERS_CPU:-0}
python=${PYTHON:-/usr/bin/python3} # Debian's, which has python3-torch

for bin in dpp-gen bench/bench_pipeline tests/integration/dpp-refsum; do
    [ -x "$build/$bin" ] || {
        echo "peers.sh: no $build/$bin; build it first:" \
            "cmake --build $build --target bench_pipeline dpp-gen dpp-refsum" >&2
        exit 1
    }
done

# The Debian packages of the peers, when missing (as scripts/install-deps.sh).
packages=(libprotobuf-dev protobuf-compiler pkg-config g++ python3-protobuf python3-crcmod
    python3-torch python3-numpy)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "peers.sh: installing ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || {
            echo "peers.sh: need root to install ${missing[*]}" >&2
            exit 1
        }
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

out=$build/bench/peers
mkdir -p "$out"
if [ ! -x "$out/cxx_reader" ] || [ "$here/peers/cxx_reader.cc" -nt "$out/cxx_reader" ] ||
    [ "$here/peers/example.proto" -nt "$out/cxx_reader" ]; then
    echo "peers.sh: building $out/cxx_reader"
    protoc --proto_path="$here/peers" --cpp_out="$out" --python_out="$out" \
        "$here/peers/example.proto"
    # shellcheck disable=SC2046 # pkg-config's flags are words
    g++ -std=c++17 -O2 -Wall -Wextra -I"$out" -o "$out/cxx_reader" \
        "$here/peers/cxx_reader.cc" "$out/example.pb.cc" $(pkg-config --cflags --libs protobuf)
fi

pin=()
command -v taskset >/dev/null && [ -n "$cpu" ] && pin=(taskset -c "$cpu")

tmp=$(mktemp -d /tmp/dpp-bench-peers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${DPP_PEERS_TABLE:-}" ]; then
    table=$(cd "$DPP_PEERS_TABLE" && pwd)
elif [ "${DPP_PEERS_WRITER:-dpp-gen}" = python ]; then
    table=$tmp/criteo
    "$python" "$here/peers/py_writer.py" --rows "$rows" --out "$table" --proto-dir "$out" >/dev/null
elif [ "${DPP_PEERS_WRITER:-dpp-gen}" != dpp-gen ]; then
    echo "peers.sh: DPP_PEERS_WRITER=$DPP_PEERS_WRITER: expected dpp-gen or python" >&2
    exit 2
else
    table=$tmp/criteo
    "$build/dpp-gen" --rows "$rows" --shards 4 --partitions 2 --seed 1 --format tfrecord \
        --out "$table" >/dev/null
fi
# The PyTorch reader's table: the first files of the same table, hard links
# in the same layout, so that dpp-refsum can give its totals too.
mapfile -t files < <(find "$table" -name '*.tfrecord' | sort)
for f in "${files[@]:0:$torch_files}"; do
    rel=${f#"$table"/}
    mkdir -p "$tmp/torch/$(dirname "$rel")"
    ln "$f" "$tmp/torch/$rel" 2>/dev/null || cp "$f" "$tmp/torch/$rel"
done
spec=$here/../examples/criteo.json
refsum=$build/tests/integration/dpp-refsum
want_full=$("$refsum" --spec "$spec" --table "$table")
rows=$(head -1 <<<"$want_full" | sed 's/.*"rows":\([0-9]*\).*/\1/')
mb=$(du -bc "${files[@]}" | awk 'END { printf "%.1f", $1 / 1e6 }')
echo "table: $table, $rows rows, $mb MB of TFRecord in ${#files[@]} files;" \
    "PyTorch reads the first $torch_files"
want_torch=$("$refsum" --spec "$spec" --table "$tmp/torch")
cat "${files[@]}" >/dev/null # into the page cache

# check NAME EXPECTED ACTUAL: the totals lines agree (integers exactly,
# dense_sum within a relative 1e-9: a sum of 13 million floats in another
# order), or prints the difference and exits 1.
check() {
    "$python" - "$@" <<'PY' || exit 1
import json, sys
name, want, got = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
bad = []
for key, w in want.items():
    g = got.get(key)
    if key == "dense_sum":
        ok = isinstance(g, (int, float)) and abs(g - w) <= 1e-9 * max(abs(g), abs(w))
    else:
        ok = g == w
    if not ok:
        bad.append("%s = %s, dpp-refsum %s" % (key, g, w))
if bad:
    print("peers.sh: %s: totals differ from dpp-refsum's: %s" % (name, "; ".join(bad)))
    sys.exit(1)
PY
}

# rate LINE FIELD: the number before "rows/s" (1) or "rows per CPU-s" (2).
rate() {
    case $2 in
    1) sed -n 's/.*: \([0-9]*\) rows\/s;.*/\1/p' <<<"$1" ;;
    2) sed -n 's/.*: \([0-9]*\) rows per CPU-s$/\1/p' <<<"$1" ;;
    esac
}

dpp=() cxx=() cxx_cpu=() pt=() pt_cpu=() dpp_util=()
TIMEFORMAT='%R %U %S'
for ((r = 1; r <= rounds; r++)); do
    { time "${pin[@]}" "$build/bench/bench_pipeline" --table "$table" >"$tmp/dpp.out"; } \
        2>"$tmp/dpp.time"
    d=$(sed -n 's/^without compression: *\([0-9]*\) rows\/s.*/\1/p' "$tmp/dpp.out")
    [ -n "$d" ] || {
        cat "$tmp/dpp.out" "$tmp/dpp.time"
        echo "peers.sh: bench_pipeline failed" >&2
        exit 1
    }
    dpp+=("$d")
    dpp_util+=("$(tail -1 "$tmp/dpp.time" | awk '{ printf "%.2f", ($2 + $3) / $1 }')")

    c=$("${pin[@]}" "$out/cxx_reader" --table "$table")
    check "cxx_reader" "$want_full" "$(head -1 <<<"$c")"
    cxx+=("$(rate "$c" 1)") cxx_cpu+=("$(rate "$c" 2)")

    p=$("${pin[@]}" "$python" "$here/peers/torch_reader.py" --table "$tmp/torch" --proto-dir "$out")
    check "torch_reader" "$want_torch" "$(head -1 <<<"$p")"
    pt+=("$(rate "$p" 1)") pt_cpu+=("$(rate "$p" 2)")

    printf 'round %d: dpp %s rows/s | C++ %s rows/s, %s per CPU-s |' "$r" "${dpp[-1]}" \
        "${cxx[-1]}" "${cxx_cpu[-1]}"
    printf ' PyTorch %s rows/s, %s per CPU-s\n' "${pt[-1]}" "${pt_cpu[-1]}"
done
sed -n 's/^bench_pipeline: /  dpp: /p' "$tmp/dpp.out"
tail -1 <<<"$c" | sed 's/^/  C++: /'
tail -1 <<<"$p" | sed 's/^/  PyTorch: /'
echo "  both peers' totals equal dpp-refsum's (dense_sum within 1e-9 relative)"

# median X...: the middle value, or the mean of the two middle ones
median() {
    printf '%s\n' "$@" | sort -g |
        awk '{ v[NR] = $1 }
             END { h = int((NR + 1) / 2); print (NR % 2) ? v[h] : (v[h] + v[h + 1]) / 2 }'
}
md=$(median "${dpp[@]}") mc=$(median "${cxx[@]}") mcc=$(median "${cxx_cpu[@]}")
mp=$(median "${pt[@]}") mpc=$(median "${pt_cpu[@]}") mu=$(median "${dpp_util[@]}")
awk -v rows="$rows" -v tr="$(head -1 <<<"$want_torch" | sed 's/.*"rows":\([0-9]*\).*/\1/')" \
    -v rounds="$rounds" -v cpu="${pin[*]:-not pinned}" -v md="$md" -v mc="$mc" -v mcc="$mcc" \
    -v mp="$mp" -v mpc="$mpc" -v mu="$mu" 'BEGIN {
    printf "\npeers: examples/criteo.json, one thread each (%s), median of %d rounds\n", cpu, rounds
    printf "  %-44s %10s %15s %9s\n", "reader", "rows/s", "rows per CPU-s", "rows"
    printf "  %-44s %10d %15s %9d\n", "dpp bench_pipeline (blocks, no compression)", md,
        sprintf("~%d", md / mu), rows
    printf "  %-44s %10d %15d %9d\n", "C++ (libprotobuf tensorflow::Example, arena)", mc, mcc, rows
    printf "  %-44s %10d %15d %9d\n", "PyTorch (DataLoader, example_pb2)", mp, mpc, tr
    printf "  dpp / C++      %6.2fx\n", md / mc
    printf "  dpp / PyTorch  %6.1fx\n", md / mp
    printf "  (dpp: one thread, rows/s from wall time; ~rows per CPU-s = rows/s divided by the\n"
    printf "  bench_pipeline process CPU / wall, %.2f: below 1 when it waited for its core)\n", mu
    printf "rows per CPU-s, for bench/e2e.sh: C++ %d, PyTorch %d\n", mcc, mpc
}'
