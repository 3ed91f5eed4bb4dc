#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare.py EXPECTED ACTUAL: holds dpp-pqstat's output (ACTUAL) against
DuckDB's statistics of the same files (EXPECTED, from duck_stats.mjs), one
JSON line per file in each. For every file in EXPECTED: the row count; for
every column DuckDB reads as a primitive or a list of primitives, dpp's
nulls, non-null values, empty lists and sum (numbers) or hash (strings);
for every column DuckDB reports unsupported for dpp (structs, maps,
decimals, nested lists), dpp must refuse it with a message naming the file
and the column. Integer sums (int_sum) are compared exactly; float sums
with a relative tolerance: dpp hands doubles over as float32. Exits 1 naming every difference."""
import json
import math
import sys


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rec = json.loads(line)
                out[rec["file"]] = rec
    return out


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-3)


def main():
    expected, actual = load(sys.argv[1]), load(sys.argv[2])
    bad = []
    checked = 0
    for name, exp in sorted(expected.items()):
        act = actual.get(name)
        if "error" in exp:
            print(f"compare: {name}: DuckDB cannot read it ({exp['error']}); not compared")
            continue
        if act is None:
            bad.append(f"{name}: dpp-pqstat did not read it")
            continue
        if "error" in act:
            bad.append(f"{name}: dpp refused the file: {act['error']}")
            continue
        if act["rows"] != exp["rows"]:
            bad.append(f"{name}: rows {act['rows']}, DuckDB {exp['rows']}")
        for col, e in exp["columns"].items():
            a = act["columns"].get(col)
            where = f"{name} column {col}"
            if a is None:
                bad.append(f"{where}: dpp does not list it")
                continue
            if "unsupported" in e:
                msg = a.get("error", "")
                if not msg:
                    bad.append(f"{where}: DuckDB reads it as {e['unsupported']}, which dpp should "
                               f"refuse, and dpp read it: {a}")
                elif name not in msg or col not in msg:
                    bad.append(f"{where}: the refusal does not name file and column: {msg}")
                checked += 1
                continue
            if "error" in a:
                bad.append(f"{where}: dpp refused it: {a['error']}")
                continue
            for key in ("nulls", "values", "empty"):
                if key in e and e[key] != a.get(key):
                    bad.append(f"{where}: {key} {a.get(key)}, DuckDB {e[key]}")
            if "hash" in e and str(e["hash"]) != str(a.get("hash")):
                bad.append(f"{where}: hash {a.get('hash')}, DuckDB {e['hash']}")
            if "int_sum" in e:
                # integers, booleans, timestamps: exact (a double would let an
                # INT96 timestamp be off by an hour and still compare equal)
                if str(e["int_sum"]) != str(a.get("int_sum")):
                    bad.append(f"{where}: int_sum {a.get('int_sum')}, DuckDB {e['int_sum']}")
            elif "sum" in e and not close(float(e["sum"]), float(a.get("sum", "nan"))):
                bad.append(f"{where}: sum {a.get('sum')}, DuckDB {e['sum']}")
            checked += 1
    for b in bad:
        print("MISMATCH:", b)
    print(f"compare: {checked} columns of {len(expected)} files checked, {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
