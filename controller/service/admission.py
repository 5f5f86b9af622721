"""Whether a new job may run, as pure checks: its id and options, its flows, and every switch's
flow-entry budget. Each check raises a clear ``InputError`` (400) or ``ConflictError`` (409)
naming the problem, before anything is sent to a switch.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from controller.enforcement.clos_rules import check_mode_on
from controller.enforcement.desired import desired_tables
from controller.enforcement.hostmode import host_protocol
from controller.enforcement.modes import HostMode, mode_of
from controller.enforcement.openflow import COOKIE_STATIC
from controller.errors import ConflictError, InputError
from controller.model.clos import Clos
from controller.model.intent import JobRecord, flow_key
from controller.model.jobs import Job
from controller.planners.registry import OBJECTIVES, planner
from controller.service.settings import Settings

MAX_JOBS = 1024
# what can be addressed as one URL path segment without escaping (RFC 3986 unreserved)
JOB_ID = re.compile(r"[A-Za-z0-9._~-]{1,64}")


def check_new_job(job: Job, running: dict, settings: Settings) -> tuple[str, str]:
    """The (algorithm, mode) of a new job, or the reason it cannot run.

    >>> from controller.model.jobs import Job
    >>> check_new_job(Job("a b"), {}, Settings())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    controller.errors.InputError: job id 'a b': use 1-64 letters, digits, '.', '_', '~' or '-' ...
    """
    if not JOB_ID.fullmatch(job.id):
        raise InputError(f"job id {job.id!r}: use 1-64 letters, digits, '.', '_', '~' "
                         "or '-' (it must be usable in a URL path)")
    if job.id in running:
        raise ConflictError(f"job {job.id!r} exists already")
    if len(running) >= MAX_JOBS:
        raise ConflictError(f"{MAX_JOBS} jobs run already: delete one first")
    seen: set = set()
    for f in job.flows():
        if flow_key(f) in seen:
            raise InputError(f"job {job.id}: flow {f.src} -> {f.dst} appears twice with "
                             "the same ports: give the flows distinct ports")
        seen.add(flow_key(f))
    algorithm = job.options.get("algorithm", settings.algorithm)
    mode = job.options.get("mode", settings.mode)
    check_algorithm(job.id, algorithm)
    try:
        mode_of(mode)
    except InputError as e:
        raise InputError(f"job {job.id}: {e}") from None
    objective = job.options.get("objective", settings.objective)
    if objective not in OBJECTIVES:
        raise InputError(f"job {job.id}: unknown objective {objective!r} "
                         f"(choose from {', '.join(OBJECTIVES)})")
    fixed = planner(algorithm).objective  # jobs: the jobs objective, which it fixes
    if "objective" in job.options and fixed is not None and objective != fixed:
        raise InputError(f"job {job.id}: algorithm {algorithm!r} plans with objective "
                         f"{fixed!r}, not {objective!r}")
    if "objective" in job.options and objective != "flows" and algorithm not in ("auto", fixed):
        raise InputError(f"job {job.id}: objective {objective!r} needs algorithm 'auto'")
    if "max_parts" in job.options and algorithm != "split":
        raise InputError(f"job {job.id}: max_parts needs algorithm 'split' (got {algorithm!r}): "
                         "the other planners do not split flows")
    if job.options.get("spray") and not mode_of(mode).segments:
        raise InputError(f"job {job.id}: spray needs mode 'srv6' (got {mode!r}): its path sets "
                         "go to the hosts in their segments documents")
    check_steered_apart(job, mode, running)
    return algorithm, mode


def check_steered_apart(job: Job, mode: str, running: dict) -> None:
    """A host steers its srv6 flows by what the packets carry (destination, protocol and
    ports: ``agent/steering.py``), so two jobs' flows with one five-tuple would be planned
    apart and steered together on one list. Such a job is refused (409) naming the flow and
    the running job; distinct ports tell the flows apart.

    >>> from controller.model.jobs import Flow, Job
    >>> a = JobRecord(Job("a", explicit=[Flow("a", "h0", "h1", 1e6)]), 1, "auto", "srv6", 0.0)
    >>> check_steered_apart(Job("b", explicit=[Flow("b", "h0", "h1", 1e6)]), "srv6",
    ...                     {"a": a})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    controller.errors.ConflictError: job b: flow h0 -> h1 (tcp, ports 0 -> 0) is also job a's: ...
    >>> check_steered_apart(Job("b", explicit=[Flow("b", "h0", "h1", 1e6, dport=4000)]),
    ...                     "srv6", {"a": a})
    """
    if not mode_of(mode).segments:
        return
    taken: dict = {}
    for r in running.values():
        if mode_of(r.mode).segments:
            for f in r.job.flows():
                taken.setdefault(f.five_tuple(), r.job.id)
    for f in job.flows():
        other = taken.get(f.five_tuple())
        if other is not None:
            proto = {6: "tcp", 17: "udp"}.get(f.proto, f.proto)
            raise ConflictError(
                f"job {job.id}: flow {f.src} -> {f.dst} ({proto}, ports {f.sport} -> "
                f"{f.dport}) is also job {other}'s: in srv6 mode a host steers by "
                "destination, protocol and ports, so both would take one path; give the "
                f"flows distinct ports (sport or dport), or delete job {other} first")


def check_on_fabric(fabric: Clos, job_id: str, algorithm: str, mode: str) -> None:
    """What the fabric cannot run: an unknown algorithm (every name runs on every fabric);
    host mode where its ports cannot code the bundles' members, sr mode where its labels do not
    fit (``clos_rules.check_mode_on``)."""
    check_algorithm(job_id, algorithm)
    try:
        check_mode_on(fabric, mode)
    except InputError as e:
        raise InputError(f"job {job_id}: {e}") from None


def check_algorithm(job_id: str, algorithm: str) -> None:
    """The registry's refusal of an unknown ``algorithm`` (``registry.planner``), naming the
    job."""
    try:
        planner(algorithm)
    except InputError as e:
        raise InputError(f"job {job_id}: {e}") from None


def check_routable(fabric: Clos, r: JobRecord) -> None:
    """A new job must be routable as a whole (running ones may degrade)."""
    bad = r.unroutable()
    if bad:
        raise ConflictError(
            f"no alive path between leaves {fabric.leaves_named(bad[0].src)} and "
            f"{fabric.leaves_named(bad[0].dst)} (flow {bad[0].src} -> {bad[0].dst} of job "
            f"{r.job.id})")


def admit(fabric: Clos, running: dict, planned: dict, job_id: str, settings: Settings,
          name: Callable[[int], str] = hex) -> dict:
    """A changed job within every switch's flow-entry budget: over it, a flow or sr job is
    refused naming the switch and the counts, or (``over_budget`` host) planned in host mode,
    which needs no per-flow entry (``planned[job_id].mode`` is changed then). Host-mode flows
    must be steerable by source port. Returns what the answer reports."""
    r = planned[job_id]
    note = {}
    budget = settings.max_flow_rules
    try:  # host mode's ports must code every bundle hop's member
        check_mode_on(fabric, HostMode.name)
        no_host = False
    except InputError:
        no_host = True
    if budget:
        labels = settings.mode == "sr" or None  # sr's label entries (``DesiredTables``)
        over = over_budget(fabric, running, planned, budget, name, labels)
        if over and mode_of(r.mode).per_flow_entries and settings.over_budget == "host" \
                and not no_host:
            note = {"over_budget": over[0], "mode_reason": (
                f"{over[0]['message']}: planned in host mode instead (--mlroute-over-budget "
                "host)")}
            r.mode = HostMode.name
            over = over_budget(fabric, running, planned, budget, name, labels)
        if over:
            raise ConflictError(
                f"job {job_id}: {over[0]['message']} (--mlroute-max-flow-rules)"
                + (f"; {len(over) - 1} more switches over it" if len(over) > 1 else "")
                + ("; post it with \"mode\": \"host\" (no per-flow entries) or make it smaller"
                   if mode_of(r.mode).per_flow_entries and not no_host else ""))
    if mode_of(r.mode).host_ports:
        for f in r.job.flows():
            try:
                host_protocol(f)
            except InputError as e:
                raise InputError(f"job {job_id}: {e}") from None
    return note


def over_budget(fabric: Clos, running: dict, planned: dict, budget: int,
                name: Callable[[int], str], labels: bool | None = None) -> list[dict]:
    """Switches that would hold more flow entries than the budget and more than now,
    fullest first (sr's label entries count: the first sr job brings them; ``labels``:
    ``desired_tables``')."""
    new = desired_tables(fabric, planned.values(), labels=labels)
    now = desired_tables(fabric, running.values(), labels=labels)
    over = []
    for dpid, (rules, _) in new.items():
        n = len(rules)
        if n > budget and n > len(now.get(dpid, ([], []))[0]):
            jobs = sum(1 for x in rules if x.cookie != COOKIE_STATIC)
            sw = name(dpid)
            over.append({"switch": sw, "rules": n, "job_rules": jobs,
                         "static_rules": n - jobs, "budget": budget,
                         "message": f"switch {sw} would hold {n} flow entries ({jobs} of "
                                    f"jobs, {n - jobs} static), over its budget of {budget}"})
    return sorted(over, key=lambda o: (-o["rules"], o["switch"]))
