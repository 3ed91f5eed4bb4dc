#!/usr/bin/env bash
# dpp-gen: the documented layout, byte-identical output for the same
# arguments, different output for another seed, and clear refusals of bad
# arguments; --format jsonl: documents Python's json reads, ids in order,
# lengths from a few words to thousands, the same bytes for the same seed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dpp_setup gen

dpp_step "same arguments, byte-identical files"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 11 --out "$DPP_TMP/a"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 11 --out "$DPP_TMP/b"
diff -r "$DPP_TMP/a" "$DPP_TMP/b" >/dev/null || dpp_fail "two runs with the same arguments differ"
expected="ds=2026-01-01/part-00000.tfrecord
ds=2026-01-01/part-00001.tfrecord
ds=2026-01-02/part-00000.tfrecord
ds=2026-01-02/part-00001.tfrecord
ds=2026-01-03/part-00000.tfrecord
ds=2026-01-03/part-00001.tfrecord"
actual=$(cd "$DPP_TMP/a" && find . -type f | sed 's|^\./||' | sort)
[[ $actual == "$expected" ]] || dpp_fail "unexpected layout: $actual"

dpp_step "another seed, other files"
dpp_gen --rows 3001 --shards 2 --partitions 3 --seed 12 --out "$DPP_TMP/c"
if diff -r "$DPP_TMP/a" "$DPP_TMP/c" >/dev/null; then
    dpp_fail "seeds 11 and 12 gave identical tables"
fi

dpp_step "bad arguments are refused with a reason"
for args in "--rows -5 --shards 1 --partitions 1 --seed 1 --out $DPP_TMP/x" \
    "--rows 10 --shards 0 --partitions 1 --seed 1 --out $DPP_TMP/x" \
    "--rows 10 --shards 1 --partitions 1 --seed 1" \
    "--rows ten --shards 1 --partitions 1 --seed 1 --out $DPP_TMP/x"; do
    rc=0
    # shellcheck disable=SC2086 # word splitting of the argument list is intended
    "$DPP_GEN" $args >/dev/null 2>"$DPP_TMP/err" || rc=$?
    ((rc != 0)) || dpp_fail "dpp-gen $args succeeded"
    grep -q '^dpp-gen: ' "$DPP_TMP/err" || dpp_fail "dpp-gen $args: no reason on stderr"
done
dpp_step "--format jsonl: a corpus for text sessions"
dpp_gen --rows 3000 --shards 2 --partitions 2 --seed 5 --format jsonl --out "$DPP_TMP/j1"
dpp_gen --rows 3000 --shards 2 --partitions 2 --seed 5 --format jsonl --out "$DPP_TMP/j2"
diff -r "$DPP_TMP/j1" "$DPP_TMP/j2" >/dev/null || dpp_fail "jsonl: two runs with the same seed differ"
python3 - "$DPP_TMP/j1" "$DPP_SOURCE_DIR" <<'PY' || dpp_fail "jsonl: the corpus is not what --help says"
import glob, json, os, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "ds=*", "part-*.jsonl")))
assert [os.path.relpath(f, sys.argv[1]) for f in files] == [
    "ds=2026-01-01/part-00000.jsonl", "ds=2026-01-01/part-00001.jsonl",
    "ds=2026-01-02/part-00000.jsonl", "ds=2026-01-02/part-00001.jsonl"], files
docs = []
for f in files:
    with open(f, "rb") as fh:
        for line in fh:
            assert line.endswith(b"\n"), line[-20:]
            docs.append(json.loads(line.decode("utf-8")))
assert [d["id"] for d in docs] == list(range(3000))
assert all(set(d) == {"id", "lang", "text"} and d["lang"] in ("en", "de") for d in docs)
de = sum(d["lang"] == "de" for d in docs) / len(docs)
assert 0.05 < de < 0.15, de
words = sorted(len(d["text"].split()) for d in docs)
assert words[0] >= 3 and words[len(words) // 2] < 50 and words[-1] > 1000, words[::300]
text = "".join(d["text"] for d in docs)
for s in ('"quoted"', "back\\slash", "tab\there", "\n\n", "café", "日本語"):
    assert s in text, s
print(f"jsonl: {len(docs)} documents, {sum(words)} words, de {de:.1%}, "
      f"words median {words[len(words) // 2]}, max {words[-1]}")
# _tokenizer.tiktoken: ranks 0..T-1, the 256 bytes first, every longer token
# reachable by merges (its prefix one byte shorter is a token); tokenized
# with tests/text/bpe_reference.py's plain BPE, the corpus takes far fewer
# tokens than bytes
import base64
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "text"))
import bpe_reference as R
ranks = {}
for i, line in enumerate(open(os.path.join(sys.argv[1], "_tokenizer.tiktoken"))):
    tok, rank = line.split()
    assert int(rank) == i, line
    ranks[base64.b64decode(tok)] = i
assert len(ranks) == i + 1 and all(ranks[bytes([b])] == b for b in range(256))
assert all(len(t) == 1 or t[:-1] in ranks for t in ranks)
sample = "".join(d["text"] for d in docs[:300]).encode()
ids = R.encode(ranks, sample)
assert len(ids) < len(sample) / 3, (len(ids), len(sample))
print(f"jsonl: _tokenizer.tiktoken {len(ranks)} tokens; {len(sample)} bytes -> {len(ids)} ids")
PY
rc=0
"$DPP_GEN" --rows 10 --shards 1 --partitions 1 --seed 1 --format jsonl --nulls --out "$DPP_TMP/x" \
    2>"$DPP_TMP/err" >/dev/null || rc=$?
((rc == 2)) && grep -q '^dpp-gen: --nulls does not apply to --format jsonl$' "$DPP_TMP/err" ||
    dpp_fail "jsonl --nulls: exit $rc, $(cat "$DPP_TMP/err")"
dpp_log "PASS"
