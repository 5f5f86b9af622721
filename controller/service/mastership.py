"""A controller among redundant ones (``cluster.py`` elects): a standby follows the master's
stored intent without planning or sending; a controller that becomes the master takes over as a
restarted one would (read every switch, send only the difference); one that loses mastership
stands by. Functions of the state, the reconciler and discovery's finder; the service calls
them under its lock and keeps the passive flag (``RouteService.follow_intent``, ``take_over``,
``stand_by``).

With shared switch mastership (``ownership.py``) every member writes its share of the switches:
the planner installs its own share and waits for the others' acknowledgements (``confirm``);
the others enforce each stored intent on their share (``enforce``) and take a new share when
the member set changes (``reshare``).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from controller.discovery.finder import FabricFinder
from controller.enforcement.reconcile import Reconciler
from controller.errors import InstallError
from controller.service.ownership import ACK_TIMEOUT, Shares
from controller.service.state import ControllerState, from_doc

LOG = logging.getLogger("mlroute")


def load_intent(state: ControllerState, reconciler: Reconciler, finder: FabricFinder,
                hostports, doc: dict | None) -> None:
    """Take the master's stored intent as it is, routes and host-mode ports included
    (``hostports``: the ``HostPortService``): nothing is planned (``auto`` and ``ilp`` stop at
    time limits) and nothing is sent (the master installed it). Switches outside its fabric
    are let go."""
    if doc is None:
        return
    declared, jobs, number, down = from_doc(doc, None)
    state.load(declared, jobs, number, down)
    hostports.restore(doc)
    if declared is not None:
        reconciler.forget(lambda d: d in declared.switch_of_dpid)
        finder.recognise(declared)


def take_over(state: ControllerState, reconciler: Reconciler, finder: FabricFinder,
              now: float, replan: Callable[[str], None], drain: Callable[[], None],
              trusted: bool = False) -> dict:
    """Become the master (the intent loaded, the service no longer passive): every connected
    switch it writes is queued to be read and repaired, so a switch whose tables match gets
    no message; ``replan(cause)`` then re-plans only the jobs crossing links seen down and
    ``drain()`` synchronises the queued switches. ``trusted``: with shared mastership this
    controller wrote its synchronised switches itself (no other could), so only the others
    of its share are read. Returns what the synchronisation sent."""
    # discovery: as a standby it saw no LLDP (slaves get no packet-ins), so the fabric is
    # checked again only after a quiet period of probes, as after a restart
    finder.restart_quiet_period(now)
    sent0 = state.counters["messages_sent"]
    f = state.declared
    synced = 0
    if f is not None:
        state.fabric = f  # as after a restart: links seen down are found again below
        for dpid in fabric_switches(state):
            if reconciler.manages(dpid) and not (trusted and dpid in reconciler.installed):
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


# ---- shared switch mastership ----------------------------------------------------------------
def share_out(owns: Callable[[int], bool], state: ControllerState,
              reconciler: Reconciler) -> None:
    """This controller writes only the switches ``owns`` accepts (a ``Shares.snapshot``); a
    connected switch of another member's share counts as synchronised (its owner installs it
    and acknowledges)."""
    reconciler.manages = owns
    reconciler.elsewhere = lambda dpid: (not owns(dpid) and dpid in state.switches
                                         and state.switches[dpid].connected)


def fabric_switches(state: ControllerState) -> list[int]:
    """The connected switches of the declared fabric."""
    f = state.declared
    return [d for d, s in state.switches.items()
            if s.connected and f is not None and d in f.switch_of_dpid]


def reshare(state: ControllerState, reconciler: Reconciler, owns: Callable[[int], bool]) -> None:
    """The member set changed and the switches confirmed the new roles: this controller now
    writes the switches ``owns`` accepts. Switches now another's are let go; those now this
    member's are queued to be read and repaired (``Reconciler.connected`` queues only what
    this controller writes)."""
    share_out(owns, state, reconciler)
    reconciler.forget(owns)
    for dpid in fabric_switches(state):
        if dpid not in reconciler.installed and dpid not in reconciler.syncing:
            reconciler.connected(dpid)


def enforce(state: ControllerState, reconciler: Reconciler, converge: Callable[[], dict],
            drain: Callable[[], None]) -> bool:
    """A member that does not plan brings its share to the followed intent: its synchronised
    switches converge (make before break), its queued ones are read and repaired. True when
    every switch of its share is synchronised (the member then acknowledges the revision)."""
    if state.fabric is None:
        return True
    try:
        converge()
    except InstallError as e:
        LOG.error("mlroute: enforcing the stored intent on this controller's switches: %s", e)
        return False
    drain()
    left = reconciler.pending | reconciler.syncing  # queued, or being read right now
    if left:
        LOG.warning("mlroute: switches %s of this controller's share are not synchronised yet",
                    ", ".join(f"{d:#x}" for d in sorted(left)))
    return not left


def confirm(shares: Shares, store, state: ControllerState, waiting,
            planner: Callable[[], bool]) -> list[str]:
    """The planner, after storing a change: wait (the state lock let go) until every member
    owning connected switches acknowledged the stored revision. Returns the members that did
    not within ``ACK_TIMEOUT`` (nothing is waited for when etcd did not take the document), or
    before ``planner()`` turned False (this controller stepped down)."""
    if store.unsaved is not None or not store.revision:
        return []
    dpids = fabric_switches(state)
    with waiting():
        left = shares.wait(store.revision, dpids, ACK_TIMEOUT, planner)
    if left:
        LOG.error("mlroute: controllers %s did not confirm revision %d within %g s",
                  ", ".join(left), store.revision, ACK_TIMEOUT)
    return left
