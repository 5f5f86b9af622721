"""What ``GET /v1/ready`` and the metrics say of the hosts' agents (srv6 mode, no OpenFlow):
how many report, which are silent, which refused the controller's document, which the REST
server refused (a wrong or another host's credential), which are discounted for contradicting
the others, and the links their probes hold down.

Why in readiness: an agent that cannot report leaves the controller with no link state for
its paths, and one that refused its document keeps old rules; neither fails a job, so an
operator sees them here (ready stays as the switches make it).
"""
from __future__ import annotations

import time

from controller.service.segments import by_host

NAMED = 20  # hosts named per list (the counts are whole)


def _named(hosts) -> list[str]:
    return sorted(hosts)[:NAMED]


def hosts_status(state, probes: dict, seen: dict, credential_refusals: dict, now: float,
                 window: float) -> dict | None:
    """The ``hosts`` section of /v1/ready, None when no agent ever spoke. ``probes``:
    ``PathEvidence.status``; ``seen``: host -> its latest report (monotonic);
    ``credential_refusals``: host -> the REST server's last refusal. O(hosts with flows)."""
    reports = probes.get("reports_refused", {})
    if not seen and not credential_refusals and not probes.get("refused") and not reports:
        return None
    expected = set(by_host(state)) if state.fabric is not None else set()
    silent = {h for h in expected if now - seen.get(h, -1e18) > window}
    refused = probes.get("refused", {})
    return {"reporting": probes.get("reporting", 0), "with_flows": len(expected),
            "silent": len(silent), "silent_hosts": _named(silent),
            "document_refused": len(refused),
            "document_refused_hosts": {h: refused[h] for h in _named(refused)},
            "report_refused": len(reports),
            "report_refused_hosts": {h: {"count": reports[h]["count"],
                                         "error": reports[h]["error"]} for h in _named(reports)},
            "credential_refused": len(credential_refusals),
            "credential_refused_hosts": {h: {"status": r["status"], "error": r["error"],
                                             "count": r["count"]}
                                         for h, r in sorted(credential_refusals.items())[:NAMED]},
            "contradicting": probes.get("contradicting", [])[:NAMED],
            "links_down": probes.get("links_down", []),
            "suppressed": probes.get("suppressed", [])}


def of_service(service, probes: dict | None = None) -> dict | None:
    """``hosts_status`` of a ``RouteService`` (the caller holds its lock, as for a view);
    ``probes``: its ``PathEvidence.status`` when the caller has it already."""
    now = time.monotonic()  # the API stamps probe reports with it
    paths = service.paths
    probes = paths.status(now) if probes is None else probes
    return hosts_status(service.state, probes, dict(paths.seen),
                        dict(getattr(service, "credential_refusals", {})), now, paths.window)


def with_hosts(answer: tuple[int, dict], service) -> tuple[int, dict]:
    """/v1/ready's (status, document) with its ``hosts`` section where agents spoke."""
    hosts = of_service(service)
    if hosts is not None:
        answer[1]["hosts"] = hosts
    return answer
