"""Learned matrices: what the members of each job measurably send to each other, and the
decisions that follow (pure; the estimate comes from ``measurement.estimate``).

* A job declared by its members only is ``learning`` (no flow planned, default paths) until its
  members' traffic gives a steady estimate; then the measured cross-leaf pairs become its flows
  (``learned``) and are planned like declared ones.
* Every other job that may learn (``"learn": true``, the default) is checked against its
  traffic. It is re-planned on the measured matrix only when that matrix has pairs the plan
  lacks and the shared prediction (``model.iteration``, what the planners rank by and the job
  view shows) says the re-plan shortens the job's iteration by at least ``learn_min_gain``
  (the unplanned pairs take the switches' hashed default paths: their time is the mean over
  several hashes; other jobs count with what they send, not what they were declared with).
  A plan is never replaced because some of its pairs were quiet: a measured matrix inside
  the planned one changes nothing.

Only pairs across leaves count: a pair within a leaf never reaches a spine. A learned flow
carries the mean bytes of an active window and matches every IPv4 packet between its two hosts
(no ports: frameworks open connections on ephemeral ports). On a fabric of several planes it
is pinned to the plane its samples mostly came on (``Measured.planes``): the framework bound
its connections to that plane's addresses, and entries on another plane would match nothing.
The predictions pin alike, so they never count on a plan that cannot be enforced.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.enforcement.desired import installed_plan
from controller.measurement.estimate import MatrixEstimate, outside_pattern
from controller.measurement.learner import compare
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE, JobRecord, flow_key
from controller.model.jobs import Flow, Job
from controller.planners.clos_routes import clos_route_parts
from controller.service.predictions import plan_times

HASH_SALTS = 4  # default paths are hashed: the current plan's time is a mean over this many
PLANE_MARGIN = 0.2  # share of a pair's bytes by which another plane must lead to move it


@dataclass(frozen=True)
class Measured:
    """The cross-leaf pairs of one job's estimate, by host name: mean bytes per active
    window, and each pair's samples and relative error. Only a ``steady`` one is acted on."""
    pairs: dict  # (src host, dst host) -> mean bytes per active window
    window_s: float
    confidence: dict = field(default_factory=dict)  # pair -> {"samples", "relative_error"}
    active_windows: int = 0
    replans: int = 0  # times the job was (re-)planned on a measured matrix
    steady: bool = True  # the estimate may be acted on (``MatrixEstimate.steady``)
    planes: dict = field(default_factory=dict)  # pair -> {plane: share of its bytes}

    def flows_doc(self, declared: set, plane_names=()) -> list[dict]:
        return [{"src": a, "dst": b, "bytes": round(v), "bytes_per_s": round(v / self.window_s),
                 "declared": (a, b) in declared, **self.confidence.get((a, b), {}),
                 **({"plane": plane_names[self.plane((a, b))]}
                    if (a, b) in self.planes and plane_names else {})}
                for (a, b), v in sorted(self.pairs.items())]

    def plane(self, pair) -> int | None:
        """The plane most of the pair's bytes came on (the lowest on a tie): the one its
        framework uses. A pair over two planes gets the dominant one; the rest of its
        traffic takes the hashed default paths of the other."""
        shares = self.planes.get(pair)
        return min(shares, key=lambda q: (-shares[q], q)) if shares else None

    def pins(self, job: Job) -> list[int]:
        """Per flow of ``job`` the plane its traffic uses, -1 when none was sampled."""
        return [-1 if self.plane((f.src, f.dst)) is None else self.plane((f.src, f.dst))
                for f in job.flows()]


def rate_floor(fabric: Clos, window_s: float, min_link_share: float) -> float:
    """Bytes per active window below which a job's whole measured matrix is not a training
    pattern: ``min_link_share`` of a link (``Settings.learn_min_rate``)."""
    return min_link_share * fabric.link_bps() * window_s


def measured_pairs(fabric: Clos, estimate: MatrixEstimate, window_s: float,
                   min_link_share: float = 0.0) -> Measured:
    """The estimate's pairs (IPv4 addresses) as host pairs across leaves, leaving out pairs
    slower than the estimate's joining share of the job's mean pair or than its
    ``pattern_floor`` (a quarter of its median pair, or of its median byte's pair when the
    pairs under that carry under 5% of its bytes: a rendezvous star that outnumbers the
    ring, issue 59), the pairs of a ``rendezvous`` star (light pairs that all touch one
    host, under a quarter of the bytes: issue 74), and every pair when the members send
    each other less than
    ``min_link_share`` of a link in all (``rate_floor``): pings, daemons' chatter,
    a launch's rendezvous and idle phases are not a training pattern, and a plan must not
    follow them. The planners count flows: a chatter pair planned as a flow can push two
    elephants onto one link (half a link each), where left on the hashed paths it adds less
    than a quarter of a flow to one. A rendezvous learned with the ring's first iteration
    weighed up to 6% of the mean pair (a CI run of tests/test_clos_collectives.py), above the
    joining share. The median, not the mean or the largest pair: the pairs of a
    mixture-of-experts all-to-all, each a tenth of a ring pair, are most of the job's pairs
    and set the median, so they are all planned.

    The link floor is the job's, not each pair's: the speed behind it is what the switches
    report, and an emulated fabric's switches report their veths' 10 Gb/s whatever the
    links are shaped to. Per pair, 0.1% of that was 2.5 MB a 2 s window, about what a ring
    pair sends at half of a 20 Mbit/s link: the pairs that ECMP had collided (those that a
    plan would help) fell below it and a job by members was never learned (issue 36)."""
    host_of = {ip: h for h, ip in fabric.host_ip.items()}
    matrix = estimate.matrix()
    if sum(matrix.values()) < rate_floor(fabric, window_s, min_link_share):
        matrix = {}
    mean = sum(matrix.values()) / len(matrix) if matrix else 0.0
    floor = estimate.share * mean
    outside = outside_pattern(matrix)
    pairs, confidence, planes = {}, {}, {}
    for (a, b), v in matrix.items():
        src, dst = host_of.get(a), host_of.get(b)
        if src and dst and fabric.hosts[src] != fabric.hosts[dst] and v >= floor and \
                (a, b) not in outside:
            pairs[(src, dst)] = v
            confidence[(src, dst)] = estimate.confidence((a, b))
            if estimate.plane_shares((a, b)):
                planes[(src, dst)] = estimate.plane_shares((a, b))
    return Measured(pairs, window_s, confidence, estimate.active, steady=estimate.steady,
                    planes=planes)


def declared_pairs(fabric: Clos, r: JobRecord) -> set:
    """The job's planned (source, destination) host pairs across leaves."""
    return {(f.src, f.dst) for f in r.job.flows() if fabric.hosts[f.src] != fabric.hosts[f.dst]}


def learned_job(r: JobRecord, measured: Measured) -> Job:
    """The job with its measured pairs as flows (ports 0: all traffic between the hosts)."""
    flows = [Flow(r.job.id, a, b, float(v)) for (a, b), v in sorted(measured.pairs.items())]
    options = {k: v for k, v in r.job.options.items() if k != "ring_order"}
    return Job(r.job.id, explicit=flows, start_s=r.job.start_s, compute_s=r.job.compute_s,
               options=options, members=list(r.members))


def off_plane(fabric: Clos, r: JobRecord, measured: Measured) -> set:
    """The learned pairs of the job routed on another plane than their traffic uses (the
    framework reconnected elsewhere): their entries match nothing. Hysteresis: the route's
    plane must carry ``PLANE_MARGIN`` less of the pair's bytes than the dominant one, so a
    pair spread evenly over planes is not moved to and fro by sampling noise. A split route
    is on every plane of its parts: the best of them counts."""
    out = set()
    for f in r.job.flows() if r.matrix == "learned" else ():
        pair, parts = (f.src, f.dst), r.routes.get(flow_key(f))
        shares = measured.planes.get(pair)
        if shares and parts and max(shares.get(fabric.part_plane(where), 0.0)
                                    for where, _share in parts) + \
                PLANE_MARGIN < shares[measured.plane(pair)]:
            out.add(pair)
    return out


def verdict(fabric: Clos, r: JobRecord, measured: Measured):
    """(cause, mismatch) when the job is a candidate for a (re-)plan on ``measured``, else
    None: nothing measured, or every measured pair already planned and the plan declared.
    A learned plan with pairs the steady matrix no longer has (quiet, or negligible as a
    launch's rendezvous learned before the ring ran) is a candidate too: the planners count
    flows, so such a pair can cost an elephant its link. The predicted gain on the measured
    pairs decides; for a plan that was right (a subset of a balanced plan is balanced) it is
    none, so a correct plan is not replaced by a subset of itself. A declaration is not
    judged on a matrix in which fewer than half of its senders send: that is a phase of the
    launch (rank 0 broadcasting its model while the others wait), not the job's pattern.
    A learned plan with pairs whose traffic left their route's plane is a candidate too, its
    mismatch counting them (``off_plane_pairs``): the plan is not enforced, so no gain is
    needed to re-plan it."""
    if not measured.pairs:
        return None
    if r.matrix == "learning":
        return (f"job {r.job.id}: matrix learned from its traffic "
                f"({len(measured.pairs)} flows across leaves)", None)
    planned = declared_pairs(fabric, r)
    if r.matrix == "declared" and 2 * len({a for a, _ in measured.pairs}) < len(
            {a for a, _ in planned}):
        return None
    cmp = compare(planned, measured.pairs)
    off = off_plane(fabric, r, measured)
    description = cmp.description
    if not cmp.undeclared:
        if off:
            description = f"{len(off)} learned flows' traffic runs on another plane than planned"
        elif r.matrix != "learned" or not cmp.missing:
            return None
        else:
            description = (f"{len(cmp.missing)} planned pairs are quiet or negligible now (a "
                           "rendezvous, chatter, a phase)")
    elif cmp.opposite and r.job.is_collective:  # pairs within a leaf hide the ring's shape
        description = "traffic runs opposite to the declared ring"
    mismatch = {"share": round(cmp.share, 4), "description": description,
                "undeclared_pairs": len(cmp.undeclared), "missing_pairs": len(cmp.missing),
                **({"off_plane_pairs": len(off)} if off else {})}
    return f"job {r.job.id}: {description}", mismatch


def _as_planned_now(fabric: Clos, r: JobRecord, measured: Measured, salt: int) -> JobRecord:
    """The job with its measured flows where they run now: a planned pair on its route, an
    unplanned one (or one planned on another plane than its traffic's) on the path the
    switches' hash (salted) gives it in its traffic's plane."""
    old = {}
    for f in r.job.flows():
        old.setdefault((f.src, f.dst), r.routes.get(flow_key(f)))
    job = learned_job(r, measured)
    # hashed in the plane the traffic uses
    hashed = clos_route_parts(fabric, [job], "ecmp", salt, pins=measured.pins(job))[0]
    now = r.copy()
    now.job = job
    now.routes = {}
    off = off_plane(fabric, r, measured)  # planned elsewhere: hashed where it runs
    for f, parts in zip(job.flows(), hashed):
        planned = old.get((f.src, f.dst))
        now.routes[flow_key(f)] = planned if planned not in (None, UNROUTABLE) and (
            f.src, f.dst) not in off else parts
    return now


def _as_running(fabric: Clos, records: dict, others: dict, salt: int) -> dict:
    """The records with each job of ``others`` (job id -> ``Measured``) as it runs now."""
    return {**records, **{jid: _as_planned_now(fabric, records[jid], m, salt)
                          for jid, m in others.items()}}


def sending_unplanned(fabric: Clos, records: dict, measured: dict,
                      but: str | None = None) -> dict:
    """The jobs of ``measured`` (job id -> ``Measured``), ``but`` one, whose steady matrix has
    pairs their plans in ``records`` lack: a job still learning, or one sending what it was
    not declared with."""
    return {j: m for j, m in measured.items() if j != but and j in records and m.steady
            and set(m.pairs) - declared_pairs(fabric, records[j])}


def _seconds(fabric: Clos, recs: dict, job_id: str) -> float:
    running = [r for r in recs.values() if r.job.flows() and not r.unroutable()]
    plan = installed_plan(fabric, running)
    if plan is None:
        raise KeyError(job_id)
    return plan_times(plan)[job_id]


def predicted_now(fabric: Clos, records: dict, job_id: str, measured: Measured,
                  others: dict | None = None) -> float | None:
    """Seconds of the job's iteration on its measured matrix as it runs now: its planned
    pairs on their routes, the others on hashed default paths, every running job on its
    routes in ``records`` except the jobs of ``others`` (job id -> ``Measured``) that send
    pairs their plans lack (``sending_unplanned``), which count as they run. A mean over
    ``HASH_SALTS`` hashes; None when it cannot tell (unroutable, or no flow can progress)."""
    now_others = sending_unplanned(fabric, records, others or {}, job_id)
    try:
        now = [_seconds(fabric, {**_as_running(fabric, records, now_others, s),
                                 job_id: _as_planned_now(fabric, records[job_id], measured, s)},
                        job_id) for s in range(HASH_SALTS)]
    except (ValueError, KeyError):
        return None
    return sum(now) / len(now)


def predicted_after(fabric: Clos, replanned: dict, job_id: str,
                    others: dict | None = None) -> float | None:
    """Seconds of the job's iteration with every job on its routes in ``replanned``, the
    jobs of ``others`` that still send pairs their plans there lack counted as they run (a
    mean over ``HASH_SALTS`` hashes when there are some); None when it cannot tell."""
    after_others = sending_unplanned(fabric, replanned, others or {}, job_id)
    salts = range(HASH_SALTS) if after_others else range(1)
    try:
        after = [_seconds(fabric, _as_running(fabric, replanned, after_others, s), job_id)
                 for s in salts]
    except (ValueError, KeyError):
        return None
    return sum(after) / len(after)


def predicted_gain(fabric: Clos, records: dict, job_id: str, measured: Measured,
                   replanned: dict, others: dict | None = None) -> tuple[float, float] | None:
    """(seconds now, seconds after the re-plan) of the job's iteration on its measured matrix
    (``predicted_now``, ``predicted_after``), by the shared prediction
    (``iteration.predict_times``). What a job sends, not what it was declared or learned
    with, is what another job's flows meet, so other jobs sending unplanned pairs count as
    they run; the caller may re-plan them in ``replanned`` too (``decide.learned``,
    ``also``), since each is judged in turn. None when it cannot tell.

    Cost: 1 + ``HASH_SALTS`` predictions of every running job (2 x ``HASH_SALTS`` when other
    jobs send unplanned pairs after the re-plan); 32 leaves x 16 spines x 16 hosts, eight
    64-rank rings: 32 ms for a ring measured backwards, 0.4-0.5 s for an all-to-all of 3,968
    pairs (the fluid model took 2.4-4.2 s and 66-103 s; measured before other jobs counted as
    they run)."""
    now = predicted_now(fabric, records, job_id, measured, others)
    after = predicted_after(fabric, replanned, job_id, others)
    return None if now is None or after is None else (now, after)
