"""One rank of a real All-Reduce (PyTorch gloo or Open MPI through mpi4py), run inside a Mininet
host by ``emulation.collectives``. It runs under Debian's ``/usr/bin/python3`` (where
python3-torch and python3-mpi4py live), so it imports only the standard library at the top.

    python3 collective_rank.py gloo --master IP --rank R --world N --mib M --iters K [--a2a-mib A]
    python3 collective_rank.py ddp --master IP --rank R --world N --mib M --iters K
    mpirun ... python3 collective_rank.py mpi --mib M --iters K

``--a2a-mib A`` (gloo): every iteration also runs an all-to-all of A MiB per rank before the
All-Reduce, as a mixture-of-experts layer does (block j of rank r holds 1000 r + j: checked
exactly on arrival); with ``--mib 0`` the all-to-all alone (an expert layer's exchange).
``--a2a-schedule pairwise``: the same exchange in n - 1 rounds of one peer each way;
``recvfirst``: all at once, every receive posted before the sends.

``ddp`` trains a model of ``--mib`` MiB of parameters (square linear layers) with PyTorch's
DistributedDataParallel over gloo, as a data-parallel job does: every iteration a forward and
a backward pass on the rank's own data, the gradients All-Reduced in 1 MiB buckets while the
backward pass runs, then an SGD step. Each rank's data differ, so replicas stay equal only if
every gradient was reduced: the check is that every rank ends with bit-identical parameters
(the SHA-256 of its parameters equal on every rank; ``max_error`` counts the ranks that differ).

Every rank fills its tensor with known values (element i of rank r: r + 1 + i % 5) before each
iteration, so the reduced tensor must hold n(n+1)/2 + n(i % 5) everywhere: the check is exact
(small integers in float32). Each iteration is timed between a barrier and the end of the
All-Reduce (gloo: also its wall-clock span, ``spans``). Before leaving, while the library's
connections are still open, the rank reads its own TCP sockets (``ss -ti``: bytes sent per
peer address), which tells where the library really sends its data, whatever the library.
Prints one JSON line (prefix ``RESULT ``) on stdout.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time

_ADDR = re.compile(r"(\d+\.\d+\.\d+\.\d+)\]?:\d+")
_SENT = re.compile(r"\bbytes_sent:(\d+)")


def sent_per_peer(own_ip: str) -> dict[str, int]:
    """Bytes this network namespace's established TCP sockets sent, per remote IPv4 address
    (itself and loopback left out)."""
    out = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True, text=True,
                         timeout=20).stdout
    sent: dict[str, int] = {}
    peer = None
    for line in out.splitlines():
        addrs = _ADDR.findall(line)
        if len(addrs) == 2:  # "Recv-Q Send-Q local:port peer:port", then the details line
            peer = addrs[1]
            continue
        m = _SENT.search(line)
        if m and peer and peer != own_ip and not peer.startswith("127."):
            sent[peer] = sent.get(peer, 0) + int(m.group(1))
            peer = None
    return sent


def own_address() -> str:
    """The first IPv4 address of this network namespace that is not loopback (a Mininet host
    has one: its fabric address; every host shares the machine's host name)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         timeout=20).stdout
    for m in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+)/", out):
        if not m.group(1).startswith("127."):
            return m.group(1)
    raise SystemExit("no IPv4 address besides loopback in this network namespace")


def _values(lib, n_elems: int, rank: int):
    if lib == "torch":
        import torch
        return (torch.arange(n_elems, dtype=torch.int64) % 5).to(torch.float32) + (rank + 1)
    import numpy
    return (numpy.arange(n_elems, dtype=numpy.int64) % 5).astype(numpy.float32) + (rank + 1)


def _expected(lib, n_elems: int, world: int):
    base = _values(lib, n_elems, 0) - 1  # i % 5
    return base * world + world * (world + 1) / 2


def run_gloo(args) -> dict:
    import datetime

    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    n_elems = args.mib * (1 << 20) // 4
    expected = _expected("torch", n_elems, args.world)
    dist.all_reduce(torch.ones(1024))  # warm-up: every connection open
    block = args.a2a_mib * (1 << 20) // 4 // args.world
    if block:
        dist.all_to_all_single(torch.empty(args.world), torch.ones(args.world))
        send = torch.arange(args.world, dtype=torch.float32).repeat_interleave(block) + \
            1000 * args.rank
        want = torch.arange(args.world, dtype=torch.float32).repeat_interleave(block) * 1000 + \
            args.rank
    times, spans, worst, start = [], [], 0.0, time.time()
    for _ in range(args.iters):
        t = _values("torch", n_elems, args.rank)
        dist.barrier()
        t0, w0 = time.perf_counter(), time.time()
        if block:
            got = torch.empty(block * args.world)
            if args.a2a_schedule in SCHEDULES:
                SCHEDULES[args.a2a_schedule](dist, got, send, block, args.rank, args.world)
            else:
                dist.all_to_all_single(got, send)
            worst = max(worst, float((got - want).abs().max()))
        if n_elems:  # --mib 0: the all-to-all alone
            dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
        spans.append((w0, time.time()))  # wall clock: the harness's samples of /proc
        if n_elems:
            worst = max(worst, float((t - expected).abs().max()))
    dist.barrier()
    sent = sent_per_peer(args.ip)
    dist.barrier()  # nobody closes a connection before every rank has read its sockets
    dist.destroy_process_group()
    return {"rank": args.rank, "world": args.world, "times": times, "max_error": worst,
            "sent": sent, "start": start, "spans": spans}


def _pairwise(dist, got, send, block: int, rank: int, world: int) -> None:
    """The all-to-all in ``world - 1`` rounds: in round i, rank r sends its block to r + i
    and receives r - i's, so each host's port carries one flow each way at a time (gloo's
    ``alltoall`` posts all its sends and receives at once: ``world - 1`` flows share a port)."""
    got[rank * block:(rank + 1) * block] = send[rank * block:(rank + 1) * block]
    for i in range(1, world):
        to, frm = (rank + i) % world, (rank - i) % world
        reqs = [dist.isend(send[to * block:(to + 1) * block], to),
                dist.irecv(got[frm * block:(frm + 1) * block], frm)]
        for req in reqs:
            req.wait()


def _receives_first(dist, got, send, block: int, rank: int, world: int) -> None:
    """The all-to-all at once, as gloo's ``alltoall``, but every receive posted before any
    send. Gloo's TCP pair carries a peer's "ready to receive" on the one connection the two
    ranks share, in order behind whatever data that rank already writes to the peer: in
    gloo's own loop (a send, then a receive, per peer) a rank often sends its block first,
    and its peer's block to it then waits for that whole block to arrive (issue 75: about
    half the pairs of an all-to-all of 8 took turns instead of running together)."""
    got[rank * block:(rank + 1) * block] = send[rank * block:(rank + 1) * block]
    peers = [(rank + i) % world for i in range(1, world)]
    reqs = [dist.irecv(got[p * block:(p + 1) * block], p) for p in peers]
    reqs += [dist.isend(send[p * block:(p + 1) * block], p) for p in peers]
    for req in reqs:
        req.wait()


SCHEDULES = {"pairwise": _pairwise, "recvfirst": _receives_first}  # else gloo's all at once
DDP_WIDTH = 512  # a layer of 512 x 512 float32 weights is 1 MiB: one layer per MiB
DDP_BUCKET_MIB = 1  # several buckets per backward pass, reduced while it runs


def run_ddp(args) -> dict:
    import datetime

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(DDP_WIDTH, DDP_WIDTH, bias=False)
                            for _ in range(max(1, args.mib))])
    ddp = DistributedDataParallel(model, bucket_cap_mb=DDP_BUCKET_MIB)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1 + args.rank)  # each rank its own batches

    def step():
        opt.zero_grad()
        ddp(torch.randn(32, DDP_WIDTH, generator=data)).square().mean().backward()
        opt.step()
    step()  # warm-up: every connection open, the buckets built
    times, start = [], time.time()
    for _ in range(args.iters):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    with torch.no_grad():  # replicas must be bit-identical: every rank's SHA-256 of them
        flat = torch.cat([p.flatten() for p in model.parameters()])
        mine = torch.tensor(list(hashlib.sha256(flat.numpy().tobytes()).digest()))
        every = [torch.empty_like(mine) for _ in range(args.world)]
        dist.all_gather(every, mine)
        worst = float(sum(not torch.equal(x, mine) for x in every))  # ranks that differ
    dist.barrier()
    sent = sent_per_peer(args.ip)
    dist.barrier()
    dist.destroy_process_group()
    return {"rank": args.rank, "world": args.world, "times": times, "max_error": worst,
            "sent": sent, "start": start}


def run_mpi(args) -> dict:
    import numpy
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    n_elems = args.mib * (1 << 20) // 4
    expected = _expected("numpy", n_elems, world)
    warm = numpy.ones(1024, dtype=numpy.float32)
    comm.Allreduce(MPI.IN_PLACE, warm, op=MPI.SUM)  # warm-up: the ring's connections open
    times, worst, start = [], 0.0, time.time()
    for _ in range(args.iters):
        buf = _values("numpy", n_elems, rank)
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        times.append(time.perf_counter() - t0)
        worst = max(worst, float(numpy.abs(buf - expected).max()))
    comm.Barrier()
    sent = sent_per_peer(args.ip)
    comm.Barrier()
    return {"rank": rank, "world": world, "times": times, "max_error": worst, "sent": sent,
            "start": start}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", choices=["gloo", "ddp", "mpi"])
    ap.add_argument("--master", help="gloo and ddp: rank 0's address")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--mib", type=int, default=4)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--a2a-mib", type=int, default=0,
                    help="gloo: an all-to-all of this many MiB per rank before each All-Reduce")
    ap.add_argument("--a2a-schedule", choices=["all", *SCHEDULES], default="all",
                    help="gloo's all-to-all (all: its sends at once), pairwise rounds, or "
                         "all at once with every receive posted first (recvfirst)")
    ap.add_argument("--ip", help="this host's fabric address (default: its first non-loopback "
                    "IPv4 address)")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    if args.ip is None:
        args.ip = own_address()
    if args.library != "mpi" and None in (args.master, args.rank, args.world):
        ap.error(f"{args.library} needs --master, --rank and --world")
    result = {"gloo": run_gloo, "ddp": run_ddp, "mpi": run_mpi}[args.library](args)
    result["ip"] = args.ip
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
