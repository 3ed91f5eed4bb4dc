#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_sums.py EXPECTED ACTUAL: dppctl read --output json lines (ACTUAL)
against the sums DuckDB computed for the same spec (EXPECTED, from
duck_sums.mjs), epoch by epoch. Counts, id sums and 0/1 label sums must be
equal; dense and weight sums, which add the same float32 values in another
order, within a relative 1e-9. Exits 1 naming every difference."""
import json
import math
import sys

EXACT = ("rows", "batches", "label_sum", "sparse_lengths_sum", "sparse_ids_sum",
         "sparse_ids_wsum")
CLOSE = ("dense_sum", "sparse_weights_sum")


def load(path):
    with open(path) as f:
        return {r["epoch"]: r for r in (json.loads(line) for line in f if line.strip())}


def main():
    exp, act = load(sys.argv[1]), load(sys.argv[2])
    bad = []
    if sorted(exp) != sorted(act):
        bad.append(f"epochs {sorted(act)}, expected {sorted(exp)}")
    for e in sorted(set(exp) & set(act)):
        for k in EXACT:
            if k in exp[e] and exp[e][k] != act[e].get(k):
                bad.append(f"epoch {e}: {k} {act[e].get(k)}, DuckDB {exp[e][k]}")
        for k in CLOSE:
            if k in exp[e] and not math.isclose(exp[e][k], act[e].get(k, math.nan), rel_tol=1e-9):
                bad.append(f"epoch {e}: {k} {act[e].get(k)}, DuckDB {exp[e][k]}")
    for b in bad:
        print("MISMATCH:", b)
    print(f"compare_sums: {len(exp)} epochs, {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
