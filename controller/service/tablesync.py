"""Switches that (re)connected are queued (``Reconciler.connected``); here their tables are
read and repaired. Why off the service lock: a read waits for the switch's replies, and
decoding them is CPU work on the event loop, so holding the lock through it kept every REST
request waiting behind whole reconciliations. Nothing else sends to a switch that is not yet
synchronised, so a read made without the lock cannot go stale; the difference is sent under
it.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from controller.enforcement.reconcile import Reconciler
from controller.service.state import ControllerState
from controller.service.transaction import Transaction

LOG = logging.getLogger("mlroute")
TABLE_READERS = 2  # workers reading tables at once (a semaphore of this many)
SYNC_BATCH = 64  # switches a worker claims, reads and repairs at once


def holds(svc, dpid: int) -> bool:
    """Whether a switch that connects is probed (LLDP) only once the queued switches were
    read and repaired (``FabricFinder.switch_up(hold=True)``, ``probes_out``): one of the
    declared fabric that this controller writes. Its probes, their packet-ins and the
    answers they brought competed with the reads (k = 16: 7,000 frames in a restart's two
    seconds, issue 74); its tables hold the entry that traps them once repaired."""
    f = svc.state.declared
    return (svc.sends and f is not None and dpid in f.switch_of_dpid
            and svc.reconciler.manages(dpid))


SHOWN = 8  # switches named in the cause of their links' return


def links_back(svc, noted: dict[int, str], failed: dict) -> None:
    """The fabric once for the switches of the declared fabric noted together (``noted``:
    dpid -> name; ``RouteService.note_switches``, under the lock): the links they bring back
    re-plan once. One change per switch recomputed every switch's links each time, O(n^2):
    k = 16's 320 switches took 0.24 s of a start's CPU under the lock (k = 32: about 4 s).
    If it fails, every switch of ``noted`` is in ``failed`` with the error (they stay noted)."""
    if not noted:
        return
    names = sorted(noted.values())
    cause = (f"switch {names[0]} connected" if len(names) == 1 else
             f"{len(names)} switches connected: " + ", ".join(names[:SHOWN])
             + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""))
    try:
        svc._topology_changed(cause)
    except Exception as e:  # noqa: BLE001 - the caller says, per switch
        failed.update(dict.fromkeys(noted, e))


def probes_out(svc) -> None:
    """The held probes go out once no switch is being read or waits to be, but those
    waiting for a back-off (``sync_queued``'s ``synced``; under the service lock)."""
    rec = svc.reconciler
    if svc.finder.holding and not rec.reading():
        svc.finder.release(svc.clock())
        svc._discovery_out()


def sync_queued(lock: threading.Lock, readers: threading.Semaphore, state: ControllerState,
                rec: Reconciler, tx: Transaction, active: Callable[[], bool],
                name: Callable[[int], str], now: Callable[[], float],
                synced: Callable[[], None] = lambda: None) -> None:
    """Read and repair queued switches until none is left, up to ``SYNC_BATCH`` at a time:
    claimed together, read together without ``lock`` (at most ``readers`` workers reading
    at once), repaired under it together once read (``Reconciler.repair_many``: one
    install for them all, so no switch waits for another's barrier; at a fat-tree's first
    start one switch after another took most of its time), but for those that left or
    reconnected meanwhile. A switch that does not answer holds none of those read with it
    (``read_many``'s ``ready``: they are repaired without it once it straggles; repaired
    as each was read, a batch took 2-4 installs, issue 74); one whose read or repair
    failed is queued again, to be tried after its back-off (``Reconciler.doubt``; ``now``:
    monotonic seconds).
    ``active()``: not a standby (a standby sends nothing); ``tx`` gives the desired tables;
    ``synced()``: called under ``lock`` once no switch is left to claim (``probes_out``)."""
    failed: dict[int, str] = {}  # dpid -> why

    def repair(reads: dict) -> None:
        with lock:
            haves = {}
            for dpid, got in reads.items():
                if isinstance(got, Exception):
                    if rec.unclaim(dpid):  # else it left meanwhile
                        failed[dpid] = f"could not be read: {got}"
                    continue
                seen = state.switches.get(dpid)
                if dpid in rec.syncing and seen is not None and seen.connected:
                    haves[dpid] = got  # else it left, or reconnected (queued again)
            if not haves:
                return
            tables = tx.current_tables()
            try:
                errors = rec.repair_many(haves, tables)
            except Exception as e:  # noqa: BLE001 - logged; tried again
                rec.syncing.difference_update(haves)
                errors = {d: str(e) for d in haves if d not in rec.installed}
            failed.update((d, f"could not be repaired: {error}") for d, error in errors.items())
            tx.refresh_host_ports()
    try:
        while True:
            with lock:
                if state.fabric is None or not active():
                    break
                dpids = rec.claim(SYNC_BATCH, now())
            if not dpids:
                break
            try:
                with readers:
                    rest = rec.installer.read_many(dpids, ready=repair)
            except Exception as e:  # noqa: BLE001 - a bad reply too: queued again
                rest = {d: e for d in dpids}
            repair(rest)
    finally:
        with lock:
            waits = rec.requeue(set(failed), lambda d: state.switches.get(d) is not None
                                and state.switches[d].connected)
            synced()
        for dpid, why in sorted(failed.items()):
            wait = waits.get(dpid)
            LOG.error("mlroute: switch %s %s%s", name(dpid), why,
                      "" if wait is None else f" (tried again in {wait:g} s)")
