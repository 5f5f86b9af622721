"""Anytime planning: the request path plans an auto group's layer 1 only (``churn.replan``,
on other Clos fabrics ``clos_churn.clos_replan``, with ``layer1_only``: about the greedy's
time); a group it leaves improvable gets the later stages off the request path
(``run(problem, previous, objective, ilp_time_limit)``, default the group instance's
``plan``, ``planners.offpath``: layer 2 and the jobs search from the routes in force, then
on two tiers the ILP in a child process when layer 1 is not proven and it has a budget),
called without the service lock. A routing worth its moved flows (``decide.improved``) is
applied like any change, unless the jobs or the fabric changed meanwhile.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from controller.errors import ConflictError, InputError, InstallError
from controller.service import decide
from controller.service.change import Change, Outcome
from controller.service.settings import Settings
from controller.service.state import ControllerState

LOG = logging.getLogger("mlroute")


def improve(lock, state: ControllerState, settings: Settings, unproven: set,
            active: Callable[[], bool], apply: Callable[[Change], Outcome],
            run=None) -> dict | None:
    """One improvable auto group through the off-path stages (module docstring); what
    happened, or None when no group waits. ``lock`` guards ``state`` and ``unproven`` (the
    auto groups left improvable, one taken per call); ``active()``: not a standby;
    ``apply``: the service's way to apply a change (under ``lock``); ``run``: the stages
    (default the instance's, ``offpath.OffPath.plan``)."""
    with lock:
        if not unproven or state.fabric is None or not active():
            return None
        key = sorted(unproven)[0]
        unproven.discard(key)
        found = decide.improvable_group(state, settings, key)
        if found is None:
            return None
        group, instance = found
        current = instance.current
        version = state.version
    try:
        better = (run or instance.plan)(instance.problem, instance.previous, key[1],
                                        settings.ilp_budget)
    except InputError as e:
        LOG.error("mlroute: off-path planning failed: %s", e)
        return {"group": list(key), "error": str(e)}
    with lock:
        result = {"group": list(key), "max_link_load_before": current["max_link_load"],
                  "links_at_max_before": current["links_at_max"],
                  "optimal": bool(better.info.get("optimal"))}
        if state.version != version:
            result["stale"] = True  # the jobs or the fabric changed meanwhile
            return result
        change = decide.improved(state, group, instance, better, key[1])
        if change is None:
            result["improved"] = False
            return result
        result.update({k: v for k, v in change.answer.items() if k != "optimal"})
        change.event.update(group=list(key), max_link_load_before=current["max_link_load"],
                            links_at_max_before=current["links_at_max"], improved=True,
                            **{k: v for k, v in change.answer.items() if k != "moved_flows"})
        try:
            outcome = apply(change)
        except (ConflictError, InputError, InstallError) as e:
            result["error"] = str(e)
            return result
        result.update(improved=True, rules=outcome.rules)
        return result
