"""A controller among redundant ones (``cluster.py`` elects): a standby follows the master's
stored intent without planning or sending; a controller that becomes the master takes over as a
restarted one would (read every switch, send only the difference); one that loses mastership
stands by. Functions of the service, run under its lock.
"""
from __future__ import annotations

from controller.service.state import from_doc


def follow_intent(svc, doc: dict | None) -> bool:
    """A standby takes the master's stored intent as it is, routes included: nothing is
    planned (``auto`` and ``ilp`` stop at time limits) and nothing is sent (the master
    installed it). Ignored on the master (False): its own writes come back from etcd."""
    with svc.lock:
        if not svc.passive:
            return False
        _load_intent(svc, doc)
        return True

def _load_intent(svc, doc: dict | None) -> None:
    if doc is None:
        return
    declared, jobs, number = from_doc(doc, None)
    svc.state.load(declared, jobs, number)
    if declared is not None:
        svc.reconciler.forget(lambda d: d in declared.switch_of_dpid)
        svc.finder.recognise(declared)

def take_over(svc, doc: dict | None) -> dict:
    """Become the master (after the switches accepted this controller's master role):
    the stored intent as a restarted controller loads it, then every connected switch is
    read and repaired, so a switch whose tables match gets no message. Links seen down
    re-plan only the jobs crossing them. Returns what the synchronisation sent."""
    with svc.lock:
        _load_intent(svc, doc)
        svc.passive = False
        # discovery: as a standby it saw no LLDP (slaves get no packet-ins), so the
        # fabric is checked again only after a quiet period of probes, as after a restart
        svc.finder.restart_quiet_period(svc.clock())
        st, rec = svc.state, svc.reconciler
        sent0 = st.counters["messages_sent"]
        f = st.declared
        synced = 0
        if f is not None:
            st.fabric = f  # as after a restart: links seen down are found again below
            for dpid, seen in st.switches.items():
                if seen.connected and dpid in f.switch_of_dpid:
                    rec.connected(dpid)
                    synced += 1
            svc._topology_changed("became the master controller", force=True)
            svc._drain()  # (the re-plan above also stored the intent, for standbys)
        return {"switches": synced, "messages": st.counters["messages_sent"] - sent0,
                "pending": len(rec.pending)}

def stand_by(svc) -> None:
    """Stop acting on switches (another controller is, or may be, the master). The shadow
    tables are dropped: a later takeover reads every switch again."""
    svc.passive = True
    with svc.lock:
        for dpid in list(svc.reconciler.installed):
            svc.reconciler.connected(dpid)
