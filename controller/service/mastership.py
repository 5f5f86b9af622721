"""A controller among redundant ones (``cluster.py`` elects): a standby follows the master's
stored intent without planning or sending; a controller that becomes the master takes over as a
restarted one would (read every switch, send only the difference); one that loses mastership
stands by. Functions of the state, the reconciler and discovery's finder; the service calls
them under its lock and keeps the passive flag (``RouteService.follow_intent``, ``take_over``,
``stand_by``).
"""
from __future__ import annotations

from collections.abc import Callable

from controller.discovery.finder import FabricFinder
from controller.enforcement.reconcile import Reconciler
from controller.service.state import ControllerState, from_doc


def load_intent(state: ControllerState, reconciler: Reconciler, finder: FabricFinder,
                doc: dict | None) -> None:
    """Take the master's stored intent as it is, routes included: nothing is planned
    (``auto`` and ``ilp`` stop at time limits) and nothing is sent (the master installed it).
    Switches outside its fabric are let go."""
    if doc is None:
        return
    declared, jobs, number = from_doc(doc, None)
    state.load(declared, jobs, number)
    if declared is not None:
        reconciler.forget(lambda d: d in declared.switch_of_dpid)
        finder.recognise(declared)


def take_over(state: ControllerState, reconciler: Reconciler, finder: FabricFinder,
              now: float, replan: Callable[[str], None], drain: Callable[[], None]) -> dict:
    """Become the master (the intent loaded, the service no longer passive): every connected
    switch is queued to be read and repaired, so a switch whose tables match gets no message;
    ``replan(cause)`` then re-plans only the jobs crossing links seen down and ``drain()``
    synchronises the queued switches. Returns what the synchronisation sent."""
    # discovery: as a standby it saw no LLDP (slaves get no packet-ins), so the fabric is
    # checked again only after a quiet period of probes, as after a restart
    finder.restart_quiet_period(now)
    sent0 = state.counters["messages_sent"]
    f = state.declared
    synced = 0
    if f is not None:
        state.fabric = f  # as after a restart: links seen down are found again below
        for dpid, seen in state.switches.items():
            if seen.connected and dpid in f.switch_of_dpid:
                reconciler.connected(dpid)
                synced += 1
        replan("became the master controller")
        drain()  # (the re-plan above also stored the intent, for standbys)
    return {"switches": synced, "messages": state.counters["messages_sent"] - sent0,
            "pending": len(reconciler.pending)}


def stand_by(reconciler: Reconciler) -> None:
    """Stop trusting the shadow tables (another controller is, or may be, the master): a
    later takeover reads every switch again."""
    for dpid in list(reconciler.installed):
        reconciler.connected(dpid)
