#!/usr/bin/env bash
# dpp language-model demo (`make demo-lm`): generates a JSON Lines corpus and
# its tokenizer (dpp-gen --format jsonl), runs a master and two workers on
# loopback, submits a text session (documents tokenized and packed into
# sequences on the workers) and trains examples/train_lm.py (a small causal
# transformer, PyTorch on CPU) from it for STEPS steps, showing the loss
# going down; then resumes from its checkpoint for a few more steps.
# Usage: scripts/demo_lm.sh [BUILD_DIR] (or DPP_BIN_DIR=BUILD_DIR).
# Environment: STEPS (default 300), DOCS (default 20000), PYTHON (default
# /usr/bin/python3, which needs torch and numpy: scripts/install-deps.sh).
# Every daemon it starts is stopped on exit, on failure and on Ctrl-C.
set -euo pipefail

# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
dpp_use_build_dir demo-lm "${1:-}"

steps=${STEPS:-300}
docs=${DOCS:-20000}
python=${PYTHON:-/usr/bin/python3}
lib=$DPP_BIN_DIR/libdppclient.so
[[ -e $lib ]] || {
    echo "demo-lm: $lib is not built" >&2
    exit 1
}
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
    echo "demo-lm: $python cannot import torch and numpy (Debian: apt-get install python3-torch python3-numpy, or scripts/install-deps.sh)" >&2
    exit 1
fi

dpp_setup demo-lm
root=$DPP_TMP/root
say() { printf '%s\n' "$*"; }
step() { printf '\n[%s] %s\n' "$1" "$2"; }
indent() { sed 's/^/      /' -- "$1"; }

say "dpp language-model demo: binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP"

step 1/5 "Generating a corpus of $docs documents (4 files) and a tokenizer for it"
dpp_gen --format jsonl --rows "$docs" --shards 4 --partitions 1 --seed 1 --out "$root/corpus" \
    >"$DPP_TMP/gen.out"
indent "$DPP_TMP/gen.out"
ntok=$(wc -l <"$root/corpus/_tokenizer.tiktoken")

step 2/5 "Starting one master and two workers on free loopback ports"
dpp_start_master --data-root "$root"
say "      master   $DPP_MASTER_ADDR"
dpp_start_worker
say "      worker 0 $DPP_LAST_ADDR"
dpp_start_worker
say "      worker 1 $DPP_LAST_ADDR"

spec=$DPP_TMP/lm.json
cat >"$spec" <<JSON
{"table": "corpus", "format": "jsonl", "batch_size": 8, "epochs": "unbounded",
 "split_rows": 200, "shuffle": {"seed": 7},
 "text": {"field": "text", "where": {"lang": "en"}},
 "tokenizer": {"file": "corpus/_tokenizer.tiktoken", "pattern": "cl100k_base",
               "specials": {"<|endoftext|>": $ntok}},
 "sequence": {"length": 64, "pack": "concat", "eos": "<|endoftext|>"}}
JSON
step 3/5 "Submitting a text session: English documents, sequences of 64 tokens, concat packing"
indent "$spec"
dpp_submit "$spec"
session=$DPP_SESSION
say "      session $session"

run_train() { # STEPS OUT
    DPP_LIB=$lib PYTHONPATH=$DPP_SOURCE_DIR/python${PYTHONPATH:+:$PYTHONPATH} \
        dpp_timeout 1800 "$python" "$DPP_SOURCE_DIR/examples/train_lm.py" \
        --master "$DPP_MASTER_ADDR" --session "$session" --vocab-size $((ntok + 1)) --dim 64 \
        --steps "$1" --log-every 25 --checkpoint "$DPP_TMP/lm.ckpt" --checkpoint-every 50 \
        >"$2" 2>&1
}
step 4/5 "Training examples/train_lm.py for $steps steps on CPU ($python)"
out=$DPP_TMP/train.out
rc=0
run_train "$steps" "$out" || rc=$?
indent "$out"
((rc == 0)) || dpp_fail "examples/train_lm.py exited $rc"
line=$(grep '^loss: first' "$out" || true)
re='first [0-9]+ steps ([0-9.]+) -> last [0-9]+ steps ([0-9.]+)'
[[ $line =~ $re ]] || dpp_fail "cannot read the loss summary: $line"
first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    dpp_fail "the loss did not go down ($first -> $last)"
say ""
say "      Average loss went from $first (first 25 steps) to $last (last 25 steps)."

step 5/5 "Resuming from the checkpoint (model, optimizer and data position) for 50 more steps"
rc=0
run_train $((steps + 50)) "$DPP_TMP/resume.out" || rc=$?
indent "$DPP_TMP/resume.out"
((rc == 0)) || dpp_fail "the resumed trainer exited $rc"
grep -q "^resumed from .* at step $steps " "$DPP_TMP/resume.out" ||
    dpp_fail "the second run did not resume at step $steps"
"$DPPCTL" cancel "$session" >/dev/null
say ""
say "The loss went down and training resumed where it stopped. Stopping the daemons."
