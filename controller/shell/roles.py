"""Redundant controllers at the switches: OpenFlow role requests with the master's generation
id (``controller/service/cluster.py`` elects; this tells the switches and takes over).

A switch refuses a generation smaller than one it saw, so a deposed master cannot change
tables. With shared switch mastership (``controller/service/ownership.py``) each member is
MASTER of its share and SLAVE of the rest, at the membership's generation; a new member set
moves switches (``reshare``). Framework-neutral like ``switches``: role replies and errors
arrive on the event loop (``on_*``, never blocking); ``apply`` runs off it and waits for them.
"""
from __future__ import annotations

import logging
import threading
import time

from controller.service.etcd import EtcdError
from controller.shell import translate
from controller.shell.switches import Switches

LOG = logging.getLogger("mlroute")


class Roles:
    def __init__(self, cluster, service, switches: Switches):
        self.cluster = cluster
        self.service = service
        self.switches = switches
        self._waits: dict = {}  # (dpid, xid) of a role request -> (Event, role asked);
        # guarded by switches.lock, which registers it
        self._apply_lock = threading.Lock()  # one role change at a time (held across waits)

    def apply(self, role: str, generation: int) -> None:
        """Tell every switch this controller's role; once the switches confirmed the master
        role, take over: read every switch, send only the difference."""
        c = self.cluster
        with self._apply_lock:
            if (c.role, c.generation) != (role, generation):
                return  # a newer change follows
            master = role == "master"
            if not master:
                self.service.stand_by()
            owns, gen, members = self._roles(master)
            self._wait([self.send(dp, owns(dp.id), gen) for dp in self.switches.datapaths()])
            if c.shares is not None:  # the share it writes, as the switches now see it
                self.service.reshare(owns, members)
            if not master or (c.role, c.generation) != (role, generation):
                return
            roles_at = time.time()
            try:
                doc = c.store.load()
            except EtcdError as e:  # the followed intent is as recent as etcd had it
                LOG.error("mlroute: taking over without reading etcd: %s", e)
                doc = None
            stats = self.service.take_over(doc)
            c.took_over(generation, {"roles_confirmed": roles_at, "synced": time.time(),
                                     "role_requests": len(self.switches.datapaths()),
                                     **stats})
            LOG.info("mlroute: master (generation %d): %d switches read, %d messages sent",
                     generation, stats["switches"], stats["messages"])

    def reshare(self) -> None:
        """Shared mastership: the member set changed. The new roles at the membership's
        generation first, then the service reads and repairs its new share."""
        with self._apply_lock:
            owns, gen, members = self._roles(self.cluster.role == "master")
            self._wait([self.send(dp, owns(dp.id), gen) for dp in self.switches.datapaths()])
            self.service.reshare(owns, members)

    def _roles(self, master: bool):
        """(dpid -> this controller asks to be its master, generation id, member set's
        revision): every switch as the elected master, or with shared mastership the
        switches of its share of the current member set (``Shares.snapshot``), at the later
        of the election's and the member set's revisions."""
        shares = self.cluster.shares
        if shares is None:
            return (lambda dpid: master), self.cluster.generation, 0
        owns, revision = shares.snapshot()
        return owns, max(self.cluster.generation, revision), revision

    def _wait(self, waits: list) -> None:
        """Wait for the role replies (or refusals) of ``waits`` (``send``'s results)."""
        deadline = time.monotonic() + self.switches.timeout
        for dpid, xid, event in waits:
            if not event.wait(max(0.0, deadline - time.monotonic())):
                LOG.error("mlroute: switch %s did not answer the role request",
                          self.switches.name(dpid))
            with self.switches.lock:
                self._waits.pop((dpid, xid), None)

    def send(self, dp, master: bool, generation: int):
        """One role request; returns (dpid, xid, Event set by the reply or the refusal)."""
        event = self.switches.hub.Event()
        xid = self.switches.send(dp, translate.role_request(dp, master, generation),
                                 self._waits, (event, "master" if master else "slave"))
        return dp.id, xid, event

    def on_connected(self, dp) -> None:
        """A switch connected: its role first (before any table change is sent)."""
        owns, gen, _ = self._roles(self.cluster.role == "master")
        self.send(dp, owns(dp.id), gen)

    def on_reply(self, msg) -> None:
        with self.switches.lock:
            wait = self._waits.get((msg.datapath.id, msg.xid))
        self.cluster.switch_role(msg.datapath.id, translate.role_name(msg.datapath.ofproto,
                                                                      msg.role))
        if wait is not None:
            wait[0].set()

    def on_error(self, msg) -> None:
        with self.switches.lock:
            wait = self._waits.get((msg.datapath.id, msg.xid))
        if wait is None:
            return
        stale = msg.type == msg.datapath.ofproto.OFPET_ROLE_REQUEST_FAILED
        text = ("refused: a newer generation is known to the switch" if stale
                else f"refused: OpenFlow error type {msg.type} code {msg.code}")
        self.cluster.switch_role(msg.datapath.id, f"{wait[1]} {text}")
        wait[0].set()

    def on_disconnected(self, dpid: int | None) -> None:
        if dpid is not None:
            self.cluster.switch_role(dpid, None)
