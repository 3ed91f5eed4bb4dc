#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then a program built only from
# what was installed (pkg-config dppclient, libdppclient.so) reads a session
# from real daemons. Also checks the .so exports nothing but the public API,
# and that the README's Python install (a venv, `pip install ./python`)
# gives a package that finds its bundled libdppclient.so without DPP_LIB,
# from which a session submitted in Python trains a model.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
dpp_setup install
command -v cc >/dev/null || dpp_fail "no C compiler (cc) to build the consumer"

prefix=$DPP_TMP/prefix
dpp_step "install into $prefix"
cmake --install "$DPP_BIN_DIR" --prefix "$prefix" >"$DPP_TMP/install.log" ||
    { cat -- "$DPP_TMP/install.log" >&2; dpp_fail "cmake --install failed"; }
for f in bin/dpp-master bin/dpp-worker bin/dppctl bin/dpp-gen include/dpp/client.h \
    include/dpp/error.h; do
    [[ -e $prefix/$f ]] || dpp_fail "not installed: $f"
done
pc=$(find "$prefix" -name dppclient.pc | head -n 1)
[[ -n $pc ]] || dpp_fail "dppclient.pc not installed"
so=$(find "$prefix" -name 'libdppclient.so' | head -n 1)
[[ -n $so ]] || dpp_fail "libdppclient.so not installed"
[[ -n $(find "$prefix" -name 'libdppclient.a') ]] || dpp_fail "libdppclient.a not installed"

dpp_step "the shared library exports only the public API"
leaked=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBR]$/ {print $3}' |
    grep -Ev '^(dpp_client_|dpp_batch_|dpp_session_|dpp_free@|dpp_strerror|dpp_err_name)' || true)
[[ -z $leaked ]] || dpp_fail "libdppclient.so exports internal symbols: $leaked"

dpp_step "build a consumer with pkg-config from the installed tree"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
# A sanitizer build's library needs the sanitizer runtime in the program too.
san=()
[[ ${DPP_SANITIZE:-OFF} != ON ]] || san=(-fsanitize=address,undefined)
# shellcheck disable=SC2046 # pkg-config output is a word list by design
cc -std=c11 -Wall -Wextra -Werror "${san[@]}" -o "$DPP_TMP/consumer" \
    "$DPP_SOURCE_DIR/tests/integration/consumer.c" \
    $(pkg-config --cflags --libs dppclient) || dpp_fail "the consumer does not build"

dpp_step "the consumer reads a session through libdppclient.so"
root=$DPP_TMP/root
dpp_gen --rows 5000 --shards 3 --partitions 1 --seed 4 --out "$root/criteo"
dpp_start_master --data-root "$root"
dpp_start_worker --threads 1
dpp_submit "$DPP_SOURCE_DIR/examples/criteo.json"
out=$DPP_TMP/consumer.out
LD_LIBRARY_PATH=$(dirname "$so") dpp_timeout 120 "$DPP_TMP/consumer" "$DPP_MASTER_ADDR" \
    "$DPP_SESSION" >"$out" || { cat -- "$out"; dpp_fail "the consumer failed"; }
cat -- "$out"
grep -qx 'rows 5000 batches 2 epochs 1' "$out" || dpp_fail "the consumer did not get every row"

dpp_step "the README's Python install: a fresh venv, pip install ./python"
# the README's two commands, offline (--no-index: this machine has no PyPI)
venv=$DPP_TMP/venv
/usr/bin/python3 -m venv --system-site-packages "$venv" >"$DPP_TMP/venv.log" 2>&1 ||
    { cat -- "$DPP_TMP/venv.log" >&2; dpp_fail "python3 -m venv failed (is python3-venv installed?)"; }
(cd "$DPP_SOURCE_DIR" && DPP_LIB=$DPP_BIN_DIR/libdppclient.so dpp_timeout 300 \
    "$venv/bin/python" -m pip install --no-build-isolation --no-deps --no-index ./python) \
    >"$DPP_TMP/pip.log" 2>&1 || { cat -- "$DPP_TMP/pip.log" >&2; dpp_fail "pip install ./python failed"; }
bundled=$(find "$venv" -path '*/site-packages/dpp/libdppclient.so.0' | head -n 1)
[[ -n $bundled ]] || dpp_fail "the installed package holds no libdppclient.so.0"
preload=()
if [[ ${DPP_SANITIZE:-OFF} == ON ]]; then
    preload=("LD_PRELOAD=$(cc -print-file-name=libasan.so)" "ASAN_OPTIONS=detect_leaks=0")
fi
dpp_step "train from a session submitted in Python (dpp.submit), in the venv"
# from another folder, without DPP_LIB or PYTHONPATH: only the venv's package
(cd "$DPP_TMP" && timeout -k 5 300 env -u DPP_LIB -u PYTHONPATH "${preload[@]}" \
    "$venv/bin/python" "$DPP_SOURCE_DIR/tests/integration/venv_train.py" "$DPP_MASTER_ADDR" 5000 \
    "$DPP_SOURCE_DIR/examples/criteo.json") >"$DPP_TMP/py.out" 2>&1 ||
    { cat -- "$DPP_TMP/py.out" >&2; dpp_fail "training in the venv failed"; }
grep -qF "with $bundled" "$DPP_TMP/py.out" ||
    dpp_fail "the venv's dpp did not load its bundled library: $(head -n 1 "$DPP_TMP/py.out")"
dpp_log "$(tail -n 1 "$DPP_TMP/py.out")"
dpp_log "PASS"
