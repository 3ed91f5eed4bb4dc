#!/usr/bin/python3
"""Offline checks of deploy/: the Kubernetes manifests, the Prometheus rules,
the systemd units and the Dockerfile, and the invariants that tie them to
each other and to the daemons' flags (docs/operations.md).

usage: check_deploy.py SOURCE_DIR [--rendered FILE] [--worker-help FILE]

--rendered: the output of `kubectl kustomize deploy/k8s`, compared with the
files. --worker-help: the text of `dpp-worker --help`, for the drain timeout's
default. Prints one line per problem and exits 1 if there is any; sections
that need the yaml module are skipped with a note when it is missing.
"""

import os
import re
import shlex
import sys

try:
    import yaml
except ImportError:  # the caller decides whether that is a skip
    yaml = None

errors = []
notes = []


def fail(where, msg):
    errors.append(f"{where}: {msg}")


def rel(path):
    return os.path.relpath(path, SRC)


# ---------------------------------------------------------------- helpers


def flags_of(args):
    """--name value / --name=value pairs of an argument list: {name: [values]};
    a flag without a value (next item is a flag, or the end) maps to ''."""
    out = {}
    i = 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
            elif i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
                k, v = a[2:], str(args[i + 1])
                i += 1
            else:
                k, v = a[2:], ""
            out.setdefault(k, []).append(v)
        i += 1
    return out


def flag(flags, name, default=None):
    v = flags.get(name)
    return v[-1] if v else default


def split_hostport(s):
    m = re.fullmatch(r"\[(.*)\]:(\d+)|([^:\[\]]*):(\d+)", s or "")
    if not m:
        return None, None
    host = m.group(1) if m.group(1) is not None else m.group(3)
    return host, int(m.group(2) or m.group(4))


def is_loopback(host):
    return host in ("localhost", "::1") or host.startswith("127.")


def cpu_cores(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def mem_mib(q):
    q = str(q)
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024,
             "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for u, f in units.items():
        if q.endswith(u):
            return float(q[: -len(u)]) * f
    return float(q) / 2**20


def dig(d, *keys, default=None):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def drain_default(help_file):
    """The worker's --drain-timeout-s default, from its --help when given."""
    if help_file and os.path.exists(help_file):
        text = open(help_file, encoding="utf-8", errors="replace").read()
        m = re.search(r"--drain-timeout-s N.*?\(default (\d+)\)", text, re.S)
        if m:
            return int(m.group(1))
        notes.append("dpp-worker --help names no --drain-timeout-s default; assuming 30")
    return 30


# ---------------------------------------------------------------- YAML


def load_yaml_files():
    docs = {}  # path -> [doc]
    for d in ("deploy/k8s", "deploy/prometheus"):
        for dirpath, _, files in os.walk(os.path.join(SRC, d)):
            for f in sorted(files):
                if not f.endswith((".yaml", ".yml")):
                    continue
                p = os.path.join(dirpath, f)
                try:
                    with open(p, encoding="utf-8") as fh:
                        docs[p] = [x for x in yaml.safe_load_all(fh) if x is not None]
                except yaml.YAMLError as e:
                    fail(rel(p), f"not valid YAML: {e}")
    if not docs:
        fail("deploy", "no YAML files under deploy/k8s or deploy/prometheus")
    return docs


POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
CLUSTER_KINDS = {"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
                 "StorageClass", "PriorityClass"}


def check_k8s(docs, worker_help):
    k8s_dir = os.path.join(SRC, "deploy/k8s")
    objs = {}  # (kind, name) -> (doc, path)
    kust = None
    for p, ds in docs.items():
        if not p.startswith(k8s_dir + os.sep):
            continue
        for d in ds:
            where = rel(p)
            if not isinstance(d, dict):
                fail(where, "a document is not a mapping")
                continue
            kind = d.get("kind")
            if kind == "Kustomization":
                kust = (d, p)
                continue
            name = dig(d, "metadata", "name")
            for k in ("apiVersion", "kind"):
                if not d.get(k):
                    fail(where, f"a document has no {k}")
            if not name:
                fail(where, f"{kind or 'a document'} has no metadata.name")
                continue
            where = f"{where} {kind}/{name}"
            if kind not in CLUSTER_KINDS and not dig(d, "metadata", "namespace"):
                fail(where, "no metadata.namespace")
            if (kind, name) in objs:
                fail(where, "defined twice")
            objs[(kind, name)] = (d, p)

    # The kustomization lists every manifest, and only existing ones.
    if kust is None:
        fail("deploy/k8s", "no kustomization.yaml")
    else:
        listed = set(kust[0].get("resources") or [])
        for r in listed:
            if not os.path.exists(os.path.join(k8s_dir, r)):
                fail(rel(kust[1]), f"resource {r} does not exist")
        for f in os.listdir(k8s_dir):
            if f.endswith((".yaml", ".yml")) and f != os.path.basename(kust[1]) and f not in listed:
                fail(rel(kust[1]), f"{f} is not listed in resources")

    namespaces = {n for (k, n) in objs if k == "Namespace"}
    for (kind, name), (d, p) in objs.items():
        ns = dig(d, "metadata", "namespace")
        if ns and ns not in namespaces:
            fail(f"{rel(p)} {kind}/{name}", f"namespace {ns} is not defined here")

    def get(kind, name, why):
        o = objs.get((kind, name))
        if o is None:
            fail("deploy/k8s", f"no {kind} {name} ({why})")
        return o

    secrets = {n: d for (k, n), (d, _) in objs.items() if k == "Secret"}
    pvcs = {n: d for (k, n), (d, _) in objs.items() if k == "PersistentVolumeClaim"}
    services = {n: d for (k, n), (d, _) in objs.items() if k == "Service"}

    # Every container of every workload.
    summaries = {}
    for (kind, name), (d, p) in objs.items():
        if kind not in POD_KINDS:
            continue
        summaries[(kind, name)] = check_workload(kind, name, d, p, secrets, pvcs)

    info = {}
    master = get("StatefulSet", "dpp-master", "the master")
    worker = get("Deployment", "dpp-worker", "the workers")
    ms = summaries.get(("StatefulSet", "dpp-master"))
    ws = summaries.get(("Deployment", "dpp-worker"))

    if master and ms:
        d, p = master
        where = f"{rel(p)} StatefulSet/dpp-master"
        if d["spec"].get("replicas", 1) != 1:
            fail(where, "replicas must be 1 (one master per state dir)")
        state_dir = flag(ms["flags"], "state-dir")
        templates = {dig(t, "metadata", "name"): t for t in d["spec"].get("volumeClaimTemplates") or []}
        if not state_dir:
            fail(where, "no --state-dir")
        else:
            m = ms["mounts"].get(state_dir)
            if m is None or m["name"] not in templates:
                fail(where, f"--state-dir {state_dir} is not a volumeClaimTemplate mount")
            elif m.get("readOnly"):
                fail(where, "the state dir is mounted read-only")
        gov = d["spec"].get("serviceName")
        if gov not in services:
            fail(where, f"serviceName {gov} is not a Service here")
        if not ms["flags"].get("data-root"):
            fail(where, "no --data-root")
        if state_dir and ms["mounts"].get(state_dir):
            t = templates.get(ms["mounts"][state_dir]["name"]) or {}
            size = dig(t, "spec", "resources", "requests", "storage")
            if size is None:
                fail(where, "the state volume claim template requests no storage")
            else:
                info["state_gib"] = mem_mib(size) / 1024

    # The Service workers and clients use: not headless (resolved once, must
    # keep its address across master restarts), selecting the master pod,
    # with the master's listen port.
    if master and ws and ms:
        where = f"{rel(worker[1])} Deployment/dpp-worker"
        host, port = split_hostport(flag(ws["flags"], "master"))
        if host is None:
            fail(where, "no valid --master HOST:PORT")
        else:
            svc_name, _, rest = host.partition(".")
            svc = services.get(svc_name)
            if svc is None:
                fail(where, f"--master {host}: no Service {svc_name}")
            else:
                swhere = f"Service/{svc_name}"
                svc_ns = dig(svc, "metadata", "namespace")
                if rest and not (rest == svc_ns or rest.startswith(svc_ns + ".")):
                    fail(where, f"--master {host} is not in the Service's namespace {svc_ns}")
                if dig(svc, "spec", "clusterIP") == "None":
                    fail(swhere, "must not be headless: workers and clients resolve the master "
                         "once and need an address that survives a master restart")
                sel = dig(svc, "spec", "selector") or {}
                if not sel or any(ms["labels"].get(k) != v for k, v in sel.items()):
                    fail(swhere, "selector does not select the master pod")
                _, mport = split_hostport(flag(ms["flags"], "listen"))
                ok = False
                for sp in dig(svc, "spec", "ports") or []:
                    if sp.get("port") == port:
                        tp = sp.get("targetPort", sp.get("port"))
                        ok = ms["ports"].get(tp, tp) == mport
                if not ok:
                    fail(swhere, f"no port {port} leading to the master's --listen port {mport}")
        # Same data path on both sides: leases carry the master's resolved paths.
        mroots = set(ms["flags"].get("data-root") or [])
        wroots = set(ws["flags"].get("data-root") or [])
        if not wroots:
            fail(where, "no --data-root (confine the worker to the master's roots)")
        elif wroots != mroots:
            fail(where, f"--data-root {sorted(wroots)} differs from the master's {sorted(mroots)}")
        for r in mroots:
            mm = ms["mount_of"](r)
            wm = ws["mount_of"](r)
            if mm is None or wm is None or mm["name"] != wm["name"] or mm["mountPath"] != wm["mountPath"]:
                fail(where, f"data root {r} is not the same volume at the same path as in the master")

    if worker and ws:
        d, p = worker
        where = f"{rel(p)} Deployment/dpp-worker"
        spec = d["spec"]
        pod = spec["template"]["spec"]
        drain = int(flag(ws["flags"], "drain-timeout-s", drain_default(worker_help)))
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if not grace > drain:
            fail(where, f"terminationGracePeriodSeconds {grace} must exceed --drain-timeout-s {drain}")
        if "replicas" in spec:
            fail(where, "spec.replicas is set: the HPA owns it")
        lhost, lport = split_hostport(flag(ws["flags"], "listen"))
        if lhost in ("0.0.0.0", "::", "") and not flag(ws["flags"], "advertise"):
            fail(where, "--listen on a wildcard address needs --advertise (clients would get 0.0.0.0)")
        adv = flag(ws["flags"], "advertise")
        if adv:
            _, aport = split_hostport(adv.replace("$(POD_IP)", "10.0.0.1"))
            if aport != lport:
                fail(where, f"--advertise port {aport} is not the --listen port {lport}")
            if "$(POD_IP)" in adv and not any(
                    e.get("name") == "POD_IP" and dig(e, "valueFrom", "fieldRef", "fieldPath") == "status.podIP"
                    for e in ws["env"]):
                fail(where, "--advertise uses $(POD_IP) but env POD_IP is not status.podIP")
        # Threads: explicit (the default counts the node's cores), within the
        # CPU limit, and with the readers' share inside --max-buffer-mb.
        threads = int(flag(ws["flags"], "threads", "0") or 0)
        if threads <= 0:
            fail(where, "--threads must be set (> 0): the default counts the node's cores, not the pod's")
        cpu = dig(ws["resources"], "limits", "cpu") or dig(ws["resources"], "requests", "cpu")
        if threads > 0 and cpu is not None and threads > max(1.0, cpu_cores(cpu)):
            fail(where, f"--threads {threads} exceeds the CPU limit {cpu}")
        depth = int(flag(ws["flags"], "read-depth", "4"))
        chunk_kb = int(flag(ws["flags"], "read-chunk-kb", "512"))
        rec_mb = int(flag(ws["flags"], "max-record-mb", "16"))
        buf_mb = int(flag(ws["flags"], "max-buffer-mb", "256"))
        readers_mib = max(threads, 1) * (depth * chunk_kb / 1024 + rec_mb) + 4
        if readers_mib >= buf_mb:
            fail(where, f"--max-buffer-mb {buf_mb} leaves nothing for blocks after the readers "
                 f"({readers_mib:.0f} MiB): the worker refuses to start")
        mem = dig(ws["resources"], "limits", "memory")
        if mem is not None and mem_mib(mem) <= buf_mb:
            fail(where, f"memory limit {mem} is not above --max-buffer-mb {buf_mb}")

        # HPA and PDB aim at the workers.
        hpas = [(n, dd) for (k, n), (dd, _) in objs.items() if k == "HorizontalPodAutoscaler"]
        if not hpas:
            fail("deploy/k8s", "no HorizontalPodAutoscaler for the workers")
        for n, h in hpas:
            hw = f"HorizontalPodAutoscaler/{n}"
            if h.get("apiVersion") != "autoscaling/v2":
                fail(hw, "apiVersion must be autoscaling/v2")
            ref = dig(h, "spec", "scaleTargetRef") or {}
            if (ref.get("kind"), ref.get("name")) != ("Deployment", "dpp-worker"):
                fail(hw, "scaleTargetRef is not Deployment/dpp-worker")
            kinds = [(m.get("type"), dig(m, "resource", "name")) for m in dig(h, "spec", "metrics") or []]
            if ("Resource", "cpu") not in kinds:
                fail(hw, "no CPU metric")
            if dig(ws["resources"], "requests", "cpu") is None:
                fail(hw, "the workers have no CPU request to take a utilization of")
            lo, hi = dig(h, "spec", "minReplicas", default=1), dig(h, "spec", "maxReplicas", default=0)
            if not 1 <= lo <= hi:
                fail(hw, f"minReplicas {lo} / maxReplicas {hi}")
        pdbs = [(n, dd) for (k, n), (dd, _) in objs.items() if k == "PodDisruptionBudget"]
        if not pdbs:
            fail("deploy/k8s", "no PodDisruptionBudget for the workers")
        for n, b in pdbs:
            sel = dig(b, "spec", "selector", "matchLabels") or {}
            if not sel or any(ws["labels"].get(k) != v for k, v in sel.items()):
                fail(f"PodDisruptionBudget/{n}", "selector does not select the worker pods")
    return objs, info


def check_workload(kind, name, d, p, secrets, pvcs):
    where = f"{rel(p)} {kind}/{name}"
    tmpl = dig(d, "spec", "template") or {}
    pod = tmpl.get("spec") or {}
    labels = dig(tmpl, "metadata", "labels") or {}
    sel = dig(d, "spec", "selector", "matchLabels") or {}
    if any(labels.get(k) != v for k, v in sel.items()):
        fail(where, "spec.selector does not match the pod template's labels")
    psc = pod.get("securityContext") or {}
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    claim_templates = {dig(t, "metadata", "name") for t in dig(d, "spec", "volumeClaimTemplates") or []}
    annotations = dig(tmpl, "metadata", "annotations") or {}
    summary = None
    containers = pod.get("containers") or []
    if not containers:
        fail(where, "no containers")
    for c in containers + (pod.get("initContainers") or []):
        cw = f"{where} container {c.get('name')}"
        res = c.get("resources") or {}
        for k in ("cpu", "memory"):
            if dig(res, "requests", k) is None:
                fail(cw, f"no resources.requests.{k}")
        if dig(res, "limits", "memory") is None:
            fail(cw, "no resources.limits.memory")
        sc = c.get("securityContext") or {}
        if sc.get("runAsNonRoot") is not True:
            fail(cw, "securityContext.runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) in (0, None):
            fail(cw, "no non-zero runAsUser (container or pod)")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(cw, "securityContext.readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(cw, "securityContext.allowPrivilegeEscalation is not false")
        if "ALL" not in (dig(sc, "capabilities", "drop") or []):
            fail(cw, "capabilities.drop does not include ALL")
        seccomp = sc.get("seccompProfile") or psc.get("seccompProfile") or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            fail(cw, "no seccompProfile (RuntimeDefault or Localhost) on the container or pod")

        args = [str(a) for a in (c.get("command") or [])[1:] + (c.get("args") or [])]
        flags = flags_of(args)
        ports = {pt.get("name"): pt.get("containerPort") for pt in c.get("ports") or []}
        mounts = {m.get("mountPath"): m for m in c.get("volumeMounts") or []}

        def mount_of(path, mounts=mounts):
            best = None
            for mp, m in mounts.items():
                if path == mp or path.startswith(mp.rstrip("/") + "/"):
                    if best is None or len(mp) > len(best["mountPath"]):
                        best = m
            return best

        # Only the master's state dir is written: every other mount is
        # read-only, and so are the claims behind them.
        state_dir = flag(flags, "state-dir")
        for mp, m in mounts.items():
            if state_dir is not None and mp == state_dir:
                continue
            if m.get("readOnly") is not True:
                fail(cw, f"volume {m.get('name')} at {mp} is not mounted readOnly")
            v = volumes.get(m.get("name"))
            if v is None and m.get("name") not in claim_templates:
                fail(cw, f"mount {mp}: no volume {m.get('name')}")
            if v and "persistentVolumeClaim" in v:
                if dig(v, "persistentVolumeClaim", "readOnly") is not True:
                    fail(cw, f"volume {v['name']}: persistentVolumeClaim.readOnly is not true")
                claim = dig(v, "persistentVolumeClaim", "claimName")
                if claim not in pvcs:
                    fail(cw, f"volume {v['name']}: no PersistentVolumeClaim {claim} here")

        is_dpp = any(os.path.basename(str(x)).startswith("dpp-") for x in (c.get("command") or [])[:1])
        if not is_dpp:
            continue
        # Health, readiness and metrics on the --http port.
        http = flag(flags, "http")
        _, hport = split_hostport(http)
        if hport is None:
            fail(cw, "no --http HOST:PORT")
        else:
            if ports.get("http") != hport:
                fail(cw, f"no container port named http = {hport} (the --http port)")
            for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                                ("startupProbe", "/healthz")):
                pr = c.get(probe)
                if pr is None:
                    if probe != "startupProbe":
                        fail(cw, f"no {probe}")
                    continue
                g = pr.get("httpGet") or {}
                if g.get("path") != path:
                    fail(cw, f"{probe} is not an httpGet of {path}")
                if g.get("port") not in ("http", hport):
                    fail(cw, f"{probe} port {g.get('port')} is not the --http port {hport}")
            want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(hport),
                    "prometheus.io/path": "/metrics"}
            for k, v in want.items():
                if annotations.get(k) != v:
                    fail(where, f"pod annotation {k} is not {v!r}")
        # The token: a Secret key, mounted read-only.
        tok = flag(flags, "token-file")
        lhost, _ = split_hostport(flag(flags, "listen"))
        if not tok:
            if lhost is not None and not is_loopback(lhost) and "insecure" not in flags:
                fail(cw, f"--listen {flag(flags, 'listen')} without --token-file (the daemon refuses)")
        else:
            m = mount_of(tok)
            v = volumes.get(m["name"]) if m else None
            if v is None or "secret" not in v:
                fail(cw, f"--token-file {tok} is not in a Secret volume")
            else:
                sname = dig(v, "secret", "secretName")
                key = os.path.relpath(tok, m["mountPath"])
                items = dig(v, "secret", "items")
                if items:
                    key = next((i.get("key") for i in items if i.get("path") == key), None)
                s = secrets.get(sname)
                if s is None:
                    fail(cw, f"Secret {sname} is not defined here")
                elif key not in (s.get("stringData") or {}) and key not in (s.get("data") or {}):
                    fail(cw, f"Secret {sname} has no key {key}")
        summary = {"flags": flags, "ports": ports, "mounts": mounts, "mount_of": mount_of,
                   "labels": labels, "resources": res, "env": c.get("env") or []}
    if summary is None:
        summary = {"flags": {}, "ports": {}, "mounts": {}, "mount_of": lambda p: None,
                   "labels": labels, "resources": {}, "env": []}
    return summary


def check_rendered(rendered, objs):
    """`kubectl kustomize` output: every object of the files, once."""
    with open(rendered, encoding="utf-8") as fh:
        out = [x for x in yaml.safe_load_all(fh) if x is not None]
    got = sorted((d.get("kind"), dig(d, "metadata", "name")) for d in out)
    want = sorted(objs)
    if got != want:
        fail("kubectl kustomize deploy/k8s", f"renders {got}, the files hold {want}")


REQUIRED_ALERTS = {"DppMasterDown", "DppNoWorkers", "DppTrainersStarved", "DppRecordsRejected",
                   "DppMasterRestarting", "DppJournalLarge", "DppWorkerBufferFull",
                   "DppSessionFailed"}


def check_alerts(docs, info):
    p = os.path.join(SRC, "deploy/prometheus/alerts.yaml")
    if p not in docs:
        fail("deploy/prometheus", "no alerts.yaml")
        return
    where = rel(p)
    if len(docs[p]) != 1 or not isinstance(docs[p][0], dict):
        fail(where, "must be one mapping with groups")
        return
    rules = [r for g in docs[p][0].get("groups") or [] for r in g.get("rules") or []]
    records = {r.get("record") for r in rules if r.get("record")}
    seen = set()
    for r in rules:
        a = r.get("alert")
        rw = f"{where} {a or r.get('record')}"
        expr = r.get("expr")
        if not isinstance(expr, str) or not re.search(r"\bdpp[_:]", expr):
            fail(rw, "expr does not use a dpp metric")
            continue
        for used in re.findall(r"\bdpp:[\w:]+", expr):
            if used not in records:
                fail(rw, f"uses {used}, which no rule records")
        if not a:
            continue
        if a in seen:
            fail(rw, "defined twice")
        seen.add(a)
        if dig(r, "labels", "severity") not in ("critical", "warning", "info"):
            fail(rw, "labels.severity is not critical, warning or info")
        if not dig(r, "annotations", "summary"):
            fail(rw, "no annotations.summary")
        if a == "DppTrainersStarved" and r.get("for") != "10m":
            fail(rw, "must hold for 10m")
        if a == "DppWorkerBufferFull" and "dpp_buffer_limit_bytes" not in expr:
            fail(rw, "must compare dpp_buffered_bytes with dpp_buffer_limit_bytes")
        if a == "DppJournalLarge" and info.get("state_gib"):
            m = re.search(r"\*\s*([\d.]+)\s*\*\s*1024\s*\*\s*1024\s*\*\s*1024", expr)
            if not m or abs(float(m.group(1)) - info["state_gib"]) > 1e-9:
                fail(rw, f"threshold is not a share of the master's state volume "
                     f"({info['state_gib']:g} GiB)")
    for a in sorted(REQUIRED_ALERTS - seen):
        fail(where, f"no alert {a}")


# ---------------------------------------------------------------- systemd


def parse_env(path):
    env = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, sep, v = line.partition("=")
        if not sep:
            fail(rel(path), f"not KEY=VALUE: {line}")
            continue
        if k.strip() in env:
            fail(rel(path), f"{k.strip()} is set twice")
        env[k.strip()] = v.strip().strip('"')
    return env


def parse_unit(path):
    """{section: [(key, value)]}, continuation lines joined."""
    out, sec, buf = {}, None, ""
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if buf:
            line = buf + " " + line.strip()
            buf = ""
        s = line.strip()
        if s.endswith("\\"):
            buf = s[:-1].rstrip()
            continue
        if not s or s.startswith(("#", ";")):
            continue
        if s.startswith("["):
            sec = s.strip("[]")
            out.setdefault(sec, [])
            continue
        k, _, v = s.partition("=")
        out.setdefault(sec, []).append((k.strip(), v.strip()))
    return out


def seconds(v):
    total, v = 0.0, v.strip()
    if re.fullmatch(r"\d+(\.\d+)?", v):
        return float(v)
    for n, u in re.findall(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)?", v):
        total += float(n) * {"ms": 0.001, "min": 60, "m": 60, "h": 3600}.get(u, 1)
    return total


def check_systemd():
    d = os.path.join(SRC, "deploy/systemd")
    envp = os.path.join(d, "dpp.env")
    if not os.path.exists(envp):
        fail("deploy/systemd", "no dpp.env")
        return
    env = parse_env(envp)
    users = set()
    sysusers = os.path.join(d, "dpp.sysusers")
    if os.path.exists(sysusers):
        for line in open(sysusers, encoding="utf-8"):
            f = line.split()
            if f and f[0] == "u":
                users.add(f[1])
    for unit, role in (("dpp-master.service", "master"), ("dpp-worker@.service", "worker")):
        p = os.path.join(d, unit)
        where = f"deploy/systemd/{unit}"
        if not os.path.exists(p):
            fail(where, "missing")
            continue
        u = parse_unit(p)
        svc = dict(u.get("Service", []))
        allkv = u.get("Service", [])
        if svc.get("EnvironmentFile", "").lstrip("-") != "/etc/dpp/dpp.env":
            fail(where, "EnvironmentFile is not /etc/dpp/dpp.env")
        if svc.get("Restart") not in ("always", "on-failure", "on-abnormal"):
            fail(where, "no Restart= policy")
        user = svc.get("User")
        if not user or user == "root":
            fail(where, "no non-root User=")
        elif user not in users:
            fail(where, f"User={user} is not created by dpp.sysusers")
        execs = svc.get("ExecStart", "")
        used = set(re.findall(r"\$\{(\w+)\}|\$(\w+)", execs))
        for a, b in used:
            if (a or b) not in env:
                fail(where, f"ExecStart uses ${a or b}, which dpp.env does not set")
        args = shlex.split(execs.replace("%i", "7101"))
        fl = flags_of(args[1:])
        for need in ("http", "token-file", "data-root", "log-level"):
            if need not in fl:
                fail(where, f"ExecStart has no --{need}")
        if flag(fl, "token-file") != "${DPP_TOKEN_FILE}":
            fail(where, "--token-file is not ${DPP_TOKEN_FILE}")
        # io_uring: never denied; a filter must answer EPERM so the worker
        # can fall back to pread instead of being killed.
        filters = [v for k, v in allkv if k == "SystemCallFilter"]
        for v in filters:
            if v.startswith("~") and re.search(r"@aio\b|io_uring", v):
                fail(where, f"SystemCallFilter={v} denies io_uring (in @aio)")
        allow = [v for v in filters if not v.startswith("~")]
        if allow and not any(re.search(r"@system-service|@aio|io_uring_setup", v) for v in allow):
            fail(where, "SystemCallFilter allow-list has neither @system-service nor @aio")
        if filters and not svc.get("SystemCallErrorNumber"):
            fail(where, "SystemCallFilter without SystemCallErrorNumber= kills instead of failing")
        if role == "master":
            if svc.get("StateDirectory") != "dpp" or env.get("DPP_STATE_DIR") != "/var/lib/dpp":
                fail(where, "StateDirectory=dpp and DPP_STATE_DIR=/var/lib/dpp must go together")
            if flag(fl, "state-dir") != "${DPP_STATE_DIR}":
                fail(where, "--state-dir is not ${DPP_STATE_DIR}")
        else:
            dr = flag(fl, "drain-timeout-s")
            if not dr:
                fail(where, "ExecStart has no --drain-timeout-s")
            else:
                m = re.fullmatch(r"\$\{(\w+)\}", dr)
                drain = int(env.get(m.group(1), "0") if m else dr)
                stop = seconds(svc.get("TimeoutStopSec", "90"))
                if not stop > drain:
                    fail(where, f"TimeoutStopSec {stop:g} s must exceed the drain timeout {drain} s")
            if "%i" not in svc.get("ExecStart", ""):
                fail(where, "the instance name (%i) is not the listen port")


# ---------------------------------------------------------------- Docker


def check_docker():
    p = os.path.join(SRC, "deploy/docker/Dockerfile")
    where = "deploy/docker/Dockerfile"
    if not os.path.exists(p):
        fail(where, "missing")
        return
    text = open(p, encoding="utf-8").read()
    lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
    stages, cur = [], None
    for l in lines:
        w = l.split()
        ins = w[0].upper()
        if ins == "FROM":
            cur = {"from": w[1], "lines": []}
            stages.append(cur)
        elif cur is not None:
            cur["lines"].append((ins, l))
    if len(stages) < 2:
        fail(where, "not multi-stage")
    for s in stages:
        if s["from"] != "debian:12":
            fail(where, f"stage FROM {s['from']} is not debian:12")
    if not stages:
        return
    build, run = stages[0], stages[-1]

    def installs(stage):
        pk = set()
        for ins, l in stage["lines"]:
            if ins == "RUN" and "apt-get install" in l:
                seg = l.split("apt-get install", 1)[1].split("&&")[0]
                pk |= {t for t in seg.split() if not t.startswith("-")}
        return pk

    # Builder: the build packages of scripts/install-deps.sh.
    deps = open(os.path.join(SRC, "scripts/install-deps.sh"), encoding="utf-8").read()
    m = re.search(r"packages=\((.*?)\)", deps, re.S)
    wanted = set()
    if m:
        for line in m.group(1).splitlines():
            for t in line.split("#")[0].split():
                if t.endswith("-dev") and not t.startswith(("libcmocka", "libclang")):
                    wanted.add(t)
                if t in ("build-essential", "cmake", "pkg-config", "protobuf-c-compiler"):
                    wanted.add(t)
    else:
        fail("scripts/install-deps.sh", "no packages=( ... ) list")
    missing = wanted - installs(build)
    if missing:
        fail(where, f"build stage does not install {sorted(missing)} (scripts/install-deps.sh)")
    if not re.search(r"CMAKE_BUILD_TYPE=(Release|\$\{BUILD_TYPE\})", text) or \
            ("${BUILD_TYPE}" in text and not re.search(r"ARG BUILD_TYPE=Release", text)):
        fail(where, "the build is not Release")
    runtime = {"libuv1", "libprotobuf-c1", "libzstd1", "liburing2", "libjansson4"}
    got = installs(run)
    if runtime - got:
        fail(where, f"runtime stage does not install {sorted(runtime - got)}")
    if any(t.endswith("-dev") for t in got):
        fail(where, "runtime stage installs -dev packages")
    users = [l.split()[1] for ins, l in run["lines"] if ins == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        fail(where, "the runtime stage does not end as a non-root USER")
    if not any(ins == "ENTRYPOINT" for ins, _ in run["lines"]):
        fail(where, "no ENTRYPOINT")
    # Context: every COPY source exists and the dockerignore lets it through.
    ign = os.path.join(SRC, "deploy/docker/Dockerfile.dockerignore")
    allowed = []
    if os.path.exists(ign):
        allowed = [l.strip()[1:].rstrip("/") for l in open(ign, encoding="utf-8") if l.strip().startswith("!")]
    for s in stages:
        for ins, l in s["lines"]:
            if ins != "COPY" or "--from=" in l:
                continue
            srcs = [t for t in l.split()[1:] if not t.startswith("--")][:-1]
            for t in srcs:
                t = t.rstrip("/")
                if not os.path.exists(os.path.join(SRC, t)):
                    fail(where, f"COPY {t}: no such path in the repo")
                if allowed and not any(t == a or t.startswith(a + "/") for a in allowed):
                    fail("deploy/docker/Dockerfile.dockerignore", f"does not let {t} into the context")


# ---------------------------------------------------------------- main


def main():
    global SRC
    argv = sys.argv[1:]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    SRC = os.path.abspath(argv[0])
    opts = dict(zip(argv[1::2], argv[2::2]))
    if yaml is None:
        notes.append("python3 has no yaml module: Kubernetes and Prometheus files not checked here")
    else:
        docs = load_yaml_files()
        objs, info = check_k8s(docs, opts.get("--worker-help"))
        if opts.get("--rendered"):
            check_rendered(opts["--rendered"], objs)
        check_alerts(docs, info)
    check_systemd()
    check_docker()
    for n in notes:
        print(f"note: {n}")
    for e in errors:
        print(f"FAIL {e}")
    return 1 if errors else 0


SRC = "."
if __name__ == "__main__":
    sys.exit(main())
