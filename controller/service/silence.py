"""Switches whose data plane stopped while their ports stay up (issue 59): discovery's echoes
judge them (``discovery/liveness.py``), and here the judgement becomes state. A silent switch
counts as failed at once, connected or not (``SwitchSeen.silent``, ``state.failed_links``):
the jobs crossing it are re-planned as for a switch lost, and it is no longer written (its
barriers would not come), so the change goes to the others at once. A switch that lost only
its controller keeps answering echoes and its grace time (``--mlroute-dead-after``); one of a
restart round away (``restarts.py``: a daemon restart, its tables gone, its echoes lost too)
is not judged silent while the round is open. One whose
echoes come back is read and repaired as a switch that reconnects, and its links return.
"""
from __future__ import annotations

from collections.abc import Callable

# While switches are being read and repaired, a round at most this often: at k = 16 a round
# is about 160 echoes, each a packet-out and a packet-in through Open vSwitch, which at a
# (re)start compete with the repairs for both CPUs (issue 74: a fifth of the start's growth)
SYNC_ROUND_S = 1.0


def echo_round(svc, packet_out: Callable, changed: Callable[[str], None]) -> bool:
    """One round of ``svc.finder.liveness`` under the service lock (a ``RouteService``; the
    master only): the echoes judged, then sent (``packet_out``)
    from the synchronised switches this controller writes; switches newly silent or proven
    again are noted and ``changed(cause)`` re-plans. True when a switch came back (queued to
    be read: the caller starts the readers). While switches are being read and repaired,
    or wait to be (not after a failed read: those wait for a back-off), rounds come every
    ``SYNC_ROUND_S`` at most (the others are skipped): a switch that stops forwarding then
    is judged within three such rounds."""
    with svc.lock:
        st, rec = svc.state, svc.reconciler
        if svc.passive or st.declared is None or not st.declared.wired:
            return False
        live = svc.finder.liveness
        if rec.reading() and svc.clock() - live.sent_at < SYNC_ROUND_S:
            return False
        senders = {d for d in rec.installed if rec.manages(d)}
        down = {(d, p) for d, s in st.switches.items() if False in s.ports.values()
                for p, up in s.ports.items() if not up}
        spared = st.restarts.away(st.switches)  # lost with others: echoes lost, not silent
        for dpid, port, frame in live.round(st.declared, senders, down, svc.clock(), spared):
            packet_out(dpid, port, frame)
        was = {d for d, s in st.switches.items() if s.silent}
        silent = live.silent & set(st.switches)
        if silent == was:
            return False
        for d in sorted(silent - was):
            st.switches[d].silent = True
            rec.disconnected(d)  # its barriers would not come
        back = sorted(was - silent)
        for d in back:
            st.switches[d].silent = False
            if st.switches[d].connected:
                rec.connected(d)  # read and repaired, as a switch that reconnects
        name = svc.switch_name
        causes = [f"switch {name(d)} silent: its echoes were lost in {live.rounds_lost(d)} "
                  "rounds, its ports up" for d in sorted(silent - was)]
        causes += [f"switch {name(d)} answers echoes again" for d in back]
        changed("; ".join(causes))
        return bool(back)
