"""A job's learning across its ordinary life, with real parts (issue 36): a controller started
cold, jobs posted, launched, paused, relaunched, deleted and posted again, as users do, on a
Mininet fabric of Open vSwitch bridges sampling with sFlow, with real gloo or Open MPI jobs.

An ``Emulation`` is one fabric behind one controller: two tiers (2 spines x 4 leaves x 2
hosts) or the k = 4 fat-tree, declared (``--mlroute-fabric``) or discovered with no
configuration at all (no file, no link speed: the switches report their veths' 10 Gb/s
whatever the links are shaped to). ``sequence`` runs cases one after the other on it: the
first meets a freshly started controller, the others one that learned and deleted jobs.

``CASES``:

- ``members``: one ring, its members' addresses only;
- ``correct``: the ring declared in the library's data direction (learning checks it);
- ``wrong``: the ring declared the other way (learning re-plans it);
- ``repost``: by its members, launched twice (paused between: learned by then), deleted,
  posted again under a new id and launched ``LAUNCHES`` times: the second job is the one
  measured;
- ``two_jobs``: the ranks in two disjoint halves, two jobs at once by their members (gloo:
  DistributedDataParallel training; Open MPI: ring All-Reduces).

A case launches its jobs ``LAUNCHES`` times, ``pause_s`` apart, and records per job: the
seconds of traffic until its view said it acts on what it measured (``acting``: measured
pairs steady, all planned, no reason left not to act), whether that was by the end of its
second launch, its later launches' median iteration over the correct declaration's (the
references run last with ``"learn": false``, so they teach nothing), and the re-plans made
after it was learned. Every job posts hosts by address (a discovered fabric names them
itself). Jobs are deleted whatever happens; the emulation is torn down on the way out, also
on Ctrl-C.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, replace

from emulation.harness import collectives as co
from emulation.harness import fabricnet, relaunch
from emulation.harness.controller_proc import ControllerProcess
from emulation.harness.session import Session
from topologies.clos import clos_fabric, fattree_fabric

CASES = ("members", "correct", "wrong", "repost", "two_jobs")
SHAPES = ("leaf-spine", "fat-tree")
LAUNCHES = 3  # two to learn in, then one measured
LEARNED_BY = 2  # launches
GRACE_S = 6.0  # after a launch: its last windows close and are judged (2 s windows)
SAME_SPEED = 1.10  # a later launch against the correct declaration


class Emulation:
    """One fabric behind one controller (``ctl``, ``net``; ``fabric``: the truth, with the
    hosts' names and addresses as Mininet has them). ``declared``: the controller gets the
    fabric file; else it discovers the fabric, with the hosts warmed by pings until every
    host is known (the fat-tree: as three tiers)."""

    def __init__(self, shape: str, declared: bool, bw: float, outdir: str, progress=None):
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")
        self.shape, self.declared, self.bw, self.dir = shape, declared, bw, outdir
        self.progress = progress or (lambda _msg: None)
        self.fabric = fattree_fabric(4, 2, bw) if shape == "fat-tree" else clos_fabric(2, 4, 2, bw)
        self.ctl = self.net = self._session = None

    @property
    def name(self) -> str:
        return f"{self.shape}, {'declared' if self.declared else 'zero configuration'}"

    def __enter__(self) -> Emulation:
        os.makedirs(self.dir, exist_ok=True)
        if self.declared:
            clos = self.fabric if self.shape == "fat-tree" else None
            self._session = Session(2, 4, 2, self.bw, self.dir, clos=clos,
                                    progress=self.progress).__enter__()
            self.ctl, self.net = self._session.ctl, self._session.net
            return self
        try:
            fabricnet.ensure_ovs()
            fabricnet.cleanup()
            self.ctl = ControllerProcess(None, os.path.join(self.dir, "controller.log")).start()
            clos = self.fabric if self.shape == "fat-tree" else None
            self.net = fabricnet.build(2, 4, 2, self.bw, self.ctl.of_port, clos=clos)
            fabricnet.start(self.net, timeout=60)
            fabricnet.wait_until(self._discovered, 90, interval=1.0,
                                 what=f"the {self.shape} discovered with every host")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _discovered(self) -> bool:
        fabricnet.pingall(self.net)
        view = self.ctl.rest("GET", "/v1/fabric", timeout=15)[1]
        doc = view.get("declared") or {}
        return bool(view.get("ready")) and set(doc.get("hosts", ())) == set(
            self.fabric.hosts) and ("cores" in doc) == (self.shape == "fat-tree")

    def __exit__(self, *exc) -> None:
        if self._session is not None:
            self._session.__exit__(*(exc or (None, None, None)))
            return
        try:
            if self.net is not None:
                fabricnet.stop(self.net)
        finally:
            self.net = None
            if self.ctl is not None:
                self.ctl.stop()


@dataclass(frozen=True)
class Case:
    """What is posted for each job of a case (by address), and its correct declaration."""
    name: str
    variant: relaunch.Variant
    posted: list[dict]


def by_address(fabric, doc: dict) -> dict:
    """A job document with its ranks and members named by their addresses."""
    ip = fabric.host_ip
    out = dict(doc)
    for key in ("ranks", "members"):
        if key in out:
            out[key] = [ip.get(h, h) for h in out[key]]
    return out


def case(emu, library: str, name: str, hosts: list[str], mib: int) -> Case:
    """The jobs of case ``name`` on ranks ``hosts``."""
    if name not in CASES:
        raise ValueError(f"unknown case {name!r}; one of {', '.join(CASES)}")
    v = relaunch.variant(emu, library, "two_jobs" if name == "two_jobs" else "members",
                         hosts, mib)
    correct = v.correct[0]
    posted = {"members": v.posted, "repost": v.posted, "two_jobs": v.posted,
              "correct": v.correct,
              "wrong": [{**correct, "ranks": correct["ranks"][::-1]}]}[name]
    return Case(name, v, [by_address(emu.fabric, doc) for doc in posted])


def acting(view: dict) -> bool:
    """The job acts on what it measured: steady measured pairs, every one planned, and no
    reason left not to act (its view's ``learning.reason``)."""
    learning = view.get("learning") or {}
    measured = {(m["src"], m["dst"]) for m in view.get("measured_flows") or ()}
    planned = {(r["src"], r["dst"]) for r in view.get("routes", ())}
    return bool(measured) and learning.get("steady") is True and \
        learning.get("reason", "") is None and measured <= planned


def _said(view: dict) -> tuple:
    """(matrix, the kind of reason it gives for not acting, the reason): the kind is the
    reason's words before its first colon (its figures change at every window)."""
    reason = (view.get("learning") or {}).get("reason")
    return view.get("matrix"), reason and reason.split(":")[0], reason


class _Watch:
    """Polls the views of jobs ``ids`` in a thread: the first time each was ``acting``,
    with its re-plans then, its last view, and each change of its matrix or of the kind of
    reason it gave for not acting (``story``: seconds since the watch began, job, matrix,
    reason)."""

    def __init__(self, ctl, ids: list[str]):
        self.ctl, self.ids = ctl, list(ids)
        self.since: dict[str, float] = {}
        self.replans: dict[str, int] = {}
        self.views: dict[str, dict] = {}
        self.story: list[tuple] = []
        self._t0 = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for jid in self.ids:
                try:
                    view = co.job_view(self.ctl, jid)
                except OSError:
                    continue
                said = _said(view)
                if said[:2] != _said(self.views.get(jid, {}))[:2]:
                    self.story.append((round(time.time() - self._t0, 2), jid, *said[::2]))
                self.views[jid] = view
                if acting(view) and jid not in self.since:
                    self.since[jid] = time.time()
                    self.replans[jid] = (view.get("learning") or {}).get("replans", 0)
            self._stop.wait(0.25)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _traffic_until(spans: list[tuple[float, float]], t: float | None) -> float | None:
    """Seconds of launches (start, end) before ``t`` (None: never)."""
    if t is None:
        return None
    return round(sum(max(0.0, min(b, t) - a) for a, b in spans), 2)


def _launches(emu, library, c: Case, ids: list[str], mib, iters, pause_s, logdir,
              count: int = LAUNCHES) -> dict:
    """The case's jobs launched ``count`` times, ``pause_s`` apart, watched; fewer than
    ``LAUNCHES`` (a job only learned, not measured) skips the grace after the last."""
    spans, launches, learned_after = [], [], {}
    t_watch = time.time()
    with _Watch(emu.ctl, ids) as watch:
        for k in range(count):
            if k:
                time.sleep(pause_s)
            t0 = time.time()
            res = relaunch._launch(emu, library, c.variant, mib, iters,
                                   logdir and os.path.join(logdir, f"launch{k}"))
            spans.append((t0, time.time()))
            launches.append({"times": [job["times"] for job in res["jobs"]],
                             "imbalance": res["imbalance"]})
            if k + 1 == LEARNED_BY:  # its last windows close and are judged
                end = time.time() + GRACE_S
                while time.time() < end and len(watch.since) < len(ids):
                    time.sleep(0.25)
                learned_after = {j: j in watch.since for j in ids}
        if count > LEARNED_BY:
            time.sleep(GRACE_S)  # re-plans after the last launch count too
    jobs = []
    for j, jid in enumerate(ids):
        view = watch.views.get(jid, {})
        replans = (view.get("learning") or {}).get("replans", 0)
        jobs.append({"id": jid, "learned_by_second_launch": learned_after.get(jid, False),
                     "traffic_s_until_learned": _traffic_until(spans, watch.since.get(jid)),
                     "replans_after_learned": replans - watch.replans[jid]
                     if jid in watch.replans else None,
                     "matrix": view.get("matrix"),
                     "reason": (view.get("learning") or {}).get("reason"),
                     "later_median_s": round(statistics.median(later), 3) if (later := [
                         t for x in launches[LEARNED_BY:] for t in x["times"][j]]) else None})
    return {"jobs": jobs, "launches": launches, "story": watch.story,
            "spans": [(round(a - t_watch, 2), round(b - t_watch, 2)) for a, b in spans]}


def run_case(emu, library: str, c: Case, mib: int, iters: int, pause_s: float,
             logdir: str | None) -> dict:
    """One case: posted, launched (``_launches``), deleted; ``repost`` first runs the same
    jobs under other ids, deletes them and posts again."""
    rounds = []
    posts = [c.posted]
    if c.name == "repost":
        posts = [[{**d, "id": d["id"] + "-first"} for d in c.posted], c.posted]
    for k, docs in enumerate(posts):
        with relaunch._posted(emu, docs):
            rounds.append(_launches(emu, library, c, [d["id"] for d in docs], mib, iters,
                                    pause_s, logdir and os.path.join(logdir, f"post{k}"),
                                    LAUNCHES if k == len(posts) - 1 else LEARNED_BY))
    return {"case": c.name, "library": library, "posted": c.posted, **rounds[-1],
            **({"first_post": rounds[0]} if len(rounds) > 1 else {})}


def sequence(emu, library: str, names: list[str], mib: int = 4, iters: int = 3,
             pause_s: float = 6.0, logdir: str | None = None, progress=None) -> dict:
    """Cases ``names`` one after the other on ``emu`` (the first from a fresh controller),
    then the correct declarations they are measured against (one ring; two halves at once
    when ``two_jobs`` ran), and each job's later launches over its reference."""
    progress = progress or (lambda _msg: None)
    hosts = co.rank_hosts(emu.fabric)
    out, cases = [], [case(emu, library, n, hosts, mib) for n in names]
    for k, c in enumerate(cases):
        res = run_case(emu, library, c, mib, iters, pause_s,
                       logdir and os.path.join(logdir, f"{k}-{c.name}"))
        res["controller"] = "fresh" if k == 0 else "after learning and deleting other jobs"
        out.append(res)
        progress(f"{emu.name}, {library}, {c.name}: " + "; ".join(
            f"{j['id']} learned after {j['traffic_s_until_learned']} s of traffic"
            f" ({'by' if j['learned_by_second_launch'] else 'NOT by'} launch {LEARNED_BY}), "
            f"later launch {j['later_median_s']} s" for j in res["jobs"]))
    refs = {}
    for c in cases:
        key = len(c.variant.groups)
        if key not in refs:
            v = replace(c.variant, correct=[by_address(emu.fabric, d) for d in c.variant.correct])
            r = relaunch.reference(emu, library, v, mib, iters,
                                   logdir and os.path.join(logdir, f"reference-{key}"))
            refs[key] = [statistics.median(t) for t in r["times"]]
    for c, res in zip(cases, out):
        for j, job in enumerate(res["jobs"]):
            job["reference_median_s"] = round(refs[len(c.variant.groups)][j], 3)
            job["over_correct"] = round(job["later_median_s"] / job["reference_median_s"], 3)
    return {"fabric": emu.name, "library": library, "mib": mib, "iterations": iters,
            "launches": LAUNCHES, "pause_s": pause_s, "cases": out}


def failures(result: dict) -> list[str]:
    """What the issue's targets say of a ``sequence`` result: each job learned by the end of
    its second launch, later launches within ``SAME_SPEED`` of the correct declaration, at
    most one re-plan after it was learned."""
    bad = []
    for res in result["cases"]:
        for job in res["jobs"]:
            where = f"{result['fabric']}, {result['library']}, {res['case']}, job {job['id']}"
            if not job["learned_by_second_launch"]:
                bad.append(f"{where}: not learned by the end of launch {LEARNED_BY} "
                           f"(matrix {job['matrix']}, reason {job['reason']!r})")
            if job["over_correct"] > SAME_SPEED:
                bad.append(f"{where}: later launch {job['over_correct']}x the correct "
                           "declaration")
            if (job["replans_after_learned"] or 0) > 1:
                bad.append(f"{where}: {job['replans_after_learned']} re-plans after learned")
    return bad

