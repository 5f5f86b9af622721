"""Anytime planning: an auto group whose optimality is not proven gets auto with its ILP
stage off the request path (``run(problem, ilp_time_limit, objective)``; the shell runs it in
a child process, without the service lock). A better routing is decided (``decide.improved``)
and applied like any change, unless the jobs or the fabric changed meanwhile.
"""
from __future__ import annotations

import logging

from controller.errors import ConflictError, InputError, InstallError
from controller.service import decide

LOG = logging.getLogger("mlroute")


def improve(svc, run=None) -> dict | None:
    """Anytime planning: one auto group whose optimality is not proven gets auto with its
    ILP stage (``run(problem, ilp_time_limit, objective)``, slow: called without the lock,
    in a child process by the shell). A better routing is applied like any change."""
    with svc.lock:
        if not svc.unproven or svc.state.fabric is None or svc.passive:
            return None
        key = sorted(svc.unproven)[0]
        svc.unproven.discard(key)
        found = decide.improvable_group(svc.state, svc.settings, key)
        if found is None:
            return None
        group, problem, current = found
        version = svc.state.version
    if run is None:
        from controller.planners.auto import auto

        def run(p, budget, objective):
            return auto(p, ilp_time_limit=budget, objective=objective)
    try:
        better = run(problem, svc.settings.ilp_budget, key[1])
    except InputError as e:
        LOG.error("mlroute: off-path planning failed: %s", e)
        return {"group": list(key), "error": str(e)}
    with svc.lock:
        result = {"group": list(key), "max_link_load_before": current["max_link_load"],
                  "max_link_load_after": better.info.get("max_link_load",
                                                         current["max_link_load"]),
                  "links_at_max_before": current["links_at_max"],
                  "links_at_max_after": better.info.get("links_at_max",
                                                        current["links_at_max"]),
                  "optimal": bool(better.info.get("optimal"))}
        if svc.state.version != version:
            result["stale"] = True  # the jobs or the fabric changed meanwhile
            return result
        change = decide.improved(svc.state, group, problem, better, current)
        if change is None:
            result["improved"] = False
            return result
        change.event.update(group=list(key), max_link_load_before=current["max_link_load"],
                            links_at_max_before=current["links_at_max"], improved=True)
        try:
            outcome = svc._apply(change)
        except (ConflictError, InputError, InstallError) as e:
            result["error"] = str(e)
            return result
        result.update(improved=True, moved_flows=change.answer["moved_flows"],
                      rules=outcome.rules)
        return result
