#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A data-parallel job that changes its world size mid-epoch, with
torch.distributed (gloo, CPU) and one dpp session:

    DPP_LIB=build/libdppclient.so PYTHONPATH=python /usr/bin/python3 \\
        examples/elastic_resume.py --master 127.0.0.1:7070 --session SESSION \\
        --worlds 4,3,6 --steps 5 --state /tmp/data_state.pt

For each world size in --worlds, in turn, it spawns that many processes (one
rank each), as a job restarted on another number of nodes would be. Each
rank makes a dpp.TorchDataset; when --state holds a checkpoint, every rank
loads it (load_state_dict), which, the world size being another, resumes
elastically: the rest of the epoch is planned again for this world. Each
rank then trains --steps steps (the last world: to the end of the session),
and the world checkpoints: state_dict() gathers every rank's token (a
collective call), and rank 0 saves it to --state, as a trainer saves its
model's checkpoint. The session's spec says consumers: the first world's
size.

With --ids-dir, each rank writes the values of sparse feature --id-feature
of every real (unpadded) row it got, one file per world and rank, so that
a test can check that every row came exactly once (tests/python/
test_elastic.py does). A "step" here is a forward pass of a linear model on
the dense features and an all-reduce of its gradient: enough to show that
every rank takes the same number of steps.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dpp


def rank_main(rank, world, args, init_file):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    ds = dpp.TorchDataset(args.master, args.session, rank=rank, world_size=world)
    if os.path.exists(args.state):
        ds.load_state_dict(torch.load(args.state))
    last = world == args.worlds[-1]
    steps, ids = 0, []
    model = None
    for _ in range(ds.num_epochs if last else 1):
        for b in ds:
            dense = b.dense
            if model is None:
                model = torch.nn.Linear(dense.shape[1], 1)
            loss = model(dense).pow(2).mean()
            loss.backward()
            for p in model.parameters():  # data parallel: the gradient all-reduced
                dist.all_reduce(p.grad)
                p.grad = None
            if args.ids_dir:
                jt = b.sparse[args.id_feature]
                vals, lengths, mask = jt.values.tolist(), jt.lengths.tolist(), b.mask.tolist()
                at = 0
                for r, n in enumerate(lengths):
                    if mask[r]:
                        ids.extend(vals[at:at + n])
                    at += n
            steps += 1
            if not last and steps == args.steps:
                break
        if not last and steps == args.steps:
            break
    counts = [None] * world
    dist.all_gather_object(counts, steps)
    if not last:
        state = ds.state_dict()  # every rank: the tokens are gathered
        if rank == 0:
            torch.save(state, args.state)
    if args.ids_dir:
        with open(os.path.join(args.ids_dir, "world%d-rank%d.ids" % (world, rank)), "w") as f:
            f.write("\n".join(map(str, ids)))
    if rank == 0:
        print("world of %d: steps per rank %s%s" % (
            world, counts, "" if last else "; data state saved to %s" % args.state), flush=True)
    ds.close()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--worlds", default="4,3,6",
                    help="world sizes in turn, the first the spec's consumers (default 4,3,6)")
    ap.add_argument("--steps", type=int, default=5,
                    help="steps each world but the last takes before it checkpoints")
    ap.add_argument("--state", required=True, help="the data checkpoint file (torch.save)")
    ap.add_argument("--ids-dir", help="write each rank's row ids here (for tests)")
    ap.add_argument("--id-feature", default="row_id")
    args = ap.parse_args()
    args.worlds = [int(w) for w in args.worlds.split(",")]
    if os.path.exists(args.state):
        os.unlink(args.state)
    for i, world in enumerate(args.worlds):
        init_file = args.state + ".init%d" % i
        if os.path.exists(init_file):
            os.unlink(init_file)
        mp.spawn(rank_main, args=(world, args, init_file), nprocs=world, join=True)
        if os.path.exists(init_file):
            os.unlink(init_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
