"""The operator's log: one line per thing an operator follows, formed from what the service
decided (a ``Change`` and its ``Outcome``, an event), not from calls spread over the code.

INFO: switches connected or lost (one line per batch, ``switches``), the fabric declared,
found or checked, a job added, re-planned (with the cause), refused (with the reason) or
removed, learning decisions, link changes; WARNING: where the wiring disagrees with the fabric
(once per change); ERROR: a change that could not be applied. Changes nobody follows (a
switch's links up as it connects, hosts heard one by one) are DEBUG. ``--mlroute-quiet``
keeps WARNING and above.
"""
from __future__ import annotations

import logging
import re
from contextlib import contextmanager

from controller.errors import ConflictError, InputError
from controller.planners.registry import runs_as
from controller.service import wiring as wiring_
from controller.service.change import Change, Outcome

LOG = logging.getLogger("mlroute")
NAMED = 8  # switches or jobs named in one line, then "and N more"


def names(items, named: int = NAMED) -> str:
    """Items named, the first ``named`` of them.

    >>> names(["l0", "l1", "s0"], 2)
    'l0, l1 and 1 more'
    """
    items = list(items)
    more = f" and {len(items) - named} more" if len(items) > named else ""
    return ", ".join(map(str, items[:named])) + more


def _rules(outcome: Outcome | None) -> str:
    r = outcome.rules if outcome is not None else {}
    if not any(r.values()):
        return ""
    return f"; rules +{r.get('added', 0)} -{r.get('removed', 0)} on {r.get('switches', 0)} switches"


def _replanned_jobs(change: Change) -> list[str]:
    groups = {g[0] for g in change.replanned.groups} if change.replanned else set()
    return [j for j, r in change.jobs.items() if j != change.new_job
            and runs_as(r.algorithm)[0] in groups]


def applied_line(change: Change, outcome: Outcome | None) -> tuple[int, str]:
    """(level, line) of an applied change."""
    moved = f"; {change.moved_flows} running flows moved" if change.moved_flows else ""
    if change.new_job is not None:
        r = change.jobs[change.new_job]
        learn = " (its matrix to be learned from its traffic)" if r.matrix == "learning" else ""
        return logging.INFO, (f"job {change.new_job} added: {len(r.routes)} flows{learn}, "
                              f"algorithm {r.algorithm}, mode {r.mode}{_rules(outcome)}{moved}")
    if change.cause.startswith("job ") and change.cause.endswith(" deleted"):
        return logging.INFO, f"job {change.cause[4:-8]} removed{_rules(outcome)}"
    if change.declared is not None:
        f = change.declared
        level = logging.DEBUG if change.cause.startswith("hosts ") else logging.INFO
        shape = f" ({len(f.switches())} switches, {len(f.hosts)} hosts)" \
            if change.cause == "fabric declared" else ""  # discovery's cause says its shape
        return level, f"{change.cause}{shape}{_rules(outcome)}{moved}"
    jobs = _replanned_jobs(change)
    if jobs or change.moved_flows:
        groups = sorted({g[0] for g in change.replanned.groups}) if change.replanned else []
        what = (f"the {'/'.join(groups)} group{'s' if len(groups) > 1 else ''} " if groups
                else "") + (f"(jobs {names(jobs)})" if jobs else "")
        return logging.INFO, f"{change.cause}: re-planned {what}{moved}{_rules(outcome)}"
    event = change.event or {}
    links = [f"{x} down" for x in event.get("links_down", ())] + \
            [f"{x} up" for x in event.get("links_up", ())]
    quiet = change.cause.startswith("switch ") and change.cause.endswith(" connected")
    if links and not quiet:
        return logging.INFO, f"{change.cause}: links {names(links)}; no job re-planned"
    return logging.DEBUG, f"{change.cause}{_rules(outcome)}"


def applied(change: Change, outcome: Outcome | None) -> None:
    """Log a change the transaction applied."""
    level, line = applied_line(change, outcome)
    LOG.log(level, "mlroute: %s", line)


def failed(change: Change, error: Exception) -> None:
    LOG.error("mlroute: %s: %s", change.cause, error)


@contextmanager
def refusals(body: bytes):
    """Around POST /v1/jobs: a job refused (409, 400) is said with the reason its client
    gets (the error goes on to the dispatcher)."""
    try:
        yield
    except (ConflictError, InputError) as e:
        status = 409 if isinstance(e, ConflictError) else 400
        LOG.info("mlroute: job %s refused (%d): %s", _job_id(body), status, e)
        raise


def _job_id(body: bytes) -> str:
    m = re.search(rb'"id"\s*:\s*"([^"]{1,200})"', body or b"")
    return m.group(1).decode(errors="replace") if m else "(no id)"


def event(ev: dict | None) -> None:
    """An event recorded without a change (learning's "plan kept", the wiring)."""
    if ev is None:
        return
    level = logging.WARNING if ev.get("wiring_problems") else logging.INFO
    LOG.log(level, "mlroute: %s", ev["cause"])


def discovered(state, finder, now: float) -> None:
    """Discovery's alarm events recorded on the state; its problems kept there when they
    changed (``wiring.note``), and said once per change."""
    for ev in finder.take_events():
        state.add_event(ev)
    if finder.checked:
        event(wiring_.note(state, finder.declared is not None, finder.problems, now))


def switches(what: str, named: list[str]) -> None:
    """One line for a batch of switches (connected, lost)."""
    if named:
        LOG.info("mlroute: %d switch%s %s: %s", len(named), "es" if len(named) > 1 else "",
                 what, names(sorted(named)))
