#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A proxy in front of an S3 store (s3rver) for tests/integration/s3.sh.

Every request's AWS Signature Version 4 is recomputed here with botocore's
own signer (S3SigV4Auth: AWS's implementation, independent of dpp's) and a
mismatch is answered 403 SignatureDoesNotMatch: s3rver 3.7 accepts any V4
signature, so without this proxy nothing would check dpp's. boto3's own
uploads pass through it too, which checks the checker.

With --fault-every N, every Nth request (1-based: N, 2N, ...) gets a fault
instead of the store's answer, in turn: 503 SlowDown, 500 InternalError, a
connection reset after a partial status line, and a body cut short (a
response with no body gets a 503 instead). --fault-only-get limits faults to
GETs. --always-503 answers every request 503. --tls CERT KEY serves https. With --hold-listings FILE, a
listing (ListObjectsV2) waits while FILE exists.

Lies of a store that is wrong rather than down, each for the objects
("BUCKET/KEY") or listings ("BUCKET/PREFIX" as asked) that a glob (fnmatch,
'*' spans '/') matches; every flag can be repeated:
  --short-ranges GLOB  a ranged GET is answered with at most SHORT_RANGE
                       bytes, its Content-Range saying so (206): a store or
                       proxy that caps a range's length
  --no-etag GLOB       GET and HEAD answers carry no ETag, and If-Match is
                       not passed on (ignored)
  --forbid GLOB        GETs are answered 403 AccessDenied
  --dup-keys GLOB      a listing page repeats its first key
  --stray-keys GLOB    a listing page also holds a key shorter than the
                       prefix and one beside it ("PREFIX-other/...")
  --endless GLOB       listing pages never end: each says IsTruncated with a
                       new token and holds 1000 made-up keys (--endless-empty:
                       none)
  --drip GLOB          a listing's answer comes at 2 bytes a second

Counts go to --stats (JSON), rewritten after each request: requests, faults,
signature_failures, held (listings that waited), virtual_host (requests to
BUCKET.s3.localhost, which s3rver takes as virtual-hosted: dpp_start_s3
starts it so), and per lie: short_ranges, etags_dropped, forbidden,
listing_lies, endless_pages, drips (started) and dripping (going on now).
"""
import argparse
import fnmatch
import http.client
import http.server
import json
import os
import signal
import socket
import ssl
import struct
import threading
import time
from urllib.parse import parse_qs, unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message></Error>')
INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
            b'<Message>We encountered an internal error. Please try again.</Message></Error>')
BADSIG = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SignatureDoesNotMatch</Code>'
          b'<Message>The request signature we calculated does not match the signature you '
          b'provided.</Message></Error>')
FORBIDDEN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
             b'<Message>Access Denied</Message></Error>')
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}
SHORT_RANGE = 100000  # bytes of a range answered short (--short-ranges)
LIES = ("short_ranges", "no_etag", "forbid", "dup_keys", "stray_keys", "endless", "endless_empty",
        "drip")


def endless_page(prefix, page, nkeys):
    """Page `page` of a listing of prefix that never ends."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>'
           '<IsTruncated>true</IsTruncated><KeyCount>%d</KeyCount>'
           '<NextContinuationToken>endless-%d</NextContinuationToken>' % (nkeys, page + 1)]
    for i in range(nkeys):
        out.append('<Contents><Key>%sds=1/part-%06d-%04d.tfrecord</Key><Size>1000</Size>'
                   '<ETag>&quot;%032x&quot;</ETag></Contents>' % (prefix, page, i, page * 10000 + i))
    out.append('</ListBucketResult>')
    return "".join(out).encode()


def lie_in_listing(data, prefix, dup, stray):
    """A ListObjectsV2 page with its first key repeated (dup) and with keys
    outside prefix added (stray)."""
    start = data.find(b"<Contents>")
    if start < 0:
        return data
    end = data.find(b"</Contents>", start) + len(b"</Contents>")
    extra = b""
    if dup:
        extra += data[start:end]
    if stray:
        for key in ("w", prefix.rstrip("/") + "-other/x.tfrecord"):
            extra += (b"<Contents><Key>%s</Key><Size>3</Size><ETag>&quot;0badc0de&quot;</ETag>"
                      b"</Contents>" % key.encode())
    return data[:start] + extra + data[start:]


def signature_ok(method, target, headers, secrets):
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key_id, _date, region, service, _ = fields["Credential"].split("/")
    if key_id not in secrets or service != "s3":
        return False
    signed = fields["SignedHeaders"].split(";")
    req = AWSRequest(method=method, url="http://" + headers["Host"] + target,
                     headers={h: headers[h] for h in signed})
    req.context["timestamp"] = headers["x-amz-date"]
    token = headers.get("x-amz-security-token")
    signer = S3SigV4Auth(Credentials(key_id, secrets[key_id], token), "s3", region)
    want = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
    return want == fields["Signature"]


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def upstream(self):
        local = self.server.local
        if getattr(local, "conn", None) is None:
            local.conn = http.client.HTTPConnection(self.server.upstream_host,
                                                    self.server.upstream_port, timeout=60)
        return local.conn

    def target(self):
        """("list", "BUCKET/PREFIX") for a ListObjectsV2, else ("object",
        "BUCKET/KEY")."""
        parts = urlsplit(self.path)
        host = self.headers.get("Host", "").split(":")[0]
        path = unquote(parts.path)
        if host.endswith(".s3.localhost"):
            path = "/" + host[: -len(".s3.localhost")] + path
        name = path.lstrip("/")
        query = parse_qs(parts.query, keep_blank_values=True)
        if "list-type" in query:
            return "list", name.rstrip("/") + "/" + query.get("prefix", [""])[0]
        return "object", name

    def lie(self, flag, name):
        return any(fnmatch.fnmatchcase(name, g) for g in getattr(self.server.lies, flag))

    def count(self, stat, n=1):
        with self.server.lock:
            self.server.stats[stat] += n
        self.server.save()

    def drip(self, resp, data):
        """Sends resp's answer, its body 2 bytes a second."""
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.count("drips")
        self.count("dripping")
        try:
            for i in range(0, len(data), 2):
                self.wfile.write(data[i:i + 2])
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass  # the client went
        finally:
            self.close_connection = True
            self.count("dripping", -1)

    def reply(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def reset(self):
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def handle_any(self):
        srv = self.server
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length) if length else b""
        with srv.lock:
            srv.stats["requests"] += 1
            n = srv.stats["requests"]
            if self.headers.get("Host", "").split(":")[0].endswith(".s3.localhost"):
                srv.stats["virtual_host"] += 1
        if not signature_ok(self.command, self.path, self.headers, srv.secrets):
            with srv.lock:
                srv.stats["signature_failures"] += 1
            srv.save()
            self.reply(403, BADSIG)
            return
        if srv.hold and "list-type=" in urlsplit(self.path).query and os.path.exists(srv.hold):
            with srv.lock:
                srv.stats["held"] += 1
            srv.save()
            while os.path.exists(srv.hold):
                time.sleep(0.02)
        fault = None
        if srv.always_503:
            fault = "503"
        elif srv.every and n % srv.every == 0 and (self.command == "GET" or not srv.only_get):
            kinds = ("503", "500", "reset", "short")
            fault = kinds[(n // srv.every - 1) % len(kinds)]
        if fault == "reset":
            with srv.lock:
                srv.stats["faults"] += 1
            srv.save()
            self.reset()
            return
        if fault in ("503", "500"):
            with srv.lock:
                srv.stats["faults"] += 1
            srv.save()
            self.reply(503 if fault == "503" else 500, SLOWDOWN if fault == "503" else INTERNAL)
            return
        kind, name = self.target()
        if kind == "list" and (self.lie("endless", name) or self.lie("endless_empty", name)):
            query = parse_qs(urlsplit(self.path).query)
            page = int(query.get("continuation-token", ["endless-0"])[0].split("-")[1])
            self.count("endless_pages")
            self.reply(200, endless_page(name.split("/", 1)[1], page,
                                         0 if self.lie("endless_empty", name) else 1000))
            return
        if kind == "object" and self.command == "GET" and self.lie("forbid", name):
            self.count("forbidden")
            self.reply(403, FORBIDDEN)
            return
        no_etag = kind == "object" and self.lie("no_etag", name)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in HOP and not (no_etag and k.lower() == "if-match")}
        conn = self.upstream()
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, OSError):
            self.server.local.conn = None
            raise
        extra = {}
        if kind == "list" and resp.status == 200:
            dup, stray = self.lie("dup_keys", name), self.lie("stray_keys", name)
            if dup or stray:
                self.count("listing_lies")
                data = lie_in_listing(data, name.split("/", 1)[1], dup, stray)
            if self.lie("drip", name):
                self.drip(resp, data)
                return
        if (kind == "object" and resp.status == 206 and self.lie("short_ranges", name)
                and len(data) > SHORT_RANGE):
            span, total = resp.getheader("Content-Range").split(" ")[1].split("/")
            first = int(span.split("-")[0])
            data = data[:SHORT_RANGE]
            extra["content-range"] = "bytes %d-%d/%s" % (first, first + len(data) - 1, total)
            self.count("short_ranges")
        if no_etag:
            extra["etag"] = None
            self.count("etags_dropped")
        if fault == "short" and len(data) < 2:
            with srv.lock:
                srv.stats["faults"] += 1
            srv.save()
            self.reply(503, SLOWDOWN)
            return
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length" and k.lower() not in extra:
                self.send_header(k, v)
        for k, v in extra.items():
            if v is not None:
                self.send_header(k, v)
        clen = resp.getheader("Content-Length")
        if self.command == "HEAD" and clen is not None:
            self.send_header("Content-Length", clen)
        elif self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "short":
            with srv.lock:
                srv.stats["faults"] += 1
            srv.save()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        srv.save()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def save(self):
        if not self.stats_path:
            return
        with self.lock:
            text = json.dumps(self.stats)
            with open(self.stats_path + ".tmp", "w") as f:
                f.write(text)
            os.replace(self.stats_path + ".tmp", self.stats_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True, help="host:port of the store")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--stats")
    ap.add_argument("--key", action="append", default=[], help="KEYID:SECRET (repeatable)")
    ap.add_argument("--fault-every", type=int, default=0)
    ap.add_argument("--fault-only-get", action="store_true")
    ap.add_argument("--always-503", action="store_true")
    ap.add_argument("--hold-listings", metavar="FILE")
    for lie in LIES:
        ap.add_argument("--" + lie.replace("_", "-"), action="append", default=[], metavar="GLOB")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve https with these PEM files")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", 0), Proxy)
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*a.tls)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    host, port = a.upstream.rsplit(":", 1)
    srv.upstream_host, srv.upstream_port = host, int(port)
    srv.secrets = dict(k.split(":", 1) for k in a.key)
    srv.every, srv.only_get, srv.always_503 = a.fault_every, a.fault_only_get, a.always_503
    srv.hold = a.hold_listings
    srv.lies = a
    srv.stats = {"requests": 0, "faults": 0, "signature_failures": 0, "held": 0,
                 "virtual_host": 0, "short_ranges": 0, "etags_dropped": 0, "forbidden": 0,
                 "listing_lies": 0, "endless_pages": 0, "drips": 0, "dripping": 0}
    srv.stats_path = a.stats
    srv.lock = threading.Lock()
    srv.local = threading.local()
    srv.save()
    with open(a.port_file + ".tmp", "w") as f:
        f.write("127.0.0.1:%d\n" % srv.server_address[1])
    os.replace(a.port_file + ".tmp", a.port_file)
    # lib.sh stops daemons with SIGINT, which a background job inherits ignored.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: os._exit(0))
    srv.serve_forever()


if __name__ == "__main__":
    main()
