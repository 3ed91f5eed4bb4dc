# SPDX-License-Identifier: Apache-2.0
"""examples/train_dlrm.py against a live session: 20 steps exit 0 with loss
lines and the data-wait share; a session shorter than --steps ends the run
early, still with exit 0 and a message saying so; a run stopped after 12
steps with --checkpoint resumes from it, and the session then has exactly
the 8 batches it had left."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpptest as T  # noqa: E402

EXAMPLE = os.path.join(T.SRC, "examples", "train_dlrm.py")


def train(cl, sid, steps, *extra):
    argv = [T.PYTHON, EXAMPLE, "--master", cl.master, "--session", sid, "--steps", str(steps), "--log-every", "5", "--timeout-s", "60", *extra]
    r = subprocess.run(argv, env=cl.env, capture_output=True, text=True, timeout=240)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    assert r.returncode == 0, "train_dlrm.py exited %d" % r.returncode
    return r.stdout


def main():
    with T.Cluster("train") as cl:
        cl.gen(rows=16000, shards=2, partitions=2)
        cl.start_master()
        cl.start_worker()
        cl.start_worker()

        T.log("case 1: 20 steps over 2 epochs of 10 batches")
        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=1600, epochs=2), "train.json"))
        out = train(cl, sid, 20)
        steps = [line for line in out.splitlines() if line.startswith("step ")]
        assert len(steps) == 4, out
        assert all("loss" in s and "data wait" in s for s in steps), steps
        assert "done: 20 steps" in out and "loss: first 5 steps" in out, out

        T.log("case 2: --steps beyond the session's batches")
        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=1600, epochs=1), "short.json"))
        out = train(cl, sid, 30)
        assert "the session ended after 10 of 30 steps" in out, out

        T.log("case 3: --checkpoint, stopped at step 12, resumed")
        sid = cl.submit(cl.write_spec(T.criteo_spec(batch_size=1600, epochs=2), "ckpt.json"))
        ckpt = os.path.join(cl.tmp, "ckpt.pt")
        out = train(cl, sid, 12, "--checkpoint", ckpt, "--checkpoint-every", "4")
        assert "done: 12 steps" in out and os.path.exists(ckpt), out
        out = train(cl, sid, 30, "--checkpoint", ckpt)
        assert "resumed from %s at step 12 (epoch 1)" % ckpt in out, out
        assert "the session ended after 20 of 30 steps" in out, out
    T.log("PASS")


if __name__ == "__main__":
    main()
