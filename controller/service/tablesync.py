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
TABLE_READERS = 2  # switches whose tables are read at once (a semaphore of this many)


def sync_queued(lock: threading.Lock, readers: threading.Semaphore, state: ControllerState,
                rec: Reconciler, tx: Transaction, active: Callable[[], bool],
                name: Callable[[int], str]) -> None:
    """Read and repair queued switches until none is left: each claimed and read without
    ``lock`` (at most ``readers`` at once), repaired under it unless it left or reconnected
    meanwhile. A switch whose read or repair failed is queued again for the next tick.
    ``active()``: not a standby (a standby sends nothing); ``tx`` gives the desired tables."""
    failed: set[int] = set()
    try:
        while True:
            with lock:
                if state.fabric is None or not active():
                    break
                dpid = rec.claim()
            if dpid is None:
                break
            try:
                with readers:
                    have = rec.installer.read_tables(dpid)
            except Exception as e:  # noqa: BLE001 - a bad reply too: queued again
                with lock:
                    rec.unclaim(dpid, failed)
                LOG.error("mlroute: switch %s could not be read: %s", name(dpid), e)
                continue
            with lock:
                seen = state.switches.get(dpid)
                if dpid not in rec.syncing or seen is None or not seen.connected:
                    continue  # it left, or reconnected (queued again), meanwhile
                try:
                    rec.repair(dpid, have, *tx.current_tables().get(dpid, ([], [])))
                except Exception as e:  # noqa: BLE001 - logged; tried again
                    rec.syncing.discard(dpid)
                    failed.add(dpid)
                    LOG.error("mlroute: switch %s could not be repaired: %s", name(dpid), e)
                    continue
                tx.refresh_host_ports()
    finally:
        with lock:
            rec.requeue(failed, lambda d: state.switches.get(d) is not None
                        and state.switches[d].connected)
