#!/usr/bin/env bash
# dpp's SentencePiece encoder beside libsentencepiece (Debian's
# python3-sentencepiece, num_threads=1), one core each, the same documents
# and models, in one run: bench/sentencepiece.sh [BUILD_DIR] [SECONDS].
# The models and the corpus are tests/text/spm_ref.py's (trained here by
# libsentencepiece's trainer; the corpus repeated to ~5 MB). With Debian's
# libsentencepiece-dev and g++, libsentencepiece is also measured linked
# directly (bench/spm_lib.cc: what a worker linking it would pay). Prints
# MB/s and tokens/s of each and the ratios per model.
set -euo pipefail
build=${1:-build}
secs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 -c 'import sentencepiece' 2>/dev/null || {
    echo "sentencepiece.sh: no python3-sentencepiece (apt-get install python3-sentencepiece)" >&2
    exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpp-bench-spm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
lib=
if [ -f /usr/include/sentencepiece_processor.h ] && command -v g++ >/dev/null; then
    g++ -O2 -std=c++17 -o "$tmp/spm_lib" "$here/spm_lib.cc" -lsentencepiece && lib="$tmp/spm_lib"
else
    echo "sentencepiece.sh: no libsentencepiece-dev and g++: libsentencepiece linked directly" \
        "is not measured (apt-get install libsentencepiece-dev g++)" >&2
fi
/usr/bin/python3 "$here/../tests/text/spm_ref.py" "$tmp" 7
for model in unigram bpe; do
    peer=$(taskset -c 0 /usr/bin/python3 - "$tmp/$model.model" "$tmp/corpus.bin" "$secs" "$tmp/big.bin" <<'PY'
import struct, sys, time
import sentencepiece as spm
model, corpus, secs, big = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
data = open(corpus, "rb").read()
docs, at = [], 0
while at < len(data):
    (n,) = struct.unpack_from("<I", data, at)
    docs.append(data[at + 4:at + 4 + n])
    at += 4 + n
docs *= 40
with open(big, "wb") as f:  # the same documents for dpp
    for d in docs:
        f.write(struct.pack("<I", len(d)) + d)
sp = spm.SentencePieceProcessor(model_file=model)
texts = docs  # bytes, as dpp gets them (invalid UTF-8 included)
nbytes = sum(map(len, docs))
times, end = [], time.perf_counter() + secs
while len(times) < 3 or time.perf_counter() < end:
    t = time.perf_counter()
    tokens = sum(map(len, sp.encode(texts, num_threads=1)))
    times.append(time.perf_counter() - t)
med = sorted(times)[len(times) // 2]
print(f"python3-sentencepiece: {nbytes / med / 1e6:.2f} MB/s, {tokens / med / 1e6:.3f} M tokens/s "
      f"on one core (median of {len(times)} rounds; {len(docs)} documents, {nbytes} bytes, {tokens} tokens)")
PY
)
    ours=$(taskset -c 0 "$build/bench/bench_tokenize" "$tmp/$model.model" spm "$tmp/big.bin" "$secs")
    linked=${lib:+$(taskset -c 0 "$lib" "$tmp/$model.model" "$tmp/big.bin" "$secs")}
    echo "$model: $peer"
    [ -z "$linked" ] || echo "$model: $linked"
    echo "$model: $ours"
    python3 - "$model" "$ours" "$peer" ${linked:+"$linked"} <<'PY'
import re, sys
mb = [float(re.search(r"([0-9.]+) MB/s", s).group(1)) for s in sys.argv[2:]]
names = ["python3-sentencepiece", "libsentencepiece linked"]
print(f"{sys.argv[1]}: ratio: " + ", ".join(
    f"dpp {mb[0] / m:.2f}x {n}" for n, m in zip(names, mb[1:])) + " per core")
PY
done
