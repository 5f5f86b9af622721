"""Traffic agents that run inside Mininet hosts: RDMA-like ring All-Reduce ranks.

Each rank keeps one TCP connection per part to its successor (a fixed 5-tuple: it binds its
source port; a split flow has one sub-connection per part, each with its own source port) and
accepts its predecessor's connections. An iteration is 2(n-1) steps; in each step the rank
sends a fixed-size chunk to its successor (split across its parts by their shares) and receives
one from its predecessor, then moves on, as ring All-Reduce does. Every step is timed. All
ranks start the first iteration at the same wall-clock time (one kernel clock for all hosts):
``--start-at``, or the time the runner sends over ``--start-gate`` once every rank of the round
is connected; later iterations start after the rank's compute gap. TCP makes delivery reliable.

With ``--barrier`` (what the runner uses) the ranks of a ring also agree, over a Unix socket
outside the emulated network, that every rank has finished a step before any starts the next:
the synchronous steps of the paper's model, where a step ends when its slowest flow ends.
Without it, steps follow data dependencies only, as NCCL's pipelined rings do.

Each connection's receive window is clamped (``--window``, 128 kB): flows that share a link then
keep equal amounts in its FIFO queue and get equal rates, as max-min fairness assumes. Without
it, loss-free TCP flows split a FIFO by whatever windows they grew to (this kernel has no fq or
sfq qdisc to enforce fairness in the network).

    python -m emulation.harness.agents ring --listen-port 5000 --next-ip 10.0.1.1 --dport 5000 \\
        --parts 6000:1.0 --recv-parts 1.0 --chunk 250000 --steps 14 --iterations 3 \\
        --start-at 1700000000.0 --out rank.json
"""
from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import threading
import time

CONNECT_TIMEOUT = 30.0


def _split_bytes(total: int, shares: list[float]) -> list[int]:
    """Bytes per part: floor of each share, the remainder on the last part."""
    sizes = [int(total * s) for s in shares]
    sizes[-1] += total - sum(sizes)
    return sizes


def _connect(ip: str, dport: int, sport: int, part: int, deadline: float) -> socket.socket:
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if sport:
            s.bind(("0.0.0.0", sport))
        s.settimeout(max(0.1, deadline - time.time()))
        try:
            s.connect((ip, dport))
            s.settimeout(None)
            s.sendall(struct.pack("!B", part))
            return s
        except OSError:
            s.close()
            if time.time() > deadline:
                raise TimeoutError(f"could not connect to {ip}:{dport} from port {sport}") from None
            time.sleep(0.1)


def _guard(fn, errors: list, *args) -> None:
    """Run fn in a thread and keep its exception for the caller."""
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - re-raised by the step loop
        errors.append(e)


def _recv_exact(sock: socket.socket, n: int, buf: memoryview) -> None:
    while n:
        got = sock.recv_into(buf[:min(n, len(buf))])
        if not got:
            raise ConnectionError("peer closed the connection mid-step")
        n -= got


def unix_listener(path: str, backlog: int) -> socket.socket:
    """A Unix socket served at ``path`` (a stale one from an earlier run replaced)."""
    import os
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(backlog)
    return server


def unix_connect(path: str, deadline: float, absent: str) -> socket.socket:
    """Connect to the Unix socket at ``path``, retrying until its server is there; after
    ``deadline`` (epoch seconds) a TimeoutError that says ``absent``."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.time() > deadline:
                raise TimeoutError(absent) from None
            time.sleep(0.05)


def await_start(gate: str | None, start_at: float, deadline: float) -> None:
    """Sleep until the first iteration: until ``start_at``, or, with a ``gate`` (a Unix socket
    the runner serves), until the start time the runner sends once every agent of the round
    reported connected. The gate spares a fixed lead that slow starts would outrun and fast
    ones wait through."""
    if gate:
        with unix_connect(gate, deadline, "start gate: the runner is not there") as s:
            s.sendall(b"r")
            s.settimeout(max(0.1, deadline - time.time()))
            data = b""
            while len(data) < 8:
                got = s.recv(8 - len(data))
                if not got:
                    raise ConnectionError("start gate: the runner left")
                data += got
        (start_at,) = struct.unpack("!d", data)
    wait = start_at - time.time()
    if wait > 0:
        time.sleep(wait)


class Barrier:
    """All ranks of a ring wait here until every rank arrived. Rank 0 serves a Unix socket
    (reachable from every Mininet host: they share the file system, not the network).

    ``wait`` blocks; ``arrive`` and ``on_readable`` are its two non-blocking halves, for agents
    that must keep serving their sockets while they wait (the RoCE agents answer
    retransmissions): a rank calls ``arrive()`` once per step and is through when ``released``
    reaches the number it returned."""

    def __init__(self, path: str, rank: int, size: int, deadline: float):
        self.rank, self.size = rank, size
        self.peers: list[socket.socket] = []
        self.generation = 0  # arrivals of this rank
        self.released = 0  # generations every rank has reached
        if rank == 0:
            server = unix_listener(path, size)
            server.settimeout(max(0.1, deadline - time.time()))
            while len(self.peers) < size - 1:
                self.peers.append(server.accept()[0])
            server.close()
            for p in self.peers:
                p.settimeout(None)
        else:
            self.peers.append(unix_connect(path, deadline, "ring barrier: rank 0 is not there"))
        self._counts = [0] * len(self.peers)  # rank 0: arrivals per peer

    def arrive(self) -> int:
        """Announce that this rank finished its current step; returns the generation to wait
        for (through when ``released`` reaches it)."""
        self.generation += 1
        if self.rank == 0:
            self._release()
        else:
            self.peers[0].sendall(b"d")
        return self.generation

    def on_readable(self, sock: socket.socket) -> None:
        """Read what a barrier socket holds (call when it is readable)."""
        data = sock.recv(256)
        if not data:
            raise ConnectionError("ring barrier: a rank left" if self.rank == 0
                                  else "ring barrier: rank 0 left")
        if self.rank == 0:
            self._counts[self.peers.index(sock)] += data.count(b"d")
            self._release()
        else:
            self.released += data.count(b"g")

    def _release(self) -> None:
        while self.released < self.generation and min(self._counts, default=self.generation) \
                > self.released:
            for p in self.peers:
                p.sendall(b"g")
            self.released += 1

    def wait(self) -> None:
        target = self.arrive()
        while self.released < target:
            readable, _, _ = select.select(self.peers, [], [])
            for s in readable:
                self.on_readable(s)

    def close(self) -> None:
        for p in self.peers:
            p.close()


def run_ring(args) -> dict:
    parts = [(int(p.split(":")[0]), float(p.split(":")[1])) for p in args.parts.split(",")]
    recv_shares = [float(x) for x in args.recv_parts.split(",")]
    deadline = time.time() + CONNECT_TIMEOUT
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.window)  # inherited on accept
    server.bind(("0.0.0.0", args.listen_port))
    server.listen(len(recv_shares))
    incoming: dict[int, socket.socket] = {}

    def accept_all():
        server.settimeout(CONNECT_TIMEOUT)
        while len(incoming) < len(recv_shares):
            conn, _ = server.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, args.window)
            conn.settimeout(None)
            (idx,) = struct.unpack("!B", conn.recv(1, socket.MSG_WAITALL))
            incoming[idx] = conn

    acceptor = threading.Thread(target=accept_all, daemon=True)
    acceptor.start()
    outgoing = [_connect(args.next_ip, args.dport, sport, i, deadline)
                for i, (sport, _) in enumerate(parts)]
    acceptor.join(timeout=CONNECT_TIMEOUT)
    if len(incoming) < len(recv_shares):
        raise TimeoutError("predecessor did not connect")
    barrier = Barrier(args.barrier, args.rank, args.size, deadline) if args.barrier else None
    send_sizes = _split_bytes(args.chunk, [s for _, s in parts])
    recv_sizes = _split_bytes(args.chunk, recv_shares)
    payload = memoryview(bytes(max(send_sizes)))
    bufs = [memoryview(bytearray(1 << 16)) for _ in recv_sizes]
    iterations = []
    received = [0]
    await_start(args.start_gate, args.start_at, deadline)
    for it in range(args.iterations):
        start = time.time()
        steps = []
        for _ in range(args.steps):
            t0 = time.time()
            errors: list[BaseException] = []
            threads = [threading.Thread(target=_guard, args=(outgoing[i].sendall, errors, payload[:n]))
                       for i, n in enumerate(send_sizes)]
            threads += [threading.Thread(target=_guard, args=(_recv_exact, errors, incoming[i], n,
                                                              bufs[i]))
                        for i, n in enumerate(recv_sizes)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            received[0] += sum(recv_sizes)
            if barrier:
                barrier.wait()
            steps.append(time.time() - t0)
        iterations.append({"start": start, "end": time.time(), "steps": steps})
        if it + 1 < args.iterations and args.compute_s:
            time.sleep(args.compute_s)
    for s in outgoing + list(incoming.values()):
        s.close()
    if barrier:
        barrier.close()
    server.close()
    return {"iterations": iterations, "sent_bytes": sum(send_sizes) * args.steps * args.iterations,
            "received_bytes": received[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.harness.agents")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("ring", help="one rank of a ring All-Reduce")
    r.add_argument("--listen-port", type=int, required=True)
    r.add_argument("--next-ip", required=True)
    r.add_argument("--dport", type=int, required=True)
    r.add_argument("--parts", required=True, help="sport:share,... of the flow to the successor")
    r.add_argument("--recv-parts", required=True, help="share,... of the flow from the predecessor")
    r.add_argument("--chunk", type=int, required=True, help="bytes per step")
    r.add_argument("--steps", type=int, required=True)
    r.add_argument("--iterations", type=int, default=1)
    r.add_argument("--compute-s", type=float, default=0.0)
    r.add_argument("--start-at", type=float, default=0.0, help="epoch seconds")
    r.add_argument("--start-gate", help="Unix socket of the runner: report connected there "
                                        "and start at the time it sends (instead of --start-at)")
    r.add_argument("--barrier", help="Unix socket path shared by the ring's ranks: "
                                      "synchronous steps")
    r.add_argument("--rank", type=int, default=0)
    r.add_argument("--size", type=int, default=1)
    r.add_argument("--window", type=int, default=128 * 1024, help="receive window clamp, bytes")
    r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        result = run_ring(args)
    except (OSError, TimeoutError) as e:
        result = {"error": f"{type(e).__name__}: {e}"}
    with open(args.out, "w") as fh:
        json.dump(result, fh)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
