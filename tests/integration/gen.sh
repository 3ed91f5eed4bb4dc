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
dpp_step "--format jsonl: _tokenizer.tiktoken, its size printed, through dpp's tokenizer"
dpp_gen --rows 20 --shards 1 --partitions 1 --seed 6 --format jsonl --out "$DPP_TMP/j3" \
    >"$DPP_TMP/j3.out"
cat -- "$DPP_TMP/j3.out"
cmp -s "$DPP_TMP/j1/_tokenizer.tiktoken" "$DPP_TMP/j3/_tokenizer.tiktoken" ||
    dpp_fail "jsonl: _tokenizer.tiktoken differs between seeds 5 and 6"
ntok=$(wc -l <"$DPP_TMP/j1/_tokenizer.tiktoken")
grep -qF "dpp-gen: wrote $DPP_TMP/j3/_tokenizer.tiktoken, $ntok tokens " "$DPP_TMP/j3.out" ||
    dpp_fail "jsonl: the summary does not give the tokenizer's path and its $ntok tokens"
tokenize_ids=$DPP_BIN_DIR/tests/tokenize_ids
if [[ -x $tokenize_ids ]]; then
    # the first 300 documents, then words that must each be one token (the
    # prefix chain taken by dpp's merge order, not only the reference's)
    words=(" the" "The" " The" " training" " Zürich" " naïve" " Привет" " 日本語")
    python3 - "$DPP_TMP/j1" "$DPP_TMP/sample.bin" "${words[@]}" <<'PY' ||
import glob, json, os, struct, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "ds=*", "part-*.jsonl")))
docs = [json.loads(l)["text"].encode() for l in open(files[0], encoding="utf-8")][:300]
with open(sys.argv[2], "wb") as f:
    for d in docs + [w.encode() for w in sys.argv[3:]]:
        f.write(struct.pack("<I", len(d)) + d)
PY
        dpp_fail "jsonl: cannot write the sample for tokenize_ids"
    dpp_timeout 120 "$tokenize_ids" "$DPP_TMP/j1/_tokenizer.tiktoken" cl100k_base \
        "$DPP_TMP/sample.bin" "$DPP_TMP/sample.ids" || dpp_fail "tokenize_ids failed"
    python3 - "$DPP_TMP/sample.bin" "$DPP_TMP/sample.ids" "$ntok" "${#words[@]}" <<'PY' ||
import struct, sys
raw = open(sys.argv[1], "rb").read()
docs, at = [], 0
while at < len(raw):
    (n,) = struct.unpack_from("<I", raw, at)
    docs.append(raw[at + 4:at + 4 + n])
    at += 4 + n
ids = [[int(x) for x in l.split()] for l in open(sys.argv[2]).read().split("\n")[:len(docs)]]
ntok, nwords = int(sys.argv[3]), int(sys.argv[4])
assert all(0 <= i < ntok for row in ids for i in row)
for d, row in zip(docs[-nwords:], ids[-nwords:]):
    assert len(row) == 1, (d.decode(), row)
text = list(zip(docs[:-nwords], ids[:-nwords]))
longest = max(text, key=lambda t: len(t[0]))
assert len(longest[1]) < len(longest[0]) / 3, (len(longest[1]), len(longest[0]))
nbytes, nids = sum(len(d) for d, _ in text), sum(len(r) for _, r in text)
assert nids < nbytes / 3, (nids, nbytes)
print(f"jsonl: tokenize_ids: {len(text)} documents, {nbytes} bytes -> {nids} ids; the longest "
      f"{len(longest[0])} bytes -> {len(longest[1])} ids; each test word one id")
PY
        dpp_fail "jsonl: dpp's tokenizer does not tokenize the corpus well with _tokenizer.tiktoken"
else
    dpp_log "no $tokenize_ids (build the tests): dpp's tokenizer not run on _tokenizer.tiktoken"
fi
rc=0
"$DPP_GEN" --rows 10 --shards 1 --partitions 1 --seed 1 --format jsonl --nulls --out "$DPP_TMP/x" \
    2>"$DPP_TMP/err" >/dev/null || rc=$?
((rc == 2)) && grep -q '^dpp-gen: --nulls does not apply to --format jsonl$' "$DPP_TMP/err" ||
    dpp_fail "jsonl --nulls: exit $rc, $(cat "$DPP_TMP/err")"
dpp_log "PASS"
