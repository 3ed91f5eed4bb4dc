#!/usr/bin/env bash
# Offline checks of deploy/ (docs/operations.md): every YAML file parses and
# the manifests, alert rules, systemd units and Dockerfile keep the
# invariants that tie them to the daemons (check_deploy.py); `kubectl
# kustomize` renders deploy/k8s; `systemd-analyze verify` accepts the units;
# promtool (when installed) checks the alert rules and runs alerts_test.yaml.
# Needs no cluster, no network and no build; takes about a second.
#
# Exit 0: all checks that could run passed (the ones that could not are
# named in a "note:" line). 1: a check failed (FAIL lines say which).
# 77: nothing to check with: /usr/bin/python3 has no yaml module
# (python3-yaml) and kubectl is missing.
#
# Environment: DPP_SOURCE_DIR (default: two levels up), DPP_BIN_DIR (a build
# dir with dpp-worker, for its --help; optional), DPP_DEPLOY_KUBECONFIG (a
# kubeconfig to run `kubectl apply --dry-run=client` against; without it a
# config pointing nowhere is used, so no cluster is ever contacted),
# DPP_PROMTOOL (promtool, when not on PATH), DPP_DEPLOY_PYTHON (default
# /usr/bin/python3).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${DPP_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
py=${DPP_DEPLOY_PYTHON:-/usr/bin/python3}

have_yaml=0
if [ -x "$py" ] && "$py" -c 'import yaml' 2>/dev/null; then
    have_yaml=1
fi
kubectl=$(command -v kubectl || true)
if [ "$have_yaml" = 0 ] && [ -z "$kubectl" ]; then
    echo "deploy/check: SKIP: $py has no yaml module (apt-get install python3-yaml) and kubectl is missing"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
bad() {
    echo "FAIL $*"
    failed=1
}
note() { echo "note: $*"; }

# ---- kubectl: render the kustomization, then a client dry-run -------------
# kubectl must never reach a real cluster from a test: unless told
# otherwise it gets a kubeconfig whose server is a closed local port.
if [ -n "${DPP_DEPLOY_KUBECONFIG:-}" ]; then
    export KUBECONFIG=$DPP_DEPLOY_KUBECONFIG
else
    cat >"$tmp/kubeconfig" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
users: [{name: none, user: {token: none}}]
current-context: none
EOF
    export KUBECONFIG=$tmp/kubeconfig
fi
rendered=""
if [ -n "$kubectl" ]; then
    if timeout 20 "$kubectl" kustomize "$src/deploy/k8s" >"$tmp/rendered.yaml" 2>"$tmp/kustomize.err" </dev/null; then
        rendered=$tmp/rendered.yaml
        echo "ok: kubectl kustomize deploy/k8s ($(grep -c '^kind:' "$rendered") objects)"
        # Client dry-run still asks the API server which kinds exist.
        if timeout 20 "$kubectl" apply --dry-run=client --validate=false -f "$rendered" \
            >"$tmp/apply.out" 2>&1 </dev/null; then
            echo "ok: kubectl apply --dry-run=client"
        elif grep -qE "connection refused|unable to recognize|couldn't get current server API group list|no such host|i/o timeout|Unauthorized|Please enter Username" "$tmp/apply.out"; then
            note "kubectl apply --dry-run=client needs an API server even for a client dry-run; skipped (set DPP_DEPLOY_KUBECONFIG to run it)"
        else
            bad "kubectl apply --dry-run=client --validate=false -f <kustomize output>:"
            sed 's/^/    /' "$tmp/apply.out"
        fi
    else
        bad "kubectl kustomize deploy/k8s:"
        sed 's/^/    /' "$tmp/kustomize.err"
    fi
else
    note "kubectl not found: kustomization not rendered"
fi

# ---- the invariants ---------------------------------------------------------
args=("$src")
[ -n "$rendered" ] && [ "$have_yaml" = 1 ] && args+=(--rendered "$rendered")
if [ -n "${DPP_BIN_DIR:-}" ] && [ -x "$DPP_BIN_DIR/dpp-worker" ]; then
    "$DPP_BIN_DIR/dpp-worker" --help >"$tmp/worker-help.txt" 2>&1 || true
    args+=(--worker-help "$tmp/worker-help.txt")
fi
if [ -x "$py" ]; then
    if "$py" "$here/check_deploy.py" "${args[@]}"; then
        echo "ok: invariants of deploy/ (check_deploy.py)"
    else
        failed=1
    fi
else
    note "$py not found: invariants not checked"
fi

# ---- the image's entrypoint ---------------------------------------------------
ep=$src/deploy/docker/entrypoint.sh
if ! sh -n "$ep"; then
    bad "deploy/docker/entrypoint.sh: sh -n"
elif ! sh "$ep" --help >/dev/null || [ "$(PATH=/usr/bin:/bin sh "$ep" echo hi)" != "hi" ]; then
    bad "deploy/docker/entrypoint.sh: --help or passing a command through"
else
    echo "ok: deploy/docker/entrypoint.sh"
fi

# ---- systemd-analyze verify ---------------------------------------------------
# The units name /usr/local/bin/dpp-*, which verify wants to exist: point
# them at stubs. Any line verify prints (unknown keys, bad values) fails.
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$tmp/bin" "$tmp/units" "$tmp/probe"
    printf '[Unit]\nDescription=probe\n[Service]\nExecStart=/bin/true\n' >"$tmp/probe/probe.service"
    if ! out=$(systemd-analyze verify "$tmp/probe/probe.service" 2>&1) || [ -n "$out" ]; then
        note "systemd-analyze verify does not work here (${out%%$'\n'*}); units not verified"
    else
        for b in dpp-master dpp-worker; do
            printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/$b"
            chmod +x "$tmp/bin/$b"
        done
        for u in "$src"/deploy/systemd/*.service; do
            sed "s#/usr/local/bin/#$tmp/bin/#g" "$u" >"$tmp/units/$(basename "$u")"
        done
        cp "$tmp/units/dpp-worker@.service" "$tmp/units/dpp-worker@7101.service"
        if out=$(cd "$tmp/units" && systemd-analyze verify ./*.service 2>&1) && [ -z "$out" ]; then
            echo "ok: systemd-analyze verify deploy/systemd/*.service"
        else
            bad "systemd-analyze verify:"
            echo "${out:-(exit status only)}" | sed "s#$tmp/units/#deploy/systemd/#g; s/^/    /"
        fi
        # Keep the hardening: exposure as systemd-analyze security rates it
        # (0 best, 10 worst; 1.2 when written).
        for u in dpp-master.service dpp-worker@7101.service; do
            level=$(cd "$tmp/units" && systemd-analyze security --offline=yes "./$u" 2>/dev/null |
                sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
            if [ -z "$level" ]; then
                note "systemd-analyze security --offline not available; $u not rated"
            elif awk -v l="$level" 'BEGIN { exit !(l > 3.0) }'; then
                bad "deploy/systemd/${u/@7101/@}: exposure level $level > 3.0 (systemd-analyze security)"
            else
                echo "ok: ${u/@7101/@} exposure level $level"
            fi
        done
    fi
else
    note "systemd-analyze not found: units not verified"
fi

# ---- Prometheus rules ---------------------------------------------------------
# promtool (Debian: prometheus) parses the expressions and runs
# alerts_test.yaml on a copy of the rules without annotations.
promtool=${DPP_PROMTOOL:-$(command -v promtool || true)}
if [ -n "$promtool" ]; then
    if "$promtool" check rules "$src/deploy/prometheus/alerts.yaml" >"$tmp/promtool.out" 2>&1; then
        echo "ok: promtool check rules"
    else
        bad "promtool check rules deploy/prometheus/alerts.yaml:"
        sed 's/^/    /' "$tmp/promtool.out"
    fi
    if [ "$have_yaml" = 1 ]; then
        mkdir -p "$tmp/prom"
        cp "$here/alerts_test.yaml" "$tmp/prom/"
        "$py" - "$src/deploy/prometheus/alerts.yaml" "$tmp/prom/alerts.yaml" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for g in d["groups"]:
    for r in g["rules"]:
        r.pop("annotations", None)
yaml.safe_dump(d, open(sys.argv[2], "w"))
PY
        if (cd "$tmp/prom" && "$promtool" test rules alerts_test.yaml) >"$tmp/promtest.out" 2>&1; then
            echo "ok: promtool test rules (tests/deploy/alerts_test.yaml)"
        else
            bad "promtool test rules tests/deploy/alerts_test.yaml:"
            sed 's/^/    /' "$tmp/promtest.out"
        fi
    fi
else
    note "promtool not found: rule expressions not parsed, alerts_test.yaml not run (structure checked above)"
fi

if [ "$failed" != 0 ]; then
    echo "deploy/check: FAILED"
    exit 1
fi
echo "deploy/check: passed"
