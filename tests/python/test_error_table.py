# SPDX-License-Identifier: Apache-2.0
"""python/dpp/_lib.py's ERRORS, a hand copy, against include/dpp/error.h:
  1. the DPP_ERRORS X-macro list is parsed here with its own regex (name,
     number, message), every entry of it, without duplicates;
  2. every code of error.h is in ERRORS with the same name and number, and
     ERRORS holds nothing else;
  3. when DPP_LIB is set (ctest sets it), the library's dpp_err_name() and
     dpp_strerror() give each code the header's name and message.
Fails naming each code that differs. Needs neither torch nor daemons.
"""
import ctypes
import importlib.util
import os
import re
import sys

SRC = os.environ.get("DPP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(SRC, "include", "dpp", "error.h")
LIB_PY = os.path.join(SRC, "python", "dpp", "_lib.py")

ENTRY = re.compile(r'X\(\s*(DPP_E[A-Z0-9_]+)\s*,\s*(-?\d+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)')


def log(*a):
    print("[%s]" % os.path.basename(sys.argv[0]), *a, flush=True)


def header_errors():
    """[(name, number, message)] of DPP_ERRORS(X), in header order."""
    with open(HEADER) as f:
        text = f.read()
    m = re.search(r"^#define DPP_ERRORS\(X\)[ \t]*\\\n((?:.*\\\n)*.*)$", text, re.M)
    assert m, "%s: no '#define DPP_ERRORS(X)' list" % HEADER
    body = m.group(1)
    entries = [(n, int(num), msg) for n, num, msg in ENTRY.findall(body)]
    # An entry the regex does not read must fail here, not vanish from the check.
    calls = re.findall(r"\bX\(", body)
    assert entries and len(entries) == len(calls), "%s: read %d of the %d X(...) entries of DPP_ERRORS:\n%s" % (
        HEADER,
        len(entries),
        len(calls),
        body,
    )
    problems = []
    for i, (name, num, _) in enumerate(entries):
        for other, onum, _ in entries[:i]:
            if other == name or onum == num:
                problems.append("error.h: %s (%d) and %s (%d) share a name or number" % (other, onum, name, num))
    assert not problems, "\n".join(problems)
    return entries


def python_errors():
    # Loaded by path: the table must be checked even where torch (imported
    # by the dpp package) is missing.
    spec = importlib.util.spec_from_file_location("dpp_lib_under_test", LIB_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ERRORS


def compare(header, table):
    problems = []
    by_number = {num: name for name, num in table.items()}
    for name, num, _ in header:
        if name not in table:
            other = by_number.get(num)
            problems.append(
                "%s (%d) is in error.h but not in _lib.ERRORS%s"
                % (name, num, " (which names %d %s)" % (num, other) if other else "")
            )
        elif table[name] != num:
            problems.append("%s is %d in error.h but %d in _lib.ERRORS" % (name, num, table[name]))
    names = {name for name, _, _ in header}
    for name, num in sorted(table.items(), key=lambda kv: -kv[1]):
        if name not in names:
            problems.append("%s (%d) is in _lib.ERRORS but not in error.h" % (name, num))
    return problems


def compare_library(header):
    path = os.environ.get("DPP_LIB")
    if not path:
        log("DPP_LIB unset: the library's names and messages are not checked")
        return []
    lib = ctypes.CDLL(path)
    for fn in (lib.dpp_err_name, lib.dpp_strerror):
        fn.argtypes = [ctypes.c_int]
        fn.restype = ctypes.c_char_p
    problems = []
    for name, num, msg in header:
        got_name = lib.dpp_err_name(num).decode()
        got_msg = lib.dpp_strerror(num).decode()
        if got_name != name or got_msg != msg:
            problems.append(
                "%s (%d): error.h says %r, %r; %s says %r, %r" % (name, num, name, msg, path, got_name, got_msg)
            )
    return problems


def main():
    header = header_errors()
    table = python_errors()
    problems = compare(header, table)
    if problems:
        for p in problems:
            log("MISMATCH:", p)
        raise AssertionError(
            "python/dpp/_lib.py ERRORS differs from include/dpp/error.h:\n  " + "\n  ".join(problems)
        )
    log("%d codes agree between error.h and _lib.ERRORS (%d..%d)" % (len(header), header[0][1], header[-1][1]))
    problems = compare_library(header)
    if problems:
        raise AssertionError("libdppclient differs from include/dpp/error.h:\n  " + "\n  ".join(problems))
    log("PASS")


if __name__ == "__main__":
    main()
