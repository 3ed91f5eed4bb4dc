# SPDX-License-Identifier: Apache-2.0
"""dpp.DppError and friends:
  1. a closed port: DppError -ECONNREFUSED (or DPP_ETIMEDOUT), fast;
  2. an unknown session: DPP_ENOSESSION; an empty master: DPP_EINVAL;
     rank / world_size that do not fit: DPP_ERANK; prefetch 0: DPP_EINVAL;
  3. next(timeout_s) before any worker runs: DppTimeoutError (a DppError and
     a TimeoutError, code DPP_ETIMEDOUT), epoch_batches None while the session
     is indexing; the client stays usable and reads once a worker starts;
  4. a session that fails (on_corrupt: fail, a corrupted record): DppError
     DPP_EFAILED whose detail is dpp_client_error() naming the file;
  5. DPP_LIB pointing nowhere: OSError naming the path.
"""
import errno
import glob
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import dpp  # noqa: E402


def expect(code, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except dpp.DppError as e:
        assert e.code == code, "expected %d, got %r" % (code, e)
        assert e.strerror == dpp.strerror(code) and e.strerror in str(e)
        T.log("raised as expected:", e)
        return e
    raise AssertionError("no DppError %d from %s(%s, %s)" % (code, fn.__name__, a, kw))


def case_closed_port():
    T.log("case 1: closed port")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t = time.monotonic()
    try:
        dpp.Client("127.0.0.1:%d" % port, "s0", timeout_s=5)
        raise AssertionError("opened a client on a closed port")
    except dpp.DppError as e:
        assert e.code in (-errno.ECONNREFUSED, dpp.DPP_ETIMEDOUT), repr(e)
        assert e.name in ("ECONNREFUSED", "DPP_ETIMEDOUT") and e.call == "dpp_client_open_opts"
        T.log("raised as expected:", e)
    assert time.monotonic() - t < 10


def case_open_errors(cl, sid):
    T.log("case 2: open errors")
    e = expect(dpp.DPP_ENOSESSION, dpp.Client, cl.master, "s-no-such-session", timeout_s=10)
    assert e.name == "DPP_ENOSESSION" and "no such session" in str(e)
    expect(dpp.DPP_EINVAL, dpp.Client, "", sid)
    expect(dpp.DPP_ERANK, dpp.Client, cl.master, sid, rank=1)  # consumers 1
    expect(dpp.DPP_ERANK, dpp.Client, cl.master, sid, world_size=2)
    expect(dpp.DPP_EINVAL, dpp.Client, cl.master, sid, prefetch=0)
    for bad in (dict(rank=-1), dict(timeout_s=-1)):
        try:
            dpp.Client(cl.master, sid, **bad)
            raise AssertionError("accepted %s" % bad)
        except ValueError:
            pass
    with dpp.Client(cl.master, sid, rank=0, world_size=1) as c:
        assert c.rank == 0 and c.num_epochs == 1


def case_timeout(cl, sid):
    T.log("case 3: next() times out while no worker runs, then reads")
    with dpp.Client(cl.master, sid, timeout_s=10) as c:
        assert c.epoch_batches is None, "epoch_batches %r while the session is indexing" % c.epoch_batches
        t = time.monotonic()
        try:
            c.next(timeout_s=0.3)
            raise AssertionError("a batch without workers")
        except dpp.DppTimeoutError as e:
            assert isinstance(e, dpp.DppError) and isinstance(e, TimeoutError)
            assert e.code == dpp.DPP_ETIMEDOUT, repr(e)
            T.log("raised as expected:", e)
        took = time.monotonic() - t
        assert 0.25 <= took < 5, took
        cl.start_worker()
        n = sum(b.rows for b in c.epoch_iter(timeout_s=60))
        assert n == 3000, n
        assert c.epoch_batches == 30, c.epoch_batches
        try:
            c.next(timeout_s=10)
            raise AssertionError("no SessionEnd")
        except dpp.SessionEnd:
            pass


def case_failed(cl):
    T.log("case 4: a failed session (on_corrupt: fail)")
    table = cl.gen(table="bad", rows=2000, shards=1, partitions=1, seed=3)
    (f,) = glob.glob(os.path.join(table, "*", "*.tfrecord"))
    size = os.path.getsize(f)
    with open(f, "r+b") as fh:  # flip a byte in the middle: a payload CRC fails
        fh.seek(size // 2)
        b = fh.read(1)
        fh.seek(size // 2)
        fh.write(bytes([b[0] ^ 0xFF]))
    spec = T.criteo_spec(batch_size=100, epochs=1, table="bad", on_corrupt="fail")
    sid = cl.submit(cl.write_spec(spec, "bad.json"))
    with dpp.Client(cl.master, sid) as c:
        try:
            for _ in c:
                pass
            raise AssertionError("the corrupted session ended normally")
        except dpp.DppError as e:
            assert e.code == dpp.DPP_EFAILED, repr(e)
            assert e.detail and e.detail == c.error, (e.detail, c.error)
            assert "part-" in e.detail and e.detail in str(e), e.detail
            T.log("raised as expected:", e)


def case_bad_lib():
    T.log("case 5: DPP_LIB pointing nowhere")
    env = dict(os.environ, DPP_LIB="/nonexistent/libdppclient.so")
    r = subprocess.run(
        [T.PYTHON, "-c", "import dpp; dpp.Client('127.0.0.1:1', 's')"], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode != 0 and "OSError" in r.stderr and "/nonexistent/libdppclient.so" in r.stderr, r.stderr


def main():
    case_closed_port()
    with T.Cluster("errors") as cl:
        cl.gen(rows=3000, shards=1, partitions=1)
        cl.start_master()
        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=100, epochs=1)))
        case_open_errors(cl, sid)
        case_timeout(cl, sid)
        case_failed(cl)
    case_bad_lib()
    T.log("PASS")


if __name__ == "__main__":
    main()
