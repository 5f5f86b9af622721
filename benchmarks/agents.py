"""Benchmark of the controller's side of srv6 mode at the sizes production runs: one
controller (``mlroute-controller --mlroute-southbound none``, a declared k-ary fat-tree) and
one simulated agent per host, speaking the real protocol on loopback (the segments watch:
``If-None-Match`` and ``Prefer: wait``; probe reports), all in this process's event loop.

What it measures, each against a baseline in the same run (operators' requests before any
watch; and the smallest size again with every request in a green thread, each watch
looking every 50 ms: ``--nomlroute-rest-native-reads``):

* ``idle``: every watch held at once; the controller's CPU over ``IDLE_S`` seconds (share of
  a core) and its resident memory; operators' requests meanwhile (``GET /v1/jobs``, ``GET
  /v1/ready``, p50/p99), against the same requests before any watch was held;
* ``ring``: a ring of ``RING`` hosts posted; per member, the time from the POST's answer to
  its new document (p50, p99, max), the members that got one, the non-members woken (must
  be 0), and the bytes of documents served;
* ``probes``: what the documents make the agents probe once the ring runs: paths and
  probes a second per host and fabric-wide, and the links (all; in use) crossed by the
  probes of fewer than two hosts (must be 0);
* ``failure``: a core link on the ring's paths reported failed by the probes of two hosts
  (``POST /v1/hosts/{host}/probes``, the quorum); per agent whose document changed, the time
  from the second report's answer to its new document (p50, p99), the hosts woken.

    python -m benchmarks.agents [--k 16] [--k 32] [--out bench/agents.json]

Needs no root and no switch; bounded in time (every wait has a timeout) and in sockets (one
per simulated agent, plus the requests'). The controller listens on ``REST_PORT`` (below the
ephemeral range: thousands of client sockets take ephemeral ports).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time

from controller.agent.main import WAIT_S  # what each agent's watch asks the controller to hold
from emulation.harness.step_diag import cpu_times

REST_PORT, OF_PORT = 18080, 16653  # fixed, below the ephemeral range
IDLE_S = 25.0  # the idle window: renewals (a 304, asked again) at n / WAIT_S a second
RING = 512
TIMEOUT_S = 60.0


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 4)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_cores(before: dict, after: dict) -> float:
    """The machine's busy cores between two ``step_diag.cpu_times()`` readings, beside the
    controller's own CPU: other work on the 2 cores makes each wake dearer.

    >>> _busy_cores({"idle": 0, "total": 0}, {"idle": 50, "total": 100}) == os.cpu_count() / 2
    True
    """
    total = after["total"] - before["total"]
    return (total - (after["idle"] - before["idle"])) / max(1, total) * os.cpu_count()


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


class _Exchange(asyncio.Protocol):
    """One request and its answer on a connection of its own, as the agents' client does
    (``controller.client``: HTTP/1.1, no ``Connection`` header, closed after the answer).
    The answer is read in the event loop's callbacks: ``at`` is when its last byte was read,
    before any task runs, so the figures leave out the harness's own queue of 1,024 or
    8,192 tasks (measured apart: ``Agents.lag``)."""

    def __init__(self, request: bytes, done: asyncio.Future):
        self.request, self.done, self.buf = request, done, bytearray()
        self.head, self.need, self.transport = None, None, None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.need is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            self.head = (int(lines[0].split()[1]), fields)
            self.need = end + 4 + int(fields.get("content-length", 0))
        if len(self.buf) >= self.need and not self.done.done():
            body = bytes(self.buf[self.need - int(self.head[1].get("content-length", 0)):
                                  self.need])
            self.done.set_result((*self.head, body, time.monotonic()))
            self.transport.close()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("closed before its answer"))
            self.done.exception()  # retrieved: a stopped agent's no longer awaits it


async def _exchange(method: str, path: str, body: bytes = b"", headers: dict | None = None,
                    timeout: float = TIMEOUT_S) -> tuple[int, dict, bytes, float]:
    """(status, header fields, body, ``at``: when the answer was read) of one request."""
    loop = asyncio.get_running_loop()
    head = [f"{method} {path} HTTP/1.1", "Host: bench", f"Content-Length: {len(body)}"]
    if body:
        head.append("Content-Type: application/json")
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    done = loop.create_future()
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
    transport, _ = await asyncio.wait_for(loop.create_connection(
        lambda: _Exchange(request, done), "127.0.0.1", REST_PORT), timeout)
    try:
        return await asyncio.wait_for(done, timeout)
    finally:
        transport.close()


async def _request(method: str, path: str, body: bytes = b"", headers: dict | None = None,
                   timeout: float = TIMEOUT_S) -> tuple[int, dict, bytes]:
    return (await _exchange(method, path, body, headers, timeout))[:3]


def _version(data: bytes) -> str:
    """A segments document's version, read where ``json.dumps`` puts it (after ``host``)
    instead of parsing the whole document: parsing each of a ring's 512 documents as it came
    took a sixth of the harness's loop, delaying its reading of the later answers (issue 73;
    the agents' own parsing runs on their own hosts, not in one process). Parsed whole where
    it is not found there.

    >>> _version(b'{"host": "h0", "version": "ab:7", "flows": []}'), _version(b'{"version":"x"}')
    ('ab:7', 'x')
    """
    key = b'"version": "'
    i = data.find(key, 0, 512)
    if i < 0:
        return json.loads(data)["version"]
    i += len(key)
    return data[i:data.index(b'"', i)].decode()


class Agents:
    """One watch loop per host; ``got[host]``: (time read, version, bytes) of each document;
    ``lag``: per answer, from its reading to its task's turn (the harness's own delay);
    ``renewed``: watches answered 304 (their wait ended with no change); ``last[host]``: its
    latest document, parsed once the measurements are done (``probes``)."""

    def __init__(self, hosts: list[str]):
        self.hosts = hosts
        self.version = dict.fromkeys(hosts, "")
        self.got: dict[str, list] = {h: [] for h in hosts}
        self.lag: list[float] = []
        self.renewed = 0
        self.last: dict[str, bytes] = {}
        self.errors: list[str] = []
        self.stopping = False
        self.tasks: list = []

    async def watch(self, host: str, first_wait: float = WAIT_S) -> None:
        """``first_wait``: the first watch's wait, spread over the hosts so that their
        renewals are too, as in a fleet whose agents did not all start in the same second
        (8,192 renewals at once held this process's loop for 4 s at k = 32)."""
        wait = first_wait
        while not self.stopping:
            headers = {}
            if self.version[host]:
                headers = {"If-None-Match": f'"{self.version[host]}"',
                           "Prefer": f"wait={wait:.2f}"}
                wait = WAIT_S
            try:
                status, _, data, at = await _exchange("GET", f"/v1/hosts/{host}/segments",
                                                      headers=headers, timeout=WAIT_S + 30)
                self.lag.append(time.monotonic() - at)
            except (TimeoutError, OSError, ValueError, IndexError) as e:
                if not self.stopping:
                    self.errors.append(f"{host}: {type(e).__name__} {e}")
                    await asyncio.sleep(0.5)
                continue
            if status == 200:
                version = _version(data)
                self.last[host] = data
                if version != self.version[host]:
                    self.got[host].append((at, version, len(data)))
                    self.version[host] = version
            elif status == 304:
                self.renewed += 1
            else:
                self.errors.append(f"{host}: HTTP {status}")
                await asyncio.sleep(0.5)

    def probes(self) -> dict[str, tuple]:
        """Host -> (paths in use, other paths) its latest document makes it probe."""
        out = {}
        for host, data in self.last.items():
            doc = json.loads(data)
            used = {tuple(f["path"]) for f in doc["flows"]} | {
                tuple(f["backup"]["path"]) for f in doc["flows"] if "backup" in f}
            paths = [tuple(p["path"]) for p in doc["probes"]]
            out[host] = ([p for p in paths if p in used], [p for p in paths if p not in used])
        return out

    def start(self) -> None:
        n = len(self.hosts)
        self.tasks = [asyncio.ensure_future(self.watch(h, WAIT_S * (i + 1) / n))
                      for i, h in enumerate(self.hosts)]

    async def stop(self) -> None:
        self.stopping = True
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _operator_latency(n: int = 40) -> dict:
    out = {}
    for path in ("/v1/jobs", "/v1/ready"):
        times = []
        for _ in range(n):
            t = time.monotonic()
            status, _, _ = await _request("GET", path)
            if status in (200, 503):
                times.append(time.monotonic() - t)
        out[path] = {"p50_ms": round(_pct(times, 0.5) * 1e3, 2),
                     "p99_ms": round(_pct(times, 0.99) * 1e3, 2), "answered": len(times)}
    return out


async def _until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _probe_duties(fabric, agents: Agents, routes: list[dict]) -> dict:
    """What the hosts' documents make their agents probe: paths per host, probes a second
    per host and fabric-wide at the agent's rates (the paths in use every ``FAST_S``, the
    others every ``SLOW_S``, within its bound a round), and the links crossed by the probes
    of fewer than two hosts: of the links in use (the routes') and of all links."""
    from controller.agent.probe import FAST_LISTS, FAST_S, SLOW_PER_ROUND, SLOW_S
    crossed: dict = {link: set() for link in fabric.links()}
    rates, counts = [], []
    for host, (used, other) in agents.probes().items():
        counts.append(len(used) + len(other))
        rates.append(min(len(used), FAST_LISTS) / FAST_S
                     + min(len(other) / SLOW_S, SLOW_PER_ROUND / FAST_S))
        for path in used + other:
            for a, b in zip(path, path[1:]):
                crossed[(a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)].add(host)
    in_use = {(a, b) if fabric.tier_of[a] < fabric.tier_of[b] else (b, a)
              for r in routes for a, b in zip(r["path"], r["path"][1:])}
    return {"hosts": len(counts), "paths_per_host_max": max(counts, default=0),
            "paths_per_host_mean": round(sum(counts) / max(1, len(counts)), 2),
            "probes_per_s_per_host_max": round(max(rates, default=0), 1),
            "probes_per_s_fabric": round(sum(rates)),
            "links": len(crossed), "links_in_use": len(in_use),
            "links_under_two_hosts": sum(1 for h in crossed.values() if len(h) < 2),
            "links_in_use_under_two_hosts": sum(1 for l in in_use if len(crossed[l]) < 2)}


def _ring_members(fabric, n: int) -> list[str]:
    """``n`` hosts spread over every leaf in turn (a ring across pods)."""
    by_leaf: dict = {}
    for host, leaf in sorted(fabric.host_leaves.items()):
        by_leaf.setdefault(leaf if isinstance(leaf, str) else leaf[0], []).append(host)
    out, i = [], 0
    while len(out) < n:
        for leaf in sorted(by_leaf):
            if i < len(by_leaf[leaf]) and len(out) < n:
                out.append(by_leaf[leaf][i])
        i += 1
    return out


async def _failure(agents: Agents, routes: list[dict], docs: dict) -> dict:
    """A core link on the ring's paths reported failed by the probes of two hosts."""
    crossing: dict = {}
    for r in routes:
        p = r["path"]
        for a, b in zip(p, p[1:]):
            if a.startswith("c") or b.startswith("c"):
                crossing.setdefault(tuple(sorted((a, b))), []).append(r["src"])
    link, hosts = max(crossing.items(), key=lambda kv: len(kv[1]))
    reporters = []
    for host in dict.fromkeys(hosts):
        paths = [{"path": p["path"], "ok": not ({*link} <= set(p["path"]) and any(
            tuple(sorted(h)) == link for h in zip(p["path"], p["path"][1:])))}
            for p in docs[host]["probes"]]
        if any(not x["ok"] for x in paths) and any(x["ok"] for x in paths):
            reporters.append((host, paths))
        if len(reporters) == 2:
            break
    before = {h: len(v) for h, v in agents.got.items()}
    answered = None
    for host, paths in reporters:
        status, _, data, answered = await _exchange("POST", f"/v1/hosts/{host}/probes",
                                                    json.dumps({"paths": paths}).encode())
        last = json.loads(data) if data else {}
    await asyncio.sleep(3.0)  # the re-plan, then every woken agent's document
    woken = {h for h, v in agents.got.items() if len(v) > before[h]}
    delays = [agents.got[h][before[h]][0] - answered for h in woken]
    return {"link": list(link), "reporters": [h for h, _ in reporters],
            "links_down": last.get("links_down"), "hosts_woken": len(woken),
            "after_second_report_p50_s": _pct(delays, 0.5),
            "after_second_report_p99_s": _pct(delays, 0.99),
            "after_second_report_max_s": round(max(delays), 4) if delays else None}


async def _run(k: int, folder: str, native: bool = True) -> dict:
    from controller.model.clos import Clos
    from controller.model.clos_wiring import wire
    from emulation.harness.controller_proc import ControllerProcess
    fabric = Clos.fat_tree(k)
    fabric = fabric.wire(wire(fabric))
    path = os.path.join(folder, f"fattree{k}.json")
    with open(path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    ctl = ControllerProcess(path, os.path.join(folder, f"controller{k}.log"), "auto", "srv6",
                            REST_PORT, OF_PORT, ["--mlroute-southbound", "none",
                                                 "--mlroute-sflow-port", "0", "--mlroute-quiet",
                                                 *([] if native else
                                                   ["--nomlroute-rest-native-reads"])])
    ctl.start(timeout=120)
    hosts = sorted(fabric.host_leaves)
    agents = Agents(hosts)
    try:
        before = await _operator_latency()
        agents.start()
        assert await _until(lambda: all(agents.version.values()), TIMEOUT_S), \
            f"{sum(1 for v in agents.version.values() if not v)} hosts have no document"
        await asyncio.sleep(1.0)
        cpu0, t0, renewed = _cpu_s(ctl.proc.pid), time.monotonic(), agents.renewed
        machine0 = cpu_times()
        # second by second: the controller's share of a core, renewals, the machine's busy
        # cores (its CPU per renewal rises with what else runs: spread or a spike, and why)
        seconds, renewals, busy = [], [], []
        while time.monotonic() < t0 + IDLE_S:
            c, t, r, m = _cpu_s(ctl.proc.pid), time.monotonic(), agents.renewed, cpu_times()
            await asyncio.sleep(min(1.0, t0 + IDLE_S - t))
            dt, m1 = time.monotonic() - t, cpu_times()
            seconds.append((_cpu_s(ctl.proc.pid) - c) / dt)
            renewals.append((agents.renewed - r) / dt)
            busy.append(_busy_cores(m, m1))
        idle_cpu = (_cpu_s(ctl.proc.pid) - cpu0) / (time.monotonic() - t0)
        machine1 = cpu_times()
        held = await _operator_latency()
        idle = {"hosts": len(hosts), "watches_held": len(hosts), "seconds": IDLE_S,
                "controller_cpu_share": round(idle_cpu, 3),
                "controller_cpu_share_per_s": {"p50": round(_pct(seconds, 0.5), 3),
                                               "max": round(max(seconds, default=0), 3)},
                "watches_renewed": agents.renewed - renewed, "watch_wait_s": WAIT_S,
                "per_s": {"controller_cpu_share": [round(x, 3) for x in seconds],
                          "renewals": [round(x) for x in renewals],
                          "machine_busy_cores": [round(x, 2) for x in busy]},
                "machine_busy_cores": round(_busy_cores(machine0, machine1), 2),
                "controller_rss_mb": _rss_mb(ctl.proc.pid),
                "operators_before_watches": before, "operators_while_held": held,
                "watch_errors": len(agents.errors)}
        members = _ring_members(fabric, min(RING, len(hosts) // 2))
        counts = {h: len(v) for h, v in agents.got.items()}
        lags, harness0 = len(agents.lag), resource.getrusage(resource.RUSAGE_SELF)
        sent = time.monotonic()
        status, _, data, answered = await _exchange("POST", "/v1/jobs", json.dumps(
            {"id": "ring", "collective": "ring_allreduce", "ranks": members,
             "bytes": 1e8}).encode())
        assert status == 201, data[:300]
        routes = json.loads(data)["routes"]
        await _until(lambda: all(len(agents.got[h]) > counts[h] for h in members), 30)
        harness1, waited = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - sent
        lag = agents.lag[lags:]
        await asyncio.sleep(2.0)  # any non-member woken would have its answer by now
        got = [agents.got[h][counts[h]] for h in members if len(agents.got[h]) > counts[h]]
        delays = [t - answered for t, _, _ in got]
        others = [h for h in hosts if h not in set(members) and len(agents.got[h]) > counts[h]]
        ring = {"members": len(members), "members_with_new_document": len(got),
                "after_answer_p50_s": _pct(delays, 0.5), "after_answer_p99_s": _pct(delays, 0.99),
                "after_answer_max_s": round(max(delays), 4) if delays else None,
                "after_post_sent_p99_s": _pct([t - sent for t, _, _ in got], 0.99),
                "non_members_woken": len(others),
                "document_bytes_served": sum(b for _, _, b in got),
                "post_s": round(answered - sent, 3),
                # the harness's own: its tasks' delay after an answer was read, its CPU
                "harness_lag_p50_s": _pct(lag, 0.5), "harness_lag_p99_s": _pct(lag, 0.99),
                "harness_cpu_share": round((harness1.ru_utime + harness1.ru_stime
                                            - harness0.ru_utime - harness0.ru_stime)
                                           / waited, 3)}
        probes = _probe_duties(fabric, agents, routes)
        docs = {}
        for h in members:
            _, _, data = await _request("GET", f"/v1/hosts/{h}/segments")
            docs[h] = json.loads(data)
        failure = await _failure(agents, routes, docs)
        return {"k": k, "rest": "native front" if native else "a green thread per request "
                "(--nomlroute-rest-native-reads: each watch looks every 50 ms)",
                "switches": len(fabric.switches()), "idle": idle, "ring": ring,
                "probes": probes, "failure": failure, "errors_sample": agents.errors[:5]}
    finally:
        await agents.stop()
        ctl.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.agents",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, action="append", help="fat-tree sizes (default 16, 32)")
    ap.add_argument("--out", default=os.path.join("bench", "agents.json"))
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the baseline: the smallest k with every watch in a green "
                         "thread that looks every 50 ms (--nomlroute-rest-native-reads)")
    args = ap.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cases, sizes = [], args.k or [16, 32]
    with tempfile.TemporaryDirectory(prefix="mlroute-agents-") as folder:
        runs = [(k, True) for k in sizes] + ([] if args.no_baseline else [(min(sizes), False)])
        for k, native in runs:
            case = asyncio.run(_run(k, folder, native))
            print(json.dumps(case))
            cases.append(case)
    doc = {"command": "python -m benchmarks.agents " + " ".join(
        f"--k {k}" for k in sizes) + (" --no-baseline" if args.no_baseline else ""),
        "cases": cases}
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
