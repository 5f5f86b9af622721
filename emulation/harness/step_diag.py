"""Where a collective's step goes on the emulation: CPU and host links sampled from ``/proc``
while it runs (``benchmarks.srv6 --only fattree --diagnose``).

A step longer than its fluid bound is either the machine's (the 2 shared cores busy: the ranks,
the agents, the routers' forwarding in softirq) or the network's (a host's link idle while its
bytes wait elsewhere). ``Sampler`` records both every ``PERIOD_S`` from one thread of the
harness, reading only ``/proc`` (a host's counters through ``/proc/<pid>/net/dev`` of a process
in its namespace), so the measurement adds no process to the machine it measures.
"""
from __future__ import annotations

import os
import threading
import time

PERIOD_S = 0.05
GROUPS = {"ranks": "collective_rank.py", "agents": "mlroute-agent"}


def cpu_times() -> dict[str, int]:
    """The machine's CPU time in ticks by kind (``/proc/stat``'s first line)."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return {"user": v[0] + v[1], "system": v[2], "idle": v[3] + v[4], "irq": v[5],
            "softirq": v[6], "total": sum(v[:8])}


def netns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def group_ticks(namespaces: set[str]) -> dict[str, int]:
    """CPU ticks (user + system) of the processes of each ``GROUPS`` entry, by command line,
    in the ``namespaces`` only (another emulation's agents are not ours)."""
    out = dict.fromkeys(GROUPS, 0)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().decode(errors="replace")
            if not any(n in cmd for n in GROUPS.values()) or netns(int(pid)) not in namespaces:
                continue
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for name, needle in GROUPS.items():
            if needle in cmd:
                out[name] += int(fields[11]) + int(fields[12])  # utime, stime
                break
    return out


def dev_bytes(pid: int, dev: str) -> tuple[int, int]:
    """(received, sent) bytes of ``dev`` in the network namespace of process ``pid``."""
    with open(f"/proc/{pid}/net/dev") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name.strip() == dev:
                v = rest.split()
                return int(v[0]), int(v[8])
    raise KeyError(f"no {dev} in /proc/{pid}/net/dev")


class Sampler:
    """``with Sampler({host: (pid, dev)}) as s:`` samples until the block ends; ``summary``
    then describes any window of it."""

    def __init__(self, hosts: dict[str, tuple[int, str]], pids=(), period: float = PERIOD_S):
        """``hosts``: host -> (a pid in its namespace, its fabric port); ``pids``: one process
        in each other namespace whose ranks and agents count."""
        self.hosts, self.period = hosts, period
        self.namespaces = {netns(p) for p in [*pids, *(pid for pid, _ in hosts.values())]}
        self.samples: list[tuple[float, dict, dict, dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        links = {h: dev_bytes(pid, dev) for h, (pid, dev) in self.hosts.items()}
        self.samples.append((time.time(), cpu_times(), group_ticks(self.namespaces), links))

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def __enter__(self) -> Sampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sample()

    def summary(self, start: float, end: float, bytes_each: int, bw_mbps: float) -> dict:
        """The window [start, end] (``time.time()``): the machine's idle share, each kind's
        share of its time, and the cores each group used (softirq: the routers' forwarding;
        other: what is left, the controller and anything else on the machine); per host, the
        share of the window its link carried at line rate each way, and when (s after
        ``start``) its first ``bytes_each`` had been sent and received (the first sample at or
        past them: frames' headers count, 0.3% of a 9,000-byte frame)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {"samples": len(inside)}
        (t0, c0, g0, l0), (t1, c1, g1, l1) = inside[0], inside[-1]
        ticks = max(1, c1["total"] - c0["total"])
        hz = ticks / max(1e-9, t1 - t0)  # ticks a second, all cores
        per_core = hz / (os.cpu_count() or 1)
        cores = {k: (g1[k] - g0[k]) / (t1 - t0) / per_core for k in GROUPS}
        cores["softirq"] = (c1["softirq"] + c1["irq"] - c0["softirq"] - c0["irq"]) / (
            t1 - t0) / per_core
        busy = (ticks - (c1["idle"] - c0["idle"])) / (t1 - t0) / per_core
        cores["other"] = busy - sum(cores.values())  # the rest: controller, others' work
        out = {"samples": len(inside), "window_s": round(t1 - t0, 3),
               "cpu_share": {k: round((c1[k] - c0[k]) / ticks, 3)
                             for k in ("idle", "user", "system", "softirq")},
               "cores": {k: round(v, 2) for k, v in cores.items()}}
        line = bw_mbps * 1e6 / 8 * (t1 - t0)
        links = {}
        for h in self.hosts:
            rx, tx = (l1[h][i] - l0[h][i] for i in (0, 1))
            done = {}
            for i, way in ((1, "sent"), (0, "received")):
                done[way] = next((round(t - start, 3) for t, _c, _g, ln in inside
                                  if ln[h][i] - l0[h][i] >= bytes_each), None)
            links[h] = {"tx_busy": round(tx / line, 3), "rx_busy": round(rx / line, 3),
                        "sent_at_s": done["sent"], "received_at_s": done["received"]}
        out["links"] = links
        return out
