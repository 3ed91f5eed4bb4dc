#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The dependency rule of src/ (docs/architecture.md#layers): a file may
# include headers of its own folder and of the layers this table lets its
# folder use, nothing above. Fails naming each include that points upward.
# Usage: check.sh SRC_DIR
set -eu
src=${1:?usage: check.sh SRC_DIR}

allowed() {
    case $1 in
    base) echo "" ;;
    crypto) echo "base" ;;
    format) echo "base" ;;
    parquet) echo "base format" ;;
    wire) echo "base crypto" ;;
    storage) echo "base crypto" ;;
    text) echo "base format parquet spec" ;;
    spec) echo "base format" ;;
    daemon) echo "base crypto wire" ;;
    client) echo "base crypto wire format" ;;
    master) echo "base crypto wire format parquet spec daemon storage" ;;
    worker) echo "base crypto wire format parquet text spec daemon storage" ;;
    ctl) echo "base crypto wire format parquet text spec client" ;;
    gen) echo "base format" ;;
    *) echo "?" ;;
    esac
}

bad=0
checked=0
for dir in "$src"/*/; do
    layer=$(basename "$dir")
    ok=$(allowed "$layer")
    if [ "$ok" = "?" ]; then
        echo "layers: $src/$layer is no known layer; add it to tests/layers/check.sh" >&2
        bad=1
        continue
    fi
    for f in "$dir"*.c "$dir"*.h; do
        [ -e "$f" ] || continue
        checked=$((checked + 1))
        # Only quoted includes with a folder name are dpp's own layers;
        # "dpp/..." is the public header tier, allowed everywhere.
        for inc in $(sed -n 's/^#include "\([a-z_]*\)\/.*/\1/p' "$f"); do
            case " $layer $ok dpp " in
            *" $inc "*) ;;
            *)
                echo "layers: $f includes $inc/; $layer may use only: ${ok:-nothing}" >&2
                bad=1
                ;;
            esac
        done
    done
done
if [ "$bad" -ne 0 ]; then
    echo "layers: FAILED: a lower layer includes a higher one" >&2
    exit 1
fi
echo "layers: $checked files, every include points downward"
