#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Scrapes a dpp daemon's /metrics and checks the text format twice: with
prometheus_client's own parser (an independent implementation, Debian's
python3-prometheus-client) and with the format rules written out here.

    scrape.py URL [OUT.json]

Prints "name{labels} value" for every sample, exits 1 on a format error.
With OUT.json, writes the samples there as {"name{labels}": value}."""
import json
import re
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def fail(msg):
    print("scrape: FORMAT: " + msg)
    sys.exit(1)


def check_rules(text):
    """The 0.0.4 rules a scraper relies on: TYPE once per family and before
    its samples, families contiguous, histograms with cumulative buckets
    ending in +Inf and a _count equal to that bucket."""
    if not text.endswith("\n"):
        fail("the text does not end with a newline")
    typed, seen_done, current = {}, set(), None
    buckets = {}
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            name = parts[2]
            if not NAME.match(name):
                fail("bad family name %r" % name)
            if line.startswith("# TYPE "):
                if name in typed:
                    fail("TYPE twice for %s" % name)
                typed[name] = parts[3]
                if current and current != name:
                    seen_done.add(current)
                if name in seen_done:
                    fail("family %s not contiguous" % name)
                current = name
            continue
        if line.startswith("#") or not line:
            fail("unexpected line %r" % line)
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$", line)
        if not m:
            fail("bad sample line %r" % line)
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in typed else name
        if family not in typed:
            fail("sample %s before its TYPE" % name)
        if family != current:
            fail("sample %s outside its family's block" % name)
        float(value)  # parses, including +Inf/NaN
        if typed[family] == "histogram":
            key = re.sub(r',?le="[^"]*"', "", labels).replace("{,", "{")
            key = "" if key == "{}" else key
            b = buckets.setdefault((family, key), {"le": [], "count": None})
            if name.endswith("_bucket"):
                le = re.search(r'le="([^"]*)"', labels).group(1)
                b["le"].append((le, float(value)))
            elif name.endswith("_count"):
                b["count"] = float(value)
    for (family, key), b in buckets.items():
        les = b["le"]
        if not les or les[-1][0] != "+Inf":
            fail("histogram %s%s does not end with le=\"+Inf\"" % (family, key))
        counts = [v for _, v in les]
        if counts != sorted(counts):
            fail("histogram %s%s is not cumulative" % (family, key))
        if b["count"] != counts[-1]:
            fail("histogram %s%s: _count %s != +Inf bucket %s" % (family, key, b["count"], counts[-1]))


def main():
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        ctype = r.headers.get("Content-Type")
        text = r.read().decode("utf-8")
    if ctype != "text/plain; version=0.0.4; charset=utf-8":
        fail("content type %r" % ctype)
    check_rules(text)
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
            key = s.name + ("{%s}" % labels if labels else "")
            samples[key] = s.value
    for k in sorted(samples):
        print("%s %s" % (k, samples[k]))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(samples, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
