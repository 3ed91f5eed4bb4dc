#!/usr/bin/env bash
# dpp training demo (`make demo-train`): generates a Criteo-like table, runs a
# master and two workers on loopback, submits examples/criteo.json with enough
# epochs, and trains examples/train_dlrm.py (a small DLRM, PyTorch on CPU)
# from the session for STEPS steps, showing the loss going down.
# Usage: scripts/demo_train.sh [BUILD_DIR] (or DPP_BIN_DIR=BUILD_DIR).
# Environment: STEPS (default 300), ROWS (default 200000), PYTHON (default
# /usr/bin/python3, which needs torch and numpy: scripts/install-deps.sh).
# Every daemon it starts is stopped on exit, on failure and on Ctrl-C.
set -euo pipefail

# shellcheck source=../tests/integration/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/../tests/integration/lib.sh"
dpp_use_build_dir demo-train "${1:-}"

steps=${STEPS:-300}
rows=${ROWS:-200000}
python=${PYTHON:-/usr/bin/python3}
lib=$DPP_BIN_DIR/libdppclient.so
[[ -e $lib ]] || {
    echo "demo-train: $lib is not built" >&2
    exit 1
}
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
    echo "demo-train: $python cannot import torch and numpy (Debian: apt-get install python3-torch python3-numpy, or scripts/install-deps.sh)" >&2
    exit 1
fi

dpp_setup demo-train

spec_src=$DPP_SOURCE_DIR/examples/criteo.json
[[ -f $spec_src ]] || dpp_fail "$spec_src is missing"
root=$DPP_TMP/root

say() { printf '%s\n' "$*"; }
step() { printf '\n[%s] %s\n' "$1" "$2"; }
indent() { sed 's/^/      /' -- "$1"; }

say "dpp training demo: binaries from $DPP_BIN_DIR, scratch space in $DPP_TMP"

step 1/4 "Generating a Criteo-like table: $rows rows, 4 partitions x 4 shards"
dpp_gen --rows "$rows" --shards 4 --partitions 4 --seed 1 --index --out "$root/criteo" \
    >"$DPP_TMP/gen.out"
indent "$DPP_TMP/gen.out"

step 2/4 "Starting one master and two workers on free loopback ports"
dpp_start_master --data-root "$root"
say "      master   $DPP_MASTER_ADDR"
dpp_start_worker
say "      worker 0 $DPP_LAST_ADDR"
dpp_start_worker
say "      worker 1 $DPP_LAST_ADDR"

# Enough epochs for the steps: one batch per step, ceil(rows / batch_size)
# batches per epoch (the spec keeps the remainder).
batch_size=$(sed -nE 's/.*"batch_size"[[:space:]]*:[[:space:]]*([0-9]+).*/\1/p' "$spec_src" | head -n 1)
[[ -n $batch_size ]] || dpp_fail "no batch_size in $spec_src"
per_epoch=$(((rows + batch_size - 1) / batch_size))
epochs=$(((steps + per_epoch - 1) / per_epoch))
spec=$DPP_TMP/criteo-train.json
sed -E "s/\"epochs\"[[:space:]]*:[[:space:]]*[0-9]+/\"epochs\": $epochs/" "$spec_src" >"$spec"
grep -q "\"epochs\": $epochs" "$spec" || dpp_fail "could not set epochs in $spec"

step 3/4 "Submitting examples/criteo.json with $epochs epochs ($per_epoch batches of $batch_size rows each)"
dpp_submit "$spec"
session=$DPP_SESSION
say "      session $session"

step 4/4 "Training examples/train_dlrm.py for $steps steps on CPU ($python)"
out=$DPP_TMP/train.out
rc=0
# Through a file, not a pipe: the trap must be able to stop the trainer.
DPP_LIB=$lib PYTHONPATH=$DPP_SOURCE_DIR/python${PYTHONPATH:+:$PYTHONPATH} \
    dpp_timeout 1800 "$python" "$DPP_SOURCE_DIR/examples/train_dlrm.py" \
    --master "$DPP_MASTER_ADDR" --session "$session" --steps "$steps" --log-every 25 \
    >"$out" 2>&1 || rc=$?
indent "$out"
((rc == 0)) || dpp_fail "examples/train_dlrm.py exited $rc"

line=$(grep '^loss: first' "$out" || true)
[[ -n $line ]] || dpp_fail "the trainer printed no loss summary"
re='first [0-9]+ steps ([0-9.]+) -> last [0-9]+ steps ([0-9.]+)'
[[ $line =~ $re ]] || dpp_fail "cannot read the loss summary: $line"
first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
say ""
say "Average loss went from $first (first 25 steps) to $last (last 25 steps)."
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
    say "The loss went down. Stopping the daemons."
else
    dpp_fail "the loss did not go down ($first -> $last)"
fi
