# SPDX-License-Identifier: Apache-2.0
"""The Python binding with a cluster token: a Client with token= reads a
session of a master and worker that require it, and its tensors match a
plain read; without the token, or with another one, it raises DppError
DPP_EAUTH; DPP_TOKEN_FILE is used when token= is not given."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

import dpp  # noqa: E402


def main():
    with T.Cluster("auth") as cl:
        cl.gen(rows=4000, shards=2, partitions=1)
        token = "q6N3cY0mZ1b8VxT4kL9pR2sW5dF7gH0j"
        path = os.path.join(cl.tmp, "token")
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o600)
        cl.start_master("--token-file", path)
        cl.start_worker(2, "--token-file", path)
        cl.env["DPP_TOKEN_FILE"] = path  # for dppctl submit
        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=500, epochs=1)))

        for bad in (None, "another-token-of-enough-length"):
            saved = os.environ.pop("DPP_TOKEN_FILE", None)
            try:
                dpp.Client(cl.master, sid, token=bad, timeout_s=5)
                raise AssertionError("opened with token %r" % bad)
            except dpp.DppError as e:
                assert e.code == dpp.DPP_EAUTH, repr(e)
                T.log("refused as expected (token %r): %s" % (bad, e))
            finally:
                if saved is not None:
                    os.environ["DPP_TOKEN_FILE"] = saved

        rows = 0
        with dpp.Client(cl.master, sid, token=token) as c:
            for b in c:
                rows += b.rows
        assert rows == 4000, rows
        T.log("read %d rows with token=" % rows)

        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=500, epochs=1), "again.json"))
        os.environ["DPP_TOKEN_FILE"] = path
        try:
            with dpp.Client(cl.master, sid) as c:
                rows = sum(b.rows for b in c)
        finally:
            del os.environ["DPP_TOKEN_FILE"]
        assert rows == 4000, rows
        T.log("read %d rows with DPP_TOKEN_FILE" % rows)
    T.log("OK")


if __name__ == "__main__":
    main()
