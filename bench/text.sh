#!/usr/bin/env bash
# bench/text.sh BUILD_DIR [DOCUMENTS [LENGTH]]: a text session end to end on
# one worker thread. Writes a dpp-gen JSON Lines corpus (default 40,000
# documents), starts a master and one worker with --threads 1 on loopback,
# submits a 2-epoch concat session of LENGTH-token sequences (default 1024)
# with cl100k_base (the npm tiktoken package's ranks, as bench/tokenize.sh
# uses; dpp-gen's own small tokenizer without the npm cache) and reads it
# with bench_first_batch. Prints the time to the first batch (the index
# tasks tokenize and pack every file once to count its sequences), the
# tokens of an epoch, and tokens per second of the worker's CPU over the
# whole session (count pass and two epochs: three tokenizations of the
# corpus) beside bench_tokenize's rate on the same documents' text, so the
# share of the time that is not tokenizing shows.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DPP_SOURCE_DIR=${DPP_SOURCE_DIR:-$(dirname "$here")}
export DPP_LOG_LEVEL=${DPP_LOG_LEVEL:-warn}
build=${1:?usage: bench/text.sh BUILD_DIR [DOCUMENTS [LENGTH]]}
docs=${2:-40000}
length=${3:-1024}
# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$DPP_SOURCE_DIR/tests/integration/lib.sh"
dpp_use_build_dir text "$build"
dpp_setup text
root=$DPP_TMP/root
"$DPP_GEN" --format jsonl --rows "$docs" --shards 4 --partitions 1 --seed 5 --out "$root/corpus" >/dev/null
cache=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm}
if [[ -f $cache/node_modules/tiktoken/package.json ]]; then
    node --input-type=module -e "
      import { writeRankFile } from '$DPP_SOURCE_DIR/tests/text/tiktoken_ranks.mjs';
      import { createRequire } from 'node:module';
      const require = createRequire('$cache/node_modules/');
      const enc = require('tiktoken/encoders/cl100k_base.json');
      writeRankFile(enc.bpe_ranks, '$root/corpus/_cl100k.tiktoken');"
    tok=corpus/_cl100k.tiktoken specials='{"<|endoftext|>": 100257}' vocab=cl100k_base
else
    tok=corpus/_tokenizer.tiktoken vocab="dpp-gen's"
    specials="{\"<|endoftext|>\": $(wc -l <"$root/$tok")}"
fi
cat >"$DPP_TMP/spec.json" <<JSON
{"table": "corpus", "format": "jsonl", "batch_size": 8, "epochs": 2, "split_rows": 256,
 "shuffle": {"seed": 1}, "remainder": "keep",
 "tokenizer": {"file": "$tok", "pattern": "cl100k_base", "specials": $specials},
 "sequence": {"length": $length, "pack": "concat"}}
JSON
dpp_start_master --data-root "$root"
dpp_start_worker --threads 1
wpid=$(dpp_pid_of worker-0)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
c0=$(cpu "$wpid")
t0=$(date +%s%N)
dpp_submit "$DPP_TMP/spec.json"
t1=$(date +%s%N)
out=$("$build/bench/bench_first_batch" "$DPP_MASTER_ADDR" "$DPP_SESSION")
c1=$(cpu "$wpid")
submit_ms=$(((t1 - t0) / 1000000))
first_ms=$(sed -n 's/^first batch \([0-9]*\) ms.*/\1/p' <<<"$out")
all_ms=$(sed -n 's/.* rows \([0-9]*\) ms$/\1/p' <<<"$out")
seqs=$(sed -n 's/.* \([0-9]*\) rows [0-9]* ms$/\1/p' <<<"$out")
st=$("$DPPCTL" status "$DPP_SESSION" -o json)
hz=$(getconf CLK_TCK)
# the corpus's text, as bench_tokenize reads it (u32 length, bytes)
python3 - "$root/corpus" "$DPP_TMP/corpus.bin" <<'PY'
import glob, json, struct, sys
with open(sys.argv[2], "wb") as out:
    for path in sorted(glob.glob(sys.argv[1] + "/**/part-*", recursive=True)):
        for line in open(path, encoding="utf-8"):
            t = json.loads(line)["text"].encode()
            out.write(struct.pack("<I", len(t)) + t)
PY
tk=$(taskset -c 0 "$build/bench/bench_tokenize" "$root/$tok" cl100k_base "$DPP_TMP/corpus.bin" 3)
python3 - "$docs" "$length" "$vocab" "$submit_ms" "$first_ms" "$all_ms" "$seqs" "$c0" "$c1" "$hz" \
    "$st" "$tk" <<'PY'
import json, re, sys
docs, L, vocab, submit, first, total, seqs, c0, c1, hz, st, tk = sys.argv[1:]
L, seqs = int(L), int(seqs)
cpu = (int(c1) - int(c0)) / int(hz)
st = json.loads(st)
m = re.search(r"([0-9.]+) MB/s, ([0-9.]+) M tokens/s", tk)
per_epoch = seqs // 2
tokens = per_epoch * L  # positions; padding is at most one sequence per split
print(f"text: {docs} documents, {vocab} tokenizer, sequences of {L}: {per_epoch} per epoch "
      f"(~{tokens / 1e6:.2f} M token positions)")
print(f"text: submit {submit} ms, first batch {int(submit) + int(first)} ms (count pass), "
      f"both epochs read {int(submit) + int(total)} ms after submit")
print(f"text: worker CPU {cpu:.2f} s for the count pass and 2 epochs: "
      f"{3 * tokens / cpu / 1e6:.2f} M tokens per worker CPU-second (3 tokenizations)")
if m:
    print(f"text: bench_tokenize on the same text, one core: {m.group(1)} MB/s, {m.group(2)} M tokens/s"
          f" -> the session spends {100 * (1 - (3 * tokens / cpu / 1e6) / float(m.group(2))):.0f}% "
          f"of its worker CPU outside the tokenizer")
else:
    print("text: bench_tokenize:", tk)
PY
