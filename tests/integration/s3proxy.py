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
listing (ListObjectsV2) waits while FILE exists. Counts go to --stats (JSON),
rewritten after each request: requests, faults, signature_failures, held
(listings that waited) and virtual_host (requests to BUCKET.s3.localhost,
which s3rver takes as virtual-hosted: dpp_start_s3 starts it so).
"""
import argparse
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
from urllib.parse import urlsplit

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
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


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
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = self.upstream()
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, OSError):
            self.server.local.conn = None
            raise
        if fault == "short" and len(data) < 2:
            with srv.lock:
                srv.stats["faults"] += 1
            srv.save()
            self.reply(503, SLOWDOWN)
            return
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
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
    srv.stats = {"requests": 0, "faults": 0, "signature_failures": 0, "held": 0,
                 "virtual_host": 0}
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
