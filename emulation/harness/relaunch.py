"""Relaunches (issue 22): the same jobs launched again and again with silent pauses between
the launches, as checkpoints and evaluations make. A learned matrix must hold across them:
every launch after the first as fast as the correct declaration, no re-plan per pause.

A variant says which jobs run at once, what the controller is told about them, and what
their correct declaration is (the reference, run in the same invocation):

- ``members``: one ring All-Reduce of every rank, declared by its members' addresses;
- ``rank_order``: the same ring declared in rank order (for gloo, against its data);
- ``moe`` (gloo): one rank per leaf, every iteration an all-to-all of half the tensor, then
  the ring; declared by its members, its reference the 12 pairs as flows with their bytes;
- ``two_jobs``: the ranks in two halves, two jobs at once, each declared by its members;
  with gloo each trains a model with DistributedDataParallel, with Open MPI each runs its
  ring All-Reduce.

References of the rings are the rings in the library's data direction (``DATA_DIRECTION``).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

from emulation.harness import collectives as co

VARIANTS = ("members", "rank_order", "moe", "two_jobs")
GLOO_ONLY = ("moe",)


@dataclass(frozen=True)
class Variant:
    """Jobs that run at once: each job's ranks (host names, rank order), what is posted for
    it, and its correct declaration."""
    name: str
    groups: list[list[str]]
    posted: list[dict]
    correct: list[dict]
    a2a_mib: int = 0
    ddp: bool = False

    @property
    def ids(self) -> list[str]:
        return [doc["id"] for doc in self.posted]


def variant(session, library: str, name: str, hosts: list[str], mib: int,
            ddp: bool | None = None) -> Variant:
    """The variant ``name`` on ranks ``hosts`` (``co.rank_hosts``: consecutive ranks on
    different leaves). ``ddp`` (``two_jobs``, gloo): DistributedDataParallel training rather
    than ring All-Reduces (the default with gloo)."""
    if name not in VARIANTS:
        raise ValueError(f"unknown variant {name!r}; one of {', '.join(VARIANTS)}")
    if name in GLOO_ONLY and library != "gloo":
        raise ValueError(f"the {name} variant runs with gloo only")
    fabric, way = session.fabric, co.DATA_DIRECTION[library]
    size = mib * (1 << 20)

    def members(jid, ranks):
        return {"id": jid, "bytes": size, "members": [fabric.host_ip[h] for h in ranks]}

    def ring(jid, ranks):
        return {"id": jid, "bytes": size, "ranks": co.ring(ranks, way)}

    jid = f"{library}-{name}"
    if name == "members":
        return Variant(name, [hosts], [members(jid, hosts)], [ring(jid, hosts)])
    if name == "rank_order":
        return Variant(name, [hosts], [{"id": jid, "bytes": size, "ranks": list(hosts)}],
                       [ring(jid, hosts)])
    if name == "moe":
        ranks = co.one_per_leaf(fabric, hosts)
        a2a, n = max(1, mib // 2), len(ranks)
        ring_pairs = correct_pairs({"ranks": co.ring(ranks, way)})
        flows = [{"src": a, "dst": b,
                  "bytes": (a2a << 20) // n + (2 * (n - 1) * size // n
                                                if (a, b) in ring_pairs else 0)}
                 for a in ranks for b in ranks if a != b]
        return Variant(name, [ranks], [members(jid, ranks)], [{"id": jid, "flows": flows}],
                       a2a_mib=a2a)
    half = len(hosts) // 2
    groups = [hosts[:half], hosts[half:]]
    ids = [f"{jid}-{i}" for i in range(len(groups))]
    return Variant(name, groups, [members(j, g) for j, g in zip(ids, groups)],
                   [ring(j, g) for j, g in zip(ids, groups)],
                   ddp=library == "gloo" if ddp is None else ddp and library == "gloo")


def run_together(net, fabric, library: str, groups: list[list[str]], mib: int = 4,
                 iters: int = 3, logdir: str | None = None, **kw) -> dict:
    """Jobs at once: one ``run_allreduce`` per group of hosts (``kw`` as it takes them), each
    in its own thread, started together. Returns each job's result (``jobs``, in the order of
    ``groups``) and the uplink bytes and imbalance of all of them together. A job that fails
    stops the others."""
    if len(groups) == 1:
        res = co.run_allreduce(net, fabric, library, groups[0], mib, iters, logdir, **kw)
        return {"jobs": [res], "uplinks": res["uplinks"], "imbalance": res["imbalance"]}
    cancel = threading.Event()
    results: list = [None] * len(groups)
    errors: list[BaseException] = []  # in the order they happened: the cause comes first

    def one(i):
        try:
            results[i] = co.run_allreduce(net, fabric, library, groups[i], mib, iters,
                                          logdir and os.path.join(logdir, f"job{i}"),
                                          cancel=cancel, **kw)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            errors.append(e)
            cancel.set()
    before = co.uplink_bytes(fabric)
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(groups))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)
    finally:  # Ctrl-C here: every job stops its processes before this returns
        cancel.set()
        for t in threads:
            t.join(timeout=co.TIMEOUT_S)
    if errors:
        raise errors[0]
    for res in results:  # each job's counters saw the other's traffic too: only the sum holds
        del res["uplinks"], res["imbalance"]
    uplinks = {k: v - before[k] for k, v in co.uplink_bytes(fabric).items()}
    return {"jobs": results, "uplinks": uplinks,
            "imbalance": round(co.imbalance(fabric, uplinks), 4)}


def correct_pairs(doc: dict) -> set[tuple[str, str]]:
    """The (source, destination) pairs a correct declaration names: its flows, or its ring's
    consecutive ranks."""
    if "flows" in doc:
        return {(f["src"], f["dst"]) for f in doc["flows"]}
    ring = doc["ranks"]
    return {(a, ring[(i + 1) % len(ring)]) for i, a in enumerate(ring)}


@contextlib.contextmanager
def _posted(session, docs: list[dict]):
    """The jobs ``docs`` posted after a quiet spell (an earlier run's traffic must not teach
    them), deleted on the way out whatever happened."""
    time.sleep(co.QUIET_S)
    done = []
    try:
        for doc in docs:
            co.post_job(session.ctl, doc)
            done.append(doc["id"])
        yield
    finally:
        for jid in done:
            session.ctl.rest("DELETE", f"/v1/jobs/{jid}")


def _launch(session, library: str, v: Variant, mib: int, iters: int, logdir) -> dict:
    res = run_together(session.net, session.fabric, library, v.groups, mib, iters, logdir,
                            a2a_mib=v.a2a_mib, ddp=v.ddp)
    for job in res["jobs"]:
        if not job["sums_ok"]:
            raise RuntimeError(f"{library} {v.name}: wrong sums (max error "
                               f"{job['max_error']}); logs {job['logs']}")
    return res


def reference(session, library: str, v: Variant, mib: int, iters: int,
              logdir: str | None = None) -> dict:
    """One launch of the variant's jobs, correctly declared and planned as declared
    (``"learn": false``: what a launch sends first, as a DDP model broadcast, must not move
    the reference): each job's times and the ring direction measured in its traffic; the
    uplinks' imbalance."""
    with _posted(session, [{**doc, "learn": False} for doc in v.correct]):
        res = _launch(session, library, v, mib, iters, logdir)
    return {"times": [job["times"] for job in res["jobs"]], "imbalance": res["imbalance"],
            "directions": [job["direction"] for job in res["jobs"]]}


def relaunches(session, library: str, v: Variant, mib: int, iters: int,
               logdir: str | None = None, launches: int = 3, pause_s: float = 6.0) -> dict:
    """The variant's jobs posted once, then ``launches`` launches of ``iters`` iterations,
    ``pause_s`` silent seconds apart. Per launch: the fabric's uplink imbalance and, per job,
    its times, its matrix and planned pairs after the launch, the pairs of its correct
    declaration not planned (``unplanned``), the (re-)plans the controller made on measured
    traffic so far, and the ring direction measured in its traffic."""
    out = []
    with _posted(session, v.posted):
        for k in range(launches):
            if k:
                time.sleep(pause_s)
            res = _launch(session, library, v, mib, iters,
                          logdir and os.path.join(logdir, f"launch{k}"))
            jobs = []
            for jid, job, correct in zip(v.ids, res["jobs"], v.correct):
                view = co.job_view(session.ctl, jid)
                planned = {(r["src"], r["dst"]) for r in view.get("routes", [])}
                jobs.append({"times": job["times"], "matrix": view.get("matrix"),
                             "planned_pairs": len(planned),
                             "unplanned": len(correct_pairs(correct) - planned),
                             "replans": (view.get("learning") or {}).get("replans", 0),
                             "direction": job["direction"]})
            out.append({"jobs": jobs, "imbalance": res["imbalance"], "uplinks": res["uplinks"]})
    return {"library": library, "variant": v.name, "declared": v.posted, "launches": out,
            "pause_s": pause_s, "logs": logdir}
