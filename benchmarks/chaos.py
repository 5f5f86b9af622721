"""The chaos suite (issue 59): an operator's bad day on real parts, on the leaf-spine and the
k = 4 fat-tree of Open vSwitch bridges in Mininet, ryu-manager with a state file. Each case
injects one fault and reports, in JSON:

* the jobs: present and complete, or absent and clean (a POST cut by a crash);
* ``tables``: every switch's tables against the controller's intent
  (``emulation.harness.chaos.intent_check``: dumped, wiped, refilled by the controller, equal);
* the time until synchronised again;
* REST while the fault lasts: the maximum latency and the count of 5xx answers;
* a gloo ring All-Reduce running through the fault: exact sums, its slowest iteration, and
  the TCP segments sent again (what the fabric dropped).

Cases: ``kill`` (kill -9 of the controller at 25%, 50% and 90% of a 1,920-flow POST on the
fat-tree, 448 on the leaf-spine), ``ovs-restart`` (``ovs-ctl restart`` with jobs installed:
the tables after equal those before, no route moved), ``flap`` (a spine or core link
flapped 10 times in 20 s under the ring), ``switch`` (a spine or aggregation switch deleted
with ``del-br``, brought back), ``table-full`` (a leaf whose table 0 is limited with
``flow_limit`` and ``overflow_policy=refuse`` and holds a deleted job's entries), ``forged``
(forged LLDP and forged source addresses from a host), ``etcd`` (two controllers on etcd: the
etcd server killed -9 and started again).

    python -m benchmarks.chaos [--shape leaf-spine|fat-tree|both] [--only kill,flap]
        [--out bench/chaos.json]

Needs root, Open vSwitch, Mininet, PyTorch (gloo) and etcd: ``make system``. ``ovs-ctl
restart`` restarts the machine's one Open vSwitch: other emulations' bridges stall with it.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from emulation.harness import fabricnet
from emulation.harness.chaos import (
    Poller,
    RunningRing,
    intent_check,
    quiesce,
    tables,
)
from emulation.harness.controller_proc import REPO
from emulation.harness.session import Session, install_interrupt_handler
from topologies.clos import clos_fabric, fattree_fabric

BW = 50.0
PER_PAIR = 8  # flows per host pair of the large POST: 1,920 on the fat-tree
SHAPES = {"leaf-spine": lambda: clos_fabric(2, 4, 2, BW),
          "fat-tree": lambda: fattree_fabric(4, 2, BW)}
ALL = ("kill", "ovs-restart", "flap", "switch", "table-full", "forged", "etcd")


def say(msg: str) -> None:
    print(f"[chaos] {msg}", file=sys.stderr, flush=True)


def large_job(fabric, jid: str = "big") -> dict:
    hosts = sorted(fabric.hosts)
    flows = [{"src": s, "dst": d, "bytes": 1e6, "proto": "tcp", "sport": 20000 + i,
              "dport": 5201} for s in hosts for d in hosts if s != d for i in range(PER_PAIR)]
    return {"id": jid, "flows": flows}


def routes(ctl) -> dict:
    """(job, src, dst, sport, dport) -> path, of every planned flow."""
    doc = ctl.rest("GET", "/v1/routes")[1]
    return {(r.get("job"), r["src"], r["dst"], r.get("sport"), r.get("dport")): _where(r)
            for r in doc.get("routes", [])}


def _where(route: dict) -> tuple:
    """A route's path, or its split parts' paths (a flow within one leaf has none)."""
    if "split" in route:
        return tuple(tuple(p.get("path") or ()) for p in route["split"])
    return tuple(route.get("path") or ())


def post(ctl, job: dict) -> dict:
    status, doc = ctl.rest("POST", "/v1/jobs", job, timeout=120)
    if status != 201:
        raise RuntimeError(f"POST of job {job['id']}: {status} {doc}")
    return doc


def moved(before: dict, after: dict) -> int:
    return sum(1 for k, p in before.items() if k in after and after[k] != p)


def job_state(ctl, jid: str, flows: int) -> str:
    status, view = ctl.rest("GET", f"/v1/jobs/{jid}")
    if status == 404:
        return "absent"
    n = sum(1 for k in routes(ctl) if k[0] == jid)
    return "present-complete" if status == 200 and n == flows else f"present-{n}-of-{flows}"


def metric(ctl, name: str) -> float:
    total = 0.0
    for line in ctl.client.metrics(timeout=30).splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def settle(s, timeout: float = 60.0) -> None:
    """Every switch synchronised and the routes still (no re-optimisation to come)."""
    s.wait_ready(timeout)
    quiesce(s.ctl)


# a case's own findings that fail it, by the field that holds them: (test, what it says)
FINDINGS = {
    "routes_moved": (bool, lambda n: f"{n} routes moved, though no link failed"),
    "same_tables_s": (lambda v: v is None, lambda _: "the tables never came back to those "
                                                     "before the restart"),
    "table_full_total": (lambda n: n < 1, lambda _: "no table-full was met: the case did not "
                                                    "test anything"),
    "forged_received": (bool, lambda n: f"{n} forged datagrams arrived"),
    "links_changed": (bool, lambda _: "the forged LLDP changed the fabric's links"),
}


def judge(case: dict) -> dict:
    """``ok``: nothing lost. The tables equal the intent, no 5xx, the ring's sums exact, the
    jobs present and complete or absent (never half), and none of the case's own findings
    (``FINDINGS``) against it."""
    problems = [tell(case[k]) for k, (bad, tell) in FINDINGS.items() if k in case and bad(case[k])]
    if case.get("tables", {}).get("mismatched"):
        problems.append(f"{case['tables']['mismatched']} switches' tables differ from the intent")
    if case.get("rest", {}).get("5xx"):
        problems.append(f"{case['rest']['5xx']} answers 5xx")
    if "ring" in case and not case["ring"].get("sums_ok"):
        problems.append("the ring's sums are wrong or it failed")
    for k, v in case.items():
        if k.startswith("job") and isinstance(v, str) and v.startswith("present-") \
                and v != "present-complete":
            problems.append(f"{k}: {v}")
    return {**case, "ok": not problems, "problems": problems}


# ---- cases on one Session ------------------------------------------------------------------
def case_kill(s, fabric, outdir: str) -> list[dict]:
    job = large_job(fabric)
    t = time.monotonic()
    post(s.ctl, job)
    post_s = time.monotonic() - t
    s.ctl.rest("DELETE", "/v1/jobs/big")
    settle(s)
    out = []
    for frac in (0.25, 0.5, 0.9):
        answer: dict = {}

        def posting(ctl=s.ctl):
            try:
                answer["status"] = ctl.rest("POST", "/v1/jobs", job, timeout=120)[0]
            except OSError as e:
                answer["status"] = f"no answer ({type(e).__name__})"
        with Poller(lambda: [s.ctl]) as poll:
            th = threading.Thread(target=posting, daemon=True)
            th.start()
            time.sleep(frac * post_s)
            t0 = time.monotonic()
            s.ctl.proc.kill()
            s.ctl.proc.wait(timeout=10)
            s.ctl.stop()
            th.join(30)
            s.ctl = s.controller(log=f"controller-kill{int(frac * 100)}.log").start()
            s.wait_ready(60)
            ready_s = time.monotonic() - t0
        state = job_state(s.ctl, "big", len(job["flows"]))
        case = {"case": "kill", "at": f"{int(frac * 100)}% of the POST ({post_s:.2f} s)",
                "post_answer": answer.get("status"), "job": state,
                "ready_s": round(ready_s, 2), "rest": poll.summary(),
                "tables": intent_check(s.ctl, fabric.switches())}
        out.append(judge(case))
        say(f"kill at {frac:.0%}: {state}, ready {ready_s:.2f} s, "
            f"{case['tables']['mismatched']} tables differ")
        if state != "absent":
            s.ctl.rest("DELETE", "/v1/jobs/big")
        settle(s)
    return out


def case_ovs_restart(s, fabric, outdir: str) -> list[dict]:
    ring_job = RunningRing(s, fabric, os.path.join(outdir, "gloo-ovs")).job
    post(s.ctl, ring_job)
    big = large_job(fabric, "a2a")
    big["flows"] = big["flows"][::PER_PAIR]  # one flow a pair
    big["algorithm"] = "auto"
    post(s.ctl, big)
    settle(s)
    time.sleep(2)
    before_routes = routes(s.ctl)
    before = tables(fabric.switches())
    with Poller(lambda: [s.ctl]) as poll:
        t0 = time.monotonic()
        fabricnet.ovs_ctl("--system-id=random", "restart")
        restarted_s = time.monotonic() - t0

        def same():
            return s.ctl.rest("GET", "/v1/ready")[0] == 200 and \
                tables(fabric.switches()) == before
        try:
            fabricnet.wait_until(same, 120, interval=0.5, what="the tables as before the restart")
            sync_s = time.monotonic() - t0
        except TimeoutError:
            sync_s = None
    after_routes = routes(s.ctl)
    case = {"case": "ovs-restart", "entries_before": sum(len(v) for v in before.values()),
            "ovs_ctl_s": round(restarted_s, 2),
            "same_tables_s": round(sync_s, 2) if sync_s is not None else None,
            "routes_moved": moved(before_routes, after_routes), "rest": poll.summary(),
            "tables": intent_check(s.ctl, fabric.switches())}
    res = judge(case)
    for jid in ("ring", "a2a"):
        s.ctl.rest("DELETE", f"/v1/jobs/{jid}")
    settle(s)
    say(f"ovs-restart: ovs-ctl {restarted_s:.1f} s, same tables after {case['same_tables_s']} s, "
        f"{case['routes_moved']} routes moved")
    return [res]


def _ring_link(fabric, view_routes: dict) -> tuple[str, str]:
    """A top-tier link (a spine's or a core's) that carries ring flows."""
    top = fabric.tiers - 1
    for (jid, *_), path in sorted(view_routes.items(), key=str):
        if jid != "ring":
            continue
        for a, b in zip(path, path[1:]):
            if top in (fabric.tier_of[a], fabric.tier_of[b]):
                return (a, b)
    raise RuntimeError("no ring flow crosses the top tier")


def case_flap(s, fabric, outdir: str) -> list[dict]:
    ring = RunningRing(s, fabric, os.path.join(outdir, "gloo-flap"), iters=40)
    post(s.ctl, ring.job)
    settle(s)
    link = _ring_link(fabric, routes(s.ctl))
    with Poller(lambda: [s.ctl]) as poll:
        ring.start()
        for _ in range(10):
            s.net.configLinkStatus(*link, "down")
            time.sleep(1.0)
            s.net.configLinkStatus(*link, "up")
            time.sleep(1.0)
        ring_result = ring.result()
    settle(s)
    case = {"case": "flap", "link": "-".join(link), "flaps": 10, "ring": ring_result,
            "rest": poll.summary(), "tables": intent_check(s.ctl, fabric.switches())}
    s.ctl.rest("DELETE", "/v1/jobs/ring")
    settle(s)
    say(f"flap {link}: ring {ring_result}, rest {case['rest']}")
    return [judge(case)]


def case_switch(s, fabric, outdir: str) -> list[dict]:
    ring = RunningRing(s, fabric, os.path.join(outdir, "gloo-switch"))
    post(s.ctl, ring.job)
    settle(s)
    a, b = _ring_link(fabric, routes(s.ctl))
    name = a if fabric.tier_of[a] == 1 else b  # a spine, or an aggregation switch
    sw = s.net.get(name)
    with Poller(lambda: [s.ctl]) as poll:
        ring.start()
        t0 = time.monotonic()
        sw.stop(deleteIntfs=False)  # ovs-vsctl del-br: its ports vanish, the peers' stay up
        stop_s = time.monotonic() - t0  # the switch is gone somewhere within this
        fabricnet.wait_until(lambda: not any(name in str(p) for p in routes(s.ctl).values()),
                             30, interval=0.05, what=f"the routes off {name}")
        off_s = time.monotonic() - t0
        time.sleep(3)
        t1 = time.monotonic()
        sw.start(s.net.controllers)
        s.wait_ready(60)
        back_s = time.monotonic() - t1
        ring_result = ring.result()
    settle(s)
    case = {"case": "switch", "switch": name, "routes_off_s": round(off_s, 2),
            "del_br_s": round(stop_s, 2),
            "ready_after_return_s": round(back_s, 2), "ring": ring_result,
            "rest": poll.summary(), "tables": intent_check(s.ctl, fabric.switches())}
    s.ctl.rest("DELETE", "/v1/jobs/ring")
    settle(s)
    say(f"switch {name}: off in {off_s:.2f} s (del-br took {stop_s:.2f} s), ready "
        f"{back_s:.2f} s after its return")
    return [judge(case)]


def case_table_full(s, fabric, outdir: str) -> list[dict]:
    """Job a (many flows from one leaf) installed; the controller stopped; meanwhile another
    controller on the same state file (in this process, on fake switches) deletes a and posts
    b; the leaf's table 0 limited to what it holds plus one. The controller starts again: b's
    additions are refused until a's entries are deleted first."""
    from controller.service import api
    from controller.service.route_service import RouteService
    from controller.service.store import StateStore
    from emulation.harness.fake_switch import FakeSwitches
    leaf = sorted(fabric.leaves)[0]
    mine = sorted(h for h in fabric.hosts if fabric.leaf_of(h) == leaf)
    others = sorted(h for h in fabric.hosts if fabric.leaf_of(h) != leaf)
    a = {"id": "a", "flows": [{"src": h, "dst": d, "bytes": 1e6, "proto": "tcp",
                               "sport": 30000 + i, "dport": 5201}
                              for h in mine for i, d in enumerate(others * 4)]}
    b = {"id": "b", "flows": [dict(x, sport=x["sport"] + 10000)  # other entries than a's
                              for x in a["flows"][: len(a["flows"]) // 2]]}
    post(s.ctl, a)
    settle(s)
    s.ctl.stop()
    f = fabric
    other = RouteService(FakeSwitches(f.dpids.values()), f, store=StateStore(s.state),
                         algorithm="greedy")
    for n, d in f.dpids.items():
        other.switch_connected(d, {p: True for p in f.ports[n].values()})
    assert api.handle(other, "DELETE", "/v1/jobs/a", b"")[0] in (200, 204)
    assert api.handle(other, "POST", "/v1/jobs", json.dumps(b).encode())[0] == 201
    held = len(_flows(leaf))
    subprocess.run(["ovs-vsctl", "--", "--id=@ft", "create", "Flow_Table",
                    f"flow_limit={held + 1}", "overflow_policy=refuse", "--", "set", "Bridge",
                    leaf, "flow_tables:0=@ft"], check=True, capture_output=True, timeout=30)
    try:
        t0 = time.monotonic()
        s.ctl = s.controller(log="controller-tablefull.log").start()
        s.wait_ready(60)
        ready_s = time.monotonic() - t0
        state = job_state(s.ctl, "b", len(b["flows"]))
        made_room = metric(s.ctl, "mlroute_table_full_total")
        gone = job_state(s.ctl, "a", len(a["flows"]))
    finally:
        subprocess.run(["ovs-vsctl", "clear", "Bridge", leaf, "flow_tables"],
                       capture_output=True, timeout=30)
    case = {"case": "table-full", "leaf": leaf, "flow_limit": held + 1, "job_b": state,
            "job_a": gone, "table_full_total": made_room, "ready_s": round(ready_s, 2),
            "tables": intent_check(s.ctl, fabric.switches())}
    s.ctl.rest("DELETE", "/v1/jobs/b")
    settle(s)
    res = judge(case)
    say(f"table-full on {leaf}: b {state}, a {gone}, table_full_total {made_room}")
    return [res]


def _flows(bridge: str) -> list[str]:
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-stats", "dump-flows", bridge,
                          "table=0"], capture_output=True, text=True, timeout=30, check=True)
    return [l for l in out.stdout.splitlines() if "actions=" in l]


def case_forged(s, fabric, outdir: str) -> list[dict]:
    """A host sends forged LLDP (claiming to be a switch port) and datagrams with another
    host's source: the fabric and routes do not change, no forged datagram arrives."""
    hosts = sorted(fabric.hosts)
    attacker, victim = hosts[1], hosts[-1]
    forged_as = next(h for h in hosts if h not in (attacker, victim))
    ring = RunningRing(s, fabric, os.path.join(outdir, "gloo-forged")).job
    post(s.ctl, ring)
    settle(s)
    links_before = s.ctl.rest("GET", "/v1/fabric")[1].get("links")
    before = routes(s.ctl)
    att, vic = s.net.get(attacker), s.net.get(victim)
    iface = att.defaultIntf().name
    peer = fabric.dpids[fabric.leaf_of(forged_as)]

    def attack(host, *args):
        return host.popen([sys.executable, "-m", "emulation.harness.attacks", *args], cwd=REPO)
    with Poller(lambda: [s.ctl]) as poll:
        listen = attack(vic, "udp-count", "--port", "5999", "--duration", "12")
        time.sleep(1)
        lldp = attack(att, "lldp", "--iface", iface, "--dpid", hex(peer), "--port", "1",
                      "--rate", "10", "--duration", "5")
        forged = attack(att, "ipv4", "--iface", iface, "--src", fabric.host_ip[forged_as],
                        "--dst", fabric.host_ip[victim], "--dst-mac", vic.MAC(),
                        "--rate", "200", "--duration", "5")
        sent = _last_json(forged, 60)
        _last_json(lldp, 60)
        got = _last_json(listen, 60)["received"]
        time.sleep(2)
    case = {"case": "forged", "forged_sent": sent.get("sent"),
            "forged_received": got.get(fabric.host_ip[forged_as], 0),
            "links_changed": s.ctl.rest("GET", "/v1/fabric")[1].get("links") != links_before,
            "routes_moved": moved(before, routes(s.ctl)), "rest": poll.summary(),
            "tables": intent_check(s.ctl, fabric.switches())}
    s.ctl.rest("DELETE", "/v1/jobs/ring")
    settle(s)
    res = judge(case)
    say(f"forged: {case['forged_received']} of {case['forged_sent']} arrived, "
        f"links changed {case['links_changed']}")
    return [res]


def _last_json(proc, timeout: float) -> dict:
    out = proc.communicate(timeout=timeout)[0]
    text = out.decode() if isinstance(out, bytes) else out
    return json.loads(text.strip().splitlines()[-1])


def case_etcd(shape: str, fabric, outdir: str) -> list[dict]:
    from emulation.harness.ha import EtcdServer, HaSession
    with EtcdServer(outdir) as etcd:
        with HaSession(0, 0, 0, BW, outdir, etcd.url, clos=fabric) as ha:
            m = ha.master()
            job = large_job(fabric, "x")
            job["flows"] = job["flows"][::PER_PAIR]
            post(m, job)
            ha.wait_ready()
            with Poller(lambda: [c for c in ha.ctls.values() if c is not None]) as poll:
                t0 = time.monotonic()
                etcd.kill()
                time.sleep(5)
                etcd.start()
                job2 = {"id": "y", "flows": [dict(x, sport=x["sport"] + 5000)
                                             for x in job["flows"]]}

                answers: list = []

                def posted():
                    try:
                        status, doc = ha.master().rest("POST", "/v1/jobs", job2, timeout=30)
                    except (OSError, TimeoutError) as e:
                        answers.append(repr(e))
                        return False
                    answers.append((round(time.monotonic() - t0, 2), status,
                                    str(doc.get("error", ""))[:200]))
                    return status == 201
                try:
                    fabricnet.wait_until(posted, 60, interval=0.5,
                                         what="a write accepted after etcd returned")
                except TimeoutError:
                    raise TimeoutError(f"no write accepted after etcd returned: {answers[-5:]}") from None
                writable_s = time.monotonic() - t0
                ha.wait_ready()
            m = ha.master()
            states = {j: job_state(m, j, len(job["flows"])) for j in ("x", "y")}
            case = {"case": "etcd", "writable_after_s": round(writable_s, 2),
                    "job_x": states["x"], "job_y": states["y"], "rest": poll.summary(),
                    "tables": intent_check(m, fabric.switches())}
    say(f"etcd: writable {writable_s:.1f} s after the kill, jobs {states}")
    return [judge(case)]


CASES = {"kill": case_kill, "ovs-restart": case_ovs_restart, "flap": case_flap,
         "switch": case_switch, "table-full": case_table_full, "forged": case_forged}


def run_shape(shape: str, only: list[str], outdir: str) -> list[dict]:
    fabric = SHAPES[shape]()
    results = []
    session_cases = [c for c in only if c in CASES]
    if session_cases:
        d = os.path.join(outdir, shape)
        os.makedirs(d, exist_ok=True)
        with Session(0, 0, 0, BW, d, clos=fabric, state=True,
                     extra_args=["--mlroute-stats-interval", "1"], progress=say) as s:
            for name in session_cases:
                say(f"{shape}: {name}")
                t = time.monotonic()
                try:
                    got = CASES[name](s, fabric, d)
                except Exception as e:  # noqa: BLE001 - the case failed; the others run
                    say(f"{shape}: {name} failed: {e!r}")
                    got = [{"case": name, "ok": False, "problems": [f"raised {e!r}"]}]
                    s.ctl.rest("GET", "/v1/ready")  # a case that killed it: the next fails too
                for r in got:
                    results.append({"shape": shape, **r,
                                    "case_s": round(time.monotonic() - t, 1)})
    if "etcd" in only:
        d = os.path.join(outdir, shape + "-etcd")
        os.makedirs(d, exist_ok=True)
        results += [{"shape": shape, **r} for r in case_etcd(shape, fabric, d)]
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--shape", choices=[*SHAPES, "both"], default="both")
    ap.add_argument("--only", default=",".join(ALL), help="cases, comma-separated: "
                    + ", ".join(ALL))
    ap.add_argument("--out", default="bench/chaos.json")
    ap.add_argument("--logs", help="keep the controllers' and etcd's logs in this folder "
                    "(default: a temporary folder, removed)")
    args = ap.parse_args(argv)
    only = [c for c in args.only.split(",") if c]
    unknown = sorted(set(only) - set(ALL))
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)} (choose from {', '.join(ALL)})")
    install_interrupt_handler()
    fabricnet.ensure_ovs()
    shapes = list(SHAPES) if args.shape == "both" else [args.shape]
    with tempfile.TemporaryDirectory(prefix="mlroute-chaos-") as tmp:
        if args.logs:
            os.makedirs(args.logs, exist_ok=True)
            tmp = args.logs
        results = []
        for shape in shapes:
            results += run_shape(shape, only, tmp)
    doc = {"benchmark": "chaos", "cases": results,
           "ok": all(r["ok"] for r in results),
           "command": "python -m benchmarks.chaos " + " ".join(argv or sys.argv[1:])}
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
    say(f"{sum(r['ok'] for r in results)} of {len(results)} cases nothing lost")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
