#!/usr/bin/env bash
# docs/tutorial.md as written, so that it cannot rot: every ```bash block in
# order in one shell (set -euo pipefail), the ```python blocks saved under
# the names their "# file: NAME" line gives, from a folder where build/ is
# this build tree, with only the tutorial's own words between the steps.
# The tokenizer comes from the npm tiktoken package of scripts/
# install-npm-tools.sh's cache (make test installs it), as the tutorial's
# offline way says. Whatever the tutorial started is stopped however it ends.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dpp_setup tutorial

doc=$DPP_SOURCE_DIR/docs/tutorial.md
work=$DPP_TMP/work
script=$DPP_TMP/tutorial.bash
mkdir -p "$work" "$DPP_TMP/repo"
ln -s "$DPP_BIN_DIR" "$DPP_TMP/repo/build"
dpp_on_cleanup 'for f in "$work"/*.pid; do [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null; done'

python3 - "$doc" "$work" "$script" <<'PY'
import os, re, sys
doc, work, script = sys.argv[1:]
blocks = re.findall(r"^```(\w*)\n(.*?)^```$", open(doc).read(), flags=re.S | re.M)
bash, files = [], []
for lang, body in blocks:
    if lang == "bash":
        bash.append(body)
    elif lang == "python":
        m = re.match(r"# file: (\S+)\n", body)
        assert m, "a python block without its '# file: NAME' line:\n" + body[:200]
        with open(os.path.join(work, m.group(1)), "w") as f:
            f.write(body)
        files.append(m.group(1))
assert len(bash) >= 6 and files, (len(bash), files)
with open(script, "w") as f:
    f.write("set -euo pipefail\n")
    for i, body in enumerate(bash):
        f.write("echo '== tutorial block %d'\n%s\n" % (i + 1, body))
print("tutorial: %d bash blocks, python files %s" % (len(bash), ", ".join(files)))
PY

dpp_step "run docs/tutorial.md"
out=$DPP_TMP/tutorial.out
rc=0
(cd "$DPP_TMP/repo" && WORK=$work NPM_PREFIX=${DPP_NPM_CACHE:-$HOME/.cache/dpp-npm} \
    DPP_LIB=$DPP_BIN_DIR/libdppclient.so PYTHONPATH=$DPP_SOURCE_DIR/python \
    PATH=/usr/bin:$PATH dpp_timeout 600 bash "$script") >"$out" 2>&1 || rc=$?
cat -- "$out"
((rc == 0)) || dpp_fail "docs/tutorial.md failed (exit $rc) at the block above"
grep -Eq '^epoch 1: [0-9]+ steps, loss [0-9.]+$' "$out" || dpp_fail "the tutorial trained no second epoch"
grep -Eq '^session s[0-9a-f]+: done, [1-9][0-9]* documents, [1-9][0-9]* tokens$' "$out" ||
    dpp_fail "the tutorial's session did not end done"
dpp_log "PASS"
