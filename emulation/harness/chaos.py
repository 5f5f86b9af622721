"""What the chaos suite (``benchmarks/chaos.py``, issue 59) measures around each fault, on real
Open vSwitch: the switches' tables against the controller's intent, REST while the fault
lasts, and a real ring (PyTorch gloo) running through it.

Why the tables are judged this way: the controller's intent is not a file to diff against,
and its own view of the switches is what a fault may have corrupted. So each switch's flow
and group tables are dumped (``ovs-ofctl``), then wiped, and the switch is made to reconnect:
the controller reads the empty tables and fills them from its intent alone. A switch whose
refilled tables differ from what the fault left held something the controller did not
intend, or lacked something it did.

The wipe must not look like a fault itself: a switch wiped under a connected controller
drops its echoes, is rightly judged silent and re-planned around (``discovery/liveness.py``),
and the routes move under the check (seen in the flap case on the fat-tree). So every
bridge is first pointed away from its controllers at once (a control-plane event: a restart
round, ``service/restarts.py``, in which nothing is re-planned and no switch away is judged),
wiped once the controller sees them all gone, and pointed back.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
import traceback

from emulation.harness import collectives, fabricnet, ovs, owned

OFCTL = ["ovs-ofctl", "-O", "OpenFlow13"]
AWAY = "tcp:127.0.0.1:6999"  # where a bridge looks for its controller while it is wiped


def _run(cmd: list[str], timeout: float = 30) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          check=True).stdout


def groups(bridge: str) -> list[str]:
    """A bridge's group table, sorted (no counters)."""
    out = _run([*OFCTL, "dump-groups", bridge])
    return sorted(line.strip() for line in out.splitlines() if "group_id=" in line)


def tables(bridges: list[str]) -> dict[str, list[str]]:
    """Every bridge's flow entries (``ovs.flow_table``: no counters or ages) and groups."""
    return {b: ovs.flow_table(b) + groups(b) for b in bridges}


def controller_targets(bridges: list[str]) -> dict[str, str]:
    """Controller record uuid -> its target, for the records of ``bridges``
    (``owned.list_bridges`` names each bridge's records)."""
    mine = {u for name, _owner, uuids in owned.list_bridges() if name in bridges for u in uuids}
    rows = json.loads(_run(["ovs-vsctl", "--format=json", "--columns=_uuid,target", "list",
                            "controller"]))["data"]
    return {u[1]: target for u, target in rows if u[1] in mine}


def set_targets(targets: dict[str, str]) -> None:
    """Point controller records (uuid -> target) at new targets, in one transaction: the
    records keep their other settings (``max_backoff``), and a bridge connects to a new
    target at once."""
    args = [a for u, t in targets.items() for a in ("--", "set", "controller", u,
                                                     f"target={json.dumps(t)}")]
    if args:
        _run(["ovs-vsctl", *args])


def refill(bridges: list[str], ctl=None, timeout: float = 15.0) -> None:
    """Empty every bridge's tables while it is away from its controllers, then point it
    back: the controller reads and fills them (module docstring). ``ctl``: the controller
    whose view (``missing_switches``) must show them all gone before the wipe."""
    targets = controller_targets(bridges)
    set_targets(dict.fromkeys(targets, AWAY))
    try:
        if ctl is not None:
            fabricnet.wait_until(lambda: set(bridges) <= set(ctl.rest("GET", "/v1/fabric")[1].get(
                "missing_switches") or ()), timeout, interval=0.05,
                what=f"the controller to see {len(bridges)} bridges gone")
        for b in bridges:
            _run([*OFCTL, "del-flows", b])
            _run([*OFCTL, "del-groups", b])
    finally:
        set_targets(targets)


def intent_check(ctl, bridges: list[str], timeout: float = 60.0, quiet: float = 3.0,
                 attempts: int = 3) -> dict:
    """The tables as the fault left them against the tables the controller writes from its
    intent on empty switches (``refill``). Waits until the refill equals the first dump, or
    (a mismatch) until the tables stayed the same ``quiet`` seconds with the controller ready.
    Returns the bridges that differ with a sample of the difference, and the refill's time.
    The intent must hold still meanwhile: a check across which the routes changed (a
    re-optimisation's hold-down ended) is made again, at most ``attempts`` times."""
    for _ in range(attempts):
        routes = ctl.rest("GET", "/v1/routes")[1]
        got = _intent_check(ctl, bridges, timeout, quiet)
        if ctl.rest("GET", "/v1/routes")[1] == routes:
            return got
        time.sleep(quiet)
    return {**got, "routes_moving": True}


def _intent_check(ctl, bridges: list[str], timeout: float, quiet: float) -> dict:
    before = tables(bridges)
    t0 = time.monotonic()
    refill(bridges, ctl)
    last, since = None, time.monotonic()
    deadline = t0 + timeout
    while True:
        now = tables(bridges)
        if now == before:
            break
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet and ctl.rest("GET", "/v1/ready")[0] == 200:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.3)
    diff = {}
    for b in bridges:
        if now[b] != before[b]:
            lost, extra = sorted(set(now[b]) - set(before[b])), sorted(set(before[b]) - set(now[b]))
            diff[b] = {"missing": len(lost), "unintended": len(extra),
                       "sample": (lost[:2], extra[:2])}
    return {"mismatched": len(diff), "diff": diff,
            "refill_s": round(time.monotonic() - t0, 2)}


class Poller:
    """While its block runs, ``GET path`` every ``interval`` s against whichever controllers
    ``ctls()`` returns (a function: a restarted controller is a new object): latencies of the
    answers, 5xx answers, and requests nobody answered (a controller down)."""

    def __init__(self, ctls, path: str = "/v1/jobs", interval: float = 0.05):
        self.ctls, self.path, self.interval = ctls, path, interval
        self.latencies: list[float] = []
        self.errors: list[int] = []  # 5xx statuses
        self.unanswered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for ctl in list(self.ctls()):
                t = time.monotonic()
                try:
                    status, _ = ctl.rest("GET", self.path, timeout=10)
                except (OSError, AttributeError):
                    self.unanswered += 1
                    continue
                self.latencies.append(time.monotonic() - t)
                if status >= 500:
                    self.errors.append(status)
            self._stop.wait(self.interval)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def summary(self) -> dict:
        ms = sorted(x * 1e3 for x in self.latencies)
        return {"requests": len(ms), "max_ms": round(ms[-1], 1) if ms else None,
                "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 1) if ms else None,
                "5xx": len(self.errors), "unanswered": self.unanswered}


def retransmitted(net, hosts: list[str]) -> int:
    """TCP segments the hosts retransmitted so far (each netns's /proc/net/snmp)."""
    total = 0
    for h in hosts:
        lines = [l.split() for l in net.get(h).cmd("cat /proc/net/snmp").splitlines()
                 if l.startswith("Tcp:")]
        if len(lines) >= 2:
            total += int(dict(zip(lines[0], lines[1]))["RetransSegs"])
    return total


class RunningRing:
    """A gloo ring All-Reduce in the fabric's hosts (one rank per leaf, declared in its data
    direction and planned), running in a thread while a fault happens. ``result`` says
    whether every rank's sums were exact, the iteration times, and the segments TCP had to
    send again (what the fabric dropped)."""

    def __init__(self, session, fabric, logdir: str, iters: int = 30, mib: int = 2,
                 algorithm: str = "auto"):
        self.s, self.fabric, self.logdir, self.iters, self.mib = (session, fabric, logdir,
                                                                   iters, mib)
        self.hosts = collectives.rank_hosts(fabric)
        ranks = collectives.ring(self.hosts, collectives.DATA_DIRECTION["gloo"])
        self.job = {"id": "ring", "collective": "ring_allreduce", "ranks": ranks,
                    "bytes": mib * 2 ** 20, "algorithm": algorithm}
        self.out: dict = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.cancel = threading.Event()

    def _run(self) -> None:
        try:
            self.out["res"] = collectives.run_allreduce(
                self.s.net, self.fabric, "gloo", self.hosts, mib=self.mib, iters=self.iters,
                logdir=self.logdir, attempts=1, cancel=self.cancel, timeout=300)
        except Exception:  # noqa: BLE001 - reported in the case's result
            self.out["error"] = traceback.format_exc(limit=3)

    def start(self, first_iterations_s: float = 4.0) -> RunningRing:
        self.retrans0 = retransmitted(self.s.net, self.hosts)
        self.thread.start()
        time.sleep(first_iterations_s)  # the ranks connected and iterating
        if not self.thread.is_alive():
            raise RuntimeError(f"the ring ended before the fault: {self.out}")
        return self

    def result(self, timeout: float = 300) -> dict:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.cancel.set()
            self.thread.join(30)
            return {"sums_ok": False, "error": f"still running after {timeout:g} s"}
        if "error" in self.out:
            return {"sums_ok": False, "error": self.out["error"]}
        res = self.out["res"]
        times = sorted(res.get("iteration_s") or res.get("times") or [])
        return {"sums_ok": bool(res["sums_ok"]), "iterations": len(times),
                "median_iteration_s": round(times[len(times) // 2], 3) if times else None,
                "max_iteration_s": round(times[-1], 3) if times else None,
                "retransmitted_segments": retransmitted(self.s.net, self.hosts) - self.retrans0}


def quiesce(ctl, quiet: float = 6.0, timeout: float = 90.0) -> float:
    """Wait until the routes held still ``quiet`` seconds (longer than the hold-down after
    which auto re-optimises returned links, 5 s by default); the seconds waited."""
    t0 = last_change = time.monotonic()
    last = ctl.rest("GET", "/v1/routes")[1]
    while time.monotonic() - last_change < quiet:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"the routes still moved after {timeout:g} s")
        time.sleep(0.5)
        now = ctl.rest("GET", "/v1/routes")[1]
        if now != last:
            last, last_change = now, time.monotonic()
    return time.monotonic() - t0
