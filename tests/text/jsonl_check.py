# SPDX-License-Identifier: Apache-2.0
"""dpp's JSON Lines reader (src/format/jsonl.c) against Python's json module.

Seeded lines: objects of every JSON value kind, nested, with escapes (ASCII
and not, astral characters as surrogate pairs, lone surrogates), duplicate
keys, the text field absent or of another kind; then damaged copies:
truncated, a byte flipped, invalid UTF-8, a raw control character, trailing
text, NaN, single quotes, trailing commas, leading zeros, nesting past 64.
For every line both must agree: refused or not, the field's kind, and the
field's text (lone surrogates as U+FFFD, dpp's stated rule). A refusal must
name an offset inside the line.

Usage: jsonl_check.py JSONL_FIELDS
"""
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

KINDS = {str: 1, bool: 3, type(None): 4, dict: 5, list: 6}  # numbers: 2


def kind_of(v):
    if isinstance(v, bool):
        return 3
    if isinstance(v, (int, float)):
        return 2
    return KINDS[type(v)]


def rand_string(rng):
    pool = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x01", "é", "日本", "😀", "\u2028",
            "\ud83d", "\ude00", "\u0000", "\x7f", "<|endoftext|>"]
    return "".join(rng.choice(pool) for _ in range(rng.randrange(0, 12)))


def rand_value(rng, depth):
    k = rng.randrange(8 if depth < 6 else 5)
    if k == 0:
        return rand_string(rng)
    if k == 1:
        return rng.choice([0, -1, 12345678901234567890, 3.25, -0.0, 1e-7, 6.02e23])
    if k == 2:
        return rng.choice([True, False])
    if k == 3:
        return None
    if k == 4:
        return rand_string(rng)
    if k == 5:
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rand_string(rng): rand_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def dump(obj, rng):
    text = json.dumps(obj, ensure_ascii=rng.random() < 0.5,
                      separators=rng.choice([(",", ":"), (", ", ": ")]))
    # json.dumps writes lone surrogates as \\udXXX only with ensure_ascii;
    # without, they cannot be encoded: write those lines with it
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True).encode()


def valid_lines(rng, n):
    lines = []
    for i in range(n):
        obj = {}
        for _ in range(rng.randrange(0, 4)):
            obj[rand_string(rng)] = rand_value(rng, 1)
        r = rng.random()
        if r < 0.7:
            obj["text"] = rand_string(rng) * rng.randrange(1, 4)
        elif r < 0.85:
            obj["text"] = rand_value(rng, 1)
        line = dump(obj, rng)
        if rng.random() < 0.1:  # a duplicate key: the later one wins
            line = line[:-1] + (b", " if len(obj) else b"") + b'"text": "second"}'
        if rng.random() < 0.1:
            line = b"  " + line + b" \r"
        lines.append(line)
    return lines


def damaged(rng, good):
    out = []
    for line in good:
        k = rng.randrange(11)
        if k == 0 and len(line) > 2:
            out.append(line[:rng.randrange(1, len(line) - 1)])
        elif k == 1 and line:
            i = rng.randrange(len(line))
            out.append(line[:i] + bytes([rng.randrange(256)]) + line[i + 1:])
        elif k == 2:
            out.append(line[:-1] + b', "x": "\xff\xfe"}')
        elif k == 3:
            out.append(line[:-1] + b', "x": "a\x01b"}')
        elif k == 4:
            out.append(line + b" {}")
        elif k == 5:
            out.append(line[:-1] + b', "x": NaN}')
        elif k == 6:
            out.append(b"{'text': 'single'}")
        elif k == 7:
            out.append(line[:-1] + b", }" if len(line) > 2 else b"{,}")
        elif k == 8:
            out.append(rng.choice([b'{"n": 01}', b'{"n": .5}', b'{"n": 1.}', b'{"n": -}',
                                   b'{"n": 1e}', b'[1, 2]', b'"text"', b"", b"   ",
                                   b'{"text": "\\x41"}', b'{"text": "\\u12"}',
                                   b'{"a": [1, 2,]}', b'{"a" 1}', b'{"a": tru}']))
        elif k == 9:
            d = rng.choice([63, 64, 65, 200])
            out.append(b'{"text": "deep", "a": ' + b"[" * (d - 1) + b"]" * (d - 1) + b"}")
        else:
            out.append(line[:-1] + b', "x": "\xed\xa0\x80"}')  # an encoded surrogate
    return out


def depth(v):
    if isinstance(v, dict):
        return 1 + max([depth(x) for x in v.values()], default=0)
    if isinstance(v, list):
        return 1 + max([depth(x) for x in v], default=0)
    return 0


def reference(line):
    """(ok, kind, text bytes) as Python reads the line."""
    try:
        s = line.decode("utf-8")
        obj = json.loads(s, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return (False, None, None)
    if not isinstance(obj, dict) or depth(obj) > 64:
        return (False, None, None)
    if "text" not in obj:
        return (True, 0, b"")
    v = obj["text"]
    if isinstance(v, str):
        return (True, 1, re.sub("[\ud800-\udfff]", "\ufffd", v).encode("utf-8"))
    return (True, kind_of(v), b"")


def main():
    tool = sys.argv[1]
    rng = random.Random(11)
    good = valid_lines(rng, 600)
    lines = good + damaged(rng, good)
    # lines hold no raw newline: json.dumps escapes it, damage may add one
    lines = [l.replace(b"\n", b" ") for l in lines]
    with tempfile.TemporaryDirectory(prefix="dpp-jsonl.") as tmp:
        path = os.path.join(tmp, "lines.jsonl")
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        p = subprocess.run([tool, path, "text"], capture_output=True)
        if p.returncode != 0:
            sys.exit(f"jsonl_check: jsonl_fields failed: {p.stderr!r}")
        got = p.stdout.decode().splitlines()
    if len(got) != len(lines):
        sys.exit(f"jsonl_check: {len(lines)} lines written, {len(got)} read")
    refused = 0
    for i, (line, out) in enumerate(zip(lines, got)):
        ok, kind, text = reference(line)
        parts = out.split(" ", 2)
        if parts[0] == "bad":
            refused += 1
            at = int(parts[1])
            if ok:
                sys.exit(f"jsonl_check: line {i} refused ({out}) but Python reads it: {line!r}")
            if at > len(line):
                sys.exit(f"jsonl_check: line {i}: offset {at} past its {len(line)} bytes")
            continue
        if not ok:
            sys.exit(f"jsonl_check: line {i} accepted ({out}) but Python refuses it: {line!r}")
        k, hexed = int(parts[1]), parts[2]
        mine = b"" if hexed == "-" else bytes.fromhex(hexed)
        if k != kind or (kind == 1 and mine != text):
            sys.exit(f"jsonl_check: line {i}: dpp kind {k} text {mine!r}, Python kind {kind} "
                     f"text {text!r}; line {line!r}")
    print(f"jsonl_check: {len(lines)} lines ({refused} refused), kinds and texts equal to "
          f"Python's json")


if __name__ == "__main__":
    main()
