"""All-Reduce benchmark that declares itself to mlroute; runs under torchrun (env://).

    torchrun --nnodes 2 --nproc-per-node 1 --node-rank R --master-addr 10.0.0.1 \\
        examples/torch_allreduce.py --mib 4 --iters 10 --mlroute-url http://ctl:8080

(Debian's torch 1.13 under Python 3.11: add ``--redirects 1 --tee 1``, as torchrun's default
``--redirects 0`` parses to None there and the agent crashes; or any launcher that sets RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks the GPU with NCCL). Every rank fills
its tensor with known values, so the sum is checked exactly;
rank 0 prints one line per iteration (seconds, between a barrier and the end of the
All-Reduce) and a JSON summary line prefixed ``RESULT``. The job is declared after
``init_process_group`` and removed by ``destroy_process_group`` (see
controller/integrations/pytorch.py); without --mlroute-url / $MLROUTE_URL nothing is declared.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

try:
    from controller.integrations.pytorch import declare_job
except ImportError:  # run from a checkout with the system Python (python3-torch)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from controller.integrations.pytorch import declare_job


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default=os.environ.get("TORCH_BACKEND", "gloo"))
    ap.add_argument("--mib", type=float, default=4.0, help="tensor size in MiB")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--mlroute-url", default=os.environ.get("MLROUTE_URL"))
    ap.add_argument("--job-id", help="default: $MLROUTE_JOB_ID, torchrun's run id, Slurm's job")
    ap.add_argument("--declare", default="auto", choices=["auto", "ring", "members", "none"])
    args = ap.parse_args(argv)
    import torch
    import torch.distributed as dist

    dist.init_process_group(args.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = "cpu"
    if args.backend == "nccl":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
        torch.cuda.set_device(device)
    t0 = time.perf_counter()
    job = None
    if args.declare != "none":
        job = declare_job(args.mlroute_url, job_id=args.job_id,
                          bytes_hint=args.mib * (1 << 20), declare=args.declare)
    declare_s = time.perf_counter() - t0
    n = max(1, int(args.mib * (1 << 20) // 4))
    pattern = (torch.arange(n, dtype=torch.int64) % 5).to(torch.float32)
    expected = (pattern * world + world * (world + 1) / 2).to(device)
    times = []
    for i in range(args.iters):
        x = (pattern + (rank + 1)).to(device)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if not torch.equal(x, expected):
            print(f"rank {rank}: iteration {i}: wrong sum", file=sys.stderr, flush=True)
            return 1
        if rank == 0:
            print(f"iteration {i}: {times[-1]:.4f} s", flush=True)
    if rank == 0:
        print("RESULT " + json.dumps({"world": world, "mib": args.mib, "backend": args.backend,
                                      "declared": bool(job and job.declared),
                                      "declare_s": declare_s, "allreduce_s": times}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
