#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_sums.py EXPECTED ACTUAL: dppctl read --output json lines (ACTUAL)
against the sums DuckDB computed for the same spec (EXPECTED, from
duck_sums.mjs), epoch by epoch. Counts, id sums and 0/1 label sums must be
equal; dense and weight sums, which add the same float32 values in another
order, within a relative 1e-9. A total either side has (label_sum: the spec
has a label) the other must have too. Each feature's sums (dense_sums,
sparse_sums) are compared the same way when EXPECTED has them (the committed
expectations of older DuckDB runs do not). Exits 1 naming every
difference."""
import json
import math
import sys

EXACT = ("rows", "batches", "label_sum", "sparse_lengths_sum", "sparse_ids_sum",
         "sparse_ids_wsum")
CLOSE = ("dense_sum", "sparse_weights_sum")


def load(path):
    with open(path) as f:
        return {r["epoch"]: r for r in (json.loads(line) for line in f if line.strip())}


def close(a, b):
    """Within 1e-9; "inf", "-inf" and "nan" (JSON has no such numbers) only
    equal themselves."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9)


def compare(where, exp, act, bad):
    """Compares the keys of EXACT and CLOSE in two objects."""
    for k in EXACT + CLOSE:
        if (k in exp) != (k in act):
            bad.append(f"{where}: {k} {'missing' if k in exp else 'present'}, DuckDB "
                       f"{exp.get(k, 'has none')}")
        elif k in exp and not (exp[k] == act[k] if k in EXACT else close(act[k], exp[k])):
            bad.append(f"{where}: {k} {act[k]}, DuckDB {exp[k]}")


def compare_features(where, exp, act, bad):
    """dense_sums {name: sum} and sparse_sums {name: {lengths_sum, ids_sum}}."""
    if "dense_sums" in exp:
        got = act.get("dense_sums", {})
        if list(got) != list(exp["dense_sums"]):
            bad.append(f"{where}: dense features {list(got)}, DuckDB {list(exp['dense_sums'])}")
        for name, want in exp["dense_sums"].items():
            if name in got and not close(got[name], want):
                bad.append(f"{where}: dense {name} sum {got[name]}, DuckDB {want}")
    if "sparse_sums" in exp:
        got = act.get("sparse_sums", {})
        if list(got) != list(exp["sparse_sums"]):
            bad.append(f"{where}: sparse features {list(got)}, DuckDB {list(exp['sparse_sums'])}")
        for name, want in exp["sparse_sums"].items():
            if name in got and got[name] != want:
                bad.append(f"{where}: sparse {name} {got[name]}, DuckDB {want}")


def main():
    exp, act = load(sys.argv[1]), load(sys.argv[2])
    bad = []
    if sorted(exp) != sorted(act):
        bad.append(f"epochs {sorted(act)}, expected {sorted(exp)}")
    for e in sorted(set(exp) & set(act)):
        compare(f"epoch {e}", exp[e], act[e], bad)
        compare_features(f"epoch {e}", exp[e], act[e], bad)
    for b in bad:
        print("MISMATCH:", b)
    print(f"compare_sums: {len(exp)} epochs, {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
