"""Where the fabric in use disagrees with what the switches show, as the service tells it:
``/v1/ready``'s reason, the event and log line of each change, and the refusal of a job whose
flows cross a switch or port that disagrees (pure functions of the state).

Discovery computes the problems (``discovery/declared.py`` for a declared fabric, the
recognition's leftovers otherwise: ``FabricFinder.problems``); ``note`` keeps them on the state
(``ControllerState.wiring``) when they change, so that the published ``/v1/ready`` and the
decisions read them without the finder.

Why a job is refused (409) rather than answered with a warning: the controller would install
routes over a port whose cable, or host, is not where the plan puts it, and answer 201 for
traffic that the switches then drop (issue 61: every ping failed behind a 201). A warning in
the body is easy to miss for the scripts that post jobs (a Slurm prolog, the PyTorch hook);
a 409 naming the port is not, and the job can be posted again once the wiring or the declared
file is fixed. Only problems on the job's own switches and ports refuse it.
"""
from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConflictError
from controller.model.intent import UNROUTABLE, JobRecord, members_of

SHOWN = 5  # problems named in a reason, a log line or a refusal (all: GET /v1/fabric)
# kinds that make a declared fabric not ready: a cable or host on another port than declared
# is a mistake to fix (a link down, ``missing_link``, is a failure the planners route around)
NOT_READY = frozenset({"wrong_port"})


@dataclass(frozen=True)
class Wiring:
    declared: bool  # a declared fabric checked; else discovery's leftovers
    problems: tuple  # discovery's problem dicts (kind, switch, port, detail, ...)

    @property
    def lines(self) -> list[str]:
        return [f"{p['kind']}: {p['detail']}" for p in self.problems]

    def key(self) -> tuple:
        return self.declared, tuple((p["kind"], p["switch"], p["port"], p["detail"])
                                    for p in self.problems)


def note(state, declared: bool, problems: list[dict], now: float) -> dict | None:
    """Keep discovery's ``problems`` on ``state`` when they changed since the last call; what
    the log says of the change (``oplog.event``), else None. A declared fabric's first check
    is said even when nothing disagrees ("matches"). Not one of the state's events: readers
    of ``GET /v1/fabric``'s events take them for changes (``links_down``...); the problems
    are its ``discovery.wiring_problems``."""
    new = Wiring(declared, tuple(problems))
    old = state.wiring
    if old is not None and old.declared == declared and (
            old.problems == new.problems or old.key() == new.key()):  # equal dicts: quick
        return None
    state.wiring = new
    if not problems and (old is None or not old.problems) and not (declared and old is None):
        return None
    return {"time": now, "cause": cause(new, old), "wiring_problems": len(problems)}


def cause(new: Wiring, old: Wiring | None) -> str:
    """One line: what disagrees now (the first ``SHOWN`` problems), or that it was fixed.

    >>> p = {"kind": "wrong_port", "switch": "l0", "port": 5, "detail": "host h0_0 ..."}
    >>> cause(Wiring(True, (p,)), None)
    'the declared fabric disagrees with what is seen (1 problem): wrong_port: host h0_0 ...'
    >>> cause(Wiring(True, ()), Wiring(True, (p,)))
    'the declared fabric matches what is seen again'
    """
    what = "the declared fabric" if new.declared else "discovery"
    if not new.problems:
        return f"{what} matches what is seen" + (" again" if old and old.problems else "") \
            if new.declared else "discovery: no wiring problem left"
    n = len(new.problems)
    verb = "disagrees with what is seen" if new.declared else "found wiring problems"
    more = f"; {n - SHOWN} more: GET /v1/fabric" if n > SHOWN else ""
    return f"{what} {verb} ({n} problem{'s' if n > 1 else ''}): " + "; ".join(
        new.lines[:SHOWN]) + more


def ready_fields(wiring: Wiring | None) -> dict:
    """What ``/v1/ready`` adds: the declared fabric's disagreements (their count, the first
    lines, ``NOT_READY`` kinds first) and whether they keep it from being ready."""
    if wiring is None or not wiring.declared or not wiring.problems:
        return {}
    first = sorted(wiring.problems, key=lambda p: p["kind"] not in NOT_READY)  # stable
    return {"wiring_problems": len(wiring.problems),
            "disagrees": [f"{p['kind']}: {p['detail']}" for p in first[:SHOWN]],
            "wiring_blocks": first[0]["kind"] in NOT_READY}


def reason(fields: dict) -> str | None:
    """The part of ``/v1/ready``'s error about the wiring, None without problems."""
    n = fields.get("wiring_problems")
    if not n:
        return None
    return (f"the declared fabric disagrees with what is seen ({n} problem{'s' if n > 1 else ''}"
            f"): {fields['disagrees'][0]}" + (" and more: GET /v1/fabric" if n > 1 else ""))


def used_ports(fabric, r: JobRecord) -> dict[str, set]:
    """Switch -> the ports a job's flows use there: its hosts' ports on their leaves and every
    hop of its planned paths, both ends (a bundle hop: the member it takes, else every alive
    member)."""
    used: dict[str, set] = {}
    for host in r.job.hosts():
        for leaf in fabric.host_leaves.get(host, ()):
            used.setdefault(leaf, set()).add(fabric.ports[leaf].get(host))
    for _flow, parts in r.flows_with_parts():
        if parts in (None, UNROUTABLE):
            continue
        for where, _ in parts:
            members = members_of(where)
            for k, (a, b) in enumerate(zip(where, where[1:])):
                if a not in fabric.dpids or b not in fabric.dpids:
                    continue
                lo, up = sorted((a, b), key=fabric.tier_of.get)
                ms = (members[k],) if members else fabric.alive_members(lo, up) or (0,)
                for x, y in ((a, b), (b, a)):
                    ports = fabric.ports_to(x, y)
                    used.setdefault(x, set()).update(ports[m] for m in ms if m < len(ports))
    return used


def crossed(fabric, wiring: Wiring | None, r: JobRecord,
            connected: frozenset = frozenset()) -> list[dict]:
    """The declared fabric's problems on the switches and ports the job uses (a problem of a
    whole switch, port None: any use of the switch). The problems are those of discovery's
    last check, which waits for the topology to be quiet: a switch they call missing that is
    ``connected`` (datapath ids) now is not held against the job."""
    if fabric is None or wiring is None or not wiring.declared or not wiring.problems:
        return []
    used = used_ports(fabric, r)
    return [p for p in wiring.problems if p["kind"] not in NOT_REFUSED and p["switch"] in used
            and (p["port"] is None or p["port"] in used[p["switch"]])
            and not (p["kind"] == "switch_missing" and p.get("dpid") in connected)]


# A declared link that no probe crossed yet sends nothing astray (a port that is down takes
# the link down, and the planners route around it): said in /v1/ready and the log, not a
# reason to refuse a job (a fabric whose probes are off, or not yet round, would refuse all).
NOT_REFUSED = {"missing_link"}


def check_job(fabric, wiring: Wiring | None, r: JobRecord,
              connected: frozenset = frozenset()) -> None:
    """Refuse (409) a new job whose flows cross a switch or port where the declared fabric
    disagrees with what is seen, naming them."""
    bad = crossed(fabric, wiring, r, connected)
    if bad:
        more = f"; {len(bad) - SHOWN} more: GET /v1/fabric" if len(bad) > SHOWN else ""
        raise ConflictError(
            f"job {r.job.id}: its flows cross switches or ports where the declared fabric "
            f"disagrees with what is seen (fix the cabling or the declared fabric, then post "
            f"again): " + "; ".join(f"{p['kind']}: {p['detail']}" for p in bad[:SHOWN]) + more)
