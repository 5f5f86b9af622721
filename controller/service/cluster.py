"""Redundant controllers sharing their intent through etcd: membership, election of the one
OpenFlow master, and REST writes routed to the master (the intent store is ``store.py``'s
``EtcdStore``; docs/explanation/redundancy.md explains the design).

Keys under a prefix (``/mlroute/`` by default; several fabrics can share one etcd):

* ``state``: the intent document (``state.to_doc``), zlib-compressed JSON: one key, so every
  change is one atomic write and a standby never sees half of one;
* ``master``: ``{"id", "rest"}`` of the master, created by a transaction only while absent, on
  the master's lease. Its ``create_revision`` is the master's **generation id**, which the
  switches check (OpenFlow role requests): a deposed master's messages are refused;
* ``members/<id>``: ``{"id", "rest", "started"}`` of each running controller, on its lease;
* ``applied/<id>``: with shared switch mastership (``share``, ``ownership.py``), the newest
  state revision that controller enforced on its share (``ownership.ack_value``), on its lease;
* ``left``: with shared mastership, written when a member left: its revision names the new
  member set (``Cluster._departed``).

Only the master writes ``state``, fenced on its generation; a standby adopts each document as
is, routes included, and never re-plans. Failover: etcd ends a crashed master's lease after
its TTL; a standby also probes the master's REST port (``probe.py``) and ends the lease of a
master whose process is gone. REST writes go to any controller (``writes.py``). A master says
so in ``GET /v1/cluster`` only while its lease is confirmed (a master frozen past its lease
steps down when it runs again, without ever claiming the role it lost).
"""
from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from collections.abc import Callable

from controller.service.backoff import Backoff
from controller.service.clusterview import cluster_view
from controller.service.etcd import (
    Etcd,
    EtcdError,
    EtcdUnavailable,
    KeyValue,
    compare_create,
    compare_older,
    op_put,
    op_range,
    prefix_end,
)
from controller.service.ownership import Shares, ack_value, parse_ack
from controller.service.probe import process_gone, watch_master
from controller.service.store import EtcdStore, decode
from controller.service.writes import Writes

LOG = logging.getLogger("mlroute")
DEFAULT_PREFIX = "/mlroute/"
CHECK_INTERVAL = 0.25  # seconds between two checks of an unconfirmed master role in etcd


class ClusterError(RuntimeError):
    """The controller cannot join the cluster (etcd unreachable, its id taken); the message
    names the etcd URL."""


# ---- membership and election ---------------------------------------------------------------
class Cluster:
    """This controller's membership. ``start`` joins (lease, member key), elects (a
    transaction creating the master key while it is absent) and starts three loops: lease
    keep-alive, a watch of the prefix (state, master, members) and the failover probe.

    Callbacks, called from those loops: ``on_role(role, generation)`` whenever this
    controller's role or the master's generation changes ("master" or "standby"), and
    ``on_state(doc, revision)`` for every stored document (a standby adopts it)."""

    def __init__(self, client: Etcd, member_id: str, rest_url: str,
                 prefix: str = DEFAULT_PREFIX, ttl: int = 2, probe: bool = True,
                 clock: Callable[[], float] = time.time, share: bool = False):
        if not member_id or "/" in member_id:
            raise ClusterError(f"controller id {member_id!r}: give a non-empty name without '/'")
        self.client = client
        self.id = member_id
        self.rest_url = rest_url
        self.prefix = prefix
        self.ttl = ttl
        self.probe = probe
        self.clock = clock
        self.writes = Writes(self)
        self.store = EtcdStore(client, prefix, fence=self.fence, on_stored=self.writes.stored,
                               on_fenced=self.fence_lost)
        self.master_key = (prefix + "master").encode()
        self.members_key = (prefix + "members/").encode()
        self.applied_key = (prefix + "applied/").encode()
        self.left_key = (prefix + "left").encode()
        # shared switch mastership: each member masters its share (None: the master all)
        self.shares = Shares(member_id) if share else None
        self.on_members: Callable[[int], None] = lambda revision: None
        self.on_role: Callable[[str, int], None] = lambda role, gen: None
        self.on_state: Callable[[dict | None, int], None] = lambda doc, rev: None
        self.lease = 0
        self.granted_ttl = 0
        self.role = "standby"
        self.generation = 0  # of the current master (this one or another)
        self.master: dict | None = None  # {"id", "rest", "lease", "generation"}
        self.members: dict[str, dict] = {}
        self.healthy = False  # etcd answered the last keep-alive
        self.confirmed_until = 0.0  # monotonic time until which the lease surely lives
        self._checked_at = -CHECK_INTERVAL  # last synchronous check of the master role
        self._reload = 0.0  # when this controller stepped down (to follow the intent again)
        self._rejoining = False  # a join after a lost lease failed: the keep-alive loop retries
        self._rejoin_backoff = Backoff(first=0.25, cap=4.0)
        self.serving = False  # master and done taking over (the service installs)
        self.role_since = clock()
        self.switch_roles: dict[int, str] = {}  # dpid -> role the switch confirmed, or error
        self.takeover: dict = {}  # timings of the last takeover (wall clock, seconds)
        self.state_revision = 0  # of the last document handed to on_state
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._master_changed = threading.Event()
        self._watch = None
        self._threads: list[threading.Thread] = []

    # ---- joining ---------------------------------------------------------------------------
    def start(self, on_role=None, on_state=None, on_members=None) -> Cluster:
        """Join and elect; raises ClusterError naming the etcd URL if etcd does not answer or
        another live controller has this id."""
        self.on_role = on_role or self.on_role
        self.on_state = on_state or self.on_state
        self.on_members = on_members or self.on_members
        self.check()
        try:
            self._join()
            revision = self._resync()
        except EtcdError as e:
            raise ClusterError(f"joining the controllers at etcd {self.client.url}: {e}") from None
        self.healthy = True
        for name, target, args in (("keepalive", self._keepalive_loop, ()),
                                   ("watch", self._watch_loop, (revision,)),
                                   ("probe", watch_master, (self,))):
            t = threading.Thread(target=target, args=args, name=f"mlroute-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def check(self) -> None:
        """Raise ClusterError naming the URL unless etcd answers."""
        try:
            self.client.status()
        except EtcdError as e:
            raise ClusterError(f"{e}: start etcd or correct --mlroute-etcd") from None

    def stop(self) -> None:
        """Leave: end the lease (a standby takes over at once) and the loops."""
        self._stop.set()
        self._master_changed.set()
        if self._watch is not None:
            self._watch.close()
        if self.lease:
            try:
                self.client.revoke(self.lease)
            except EtcdError:
                pass
        for t in self._threads:
            t.join(timeout=2)

    def _join(self) -> None:
        """A new lease and this controller's member key. A member key with this id on another
        lease is a previous run of this controller if its REST address refuses connections (its
        lease is revoked); otherwise another controller has the id: wait for it to expire, then
        give up with an error."""
        sent = time.monotonic()
        lease, ttl = self.client.grant(self.ttl)
        key = self.members_key + self.id.encode()
        value = json.dumps({"id": self.id, "rest": self.rest_url, "started": self.clock()}).encode()
        deadline = time.monotonic() + ttl + 2.0
        while True:
            r = self.client.txn([compare_create(key, 0)], [op_put(key, value, lease)],
                                [op_range(key)])
            if r.succeeded:
                break
            old = r.responses[0][0] if r.responses and r.responses[0] else None
            if old is not None and process_gone(json.loads(old.value).get("rest", "")):
                self.client.revoke(old.lease)
                continue
            if time.monotonic() > deadline:
                self.client.revoke(lease)
                where = json.loads(old.value).get("rest") if old else "?"
                raise ClusterError(f"a controller with id {self.id!r} is registered in etcd at "
                                   f"{self.client.url} and answers at {where}: give every "
                                   "controller its own --mlroute-id")
            time.sleep(0.2)
        with self._lock:
            self.lease, self.granted_ttl = lease, ttl
            self.confirmed_until = sent + ttl

    def _resync(self) -> int:
        """Read the whole prefix (members, master, state) and act on it; returns the revision
        of the read, from which the watch continues."""
        kvs, revision = self.client.prefix(self.prefix.encode())
        members, master, state, acks, changed = {}, None, None, [], 0
        for kv in kvs:
            if kv.key == self.master_key:
                master = kv
            elif kv.key == self.store.key:
                state = kv
            elif kv.key.startswith(self.members_key):
                info = json.loads(kv.value)
                members[info["id"]] = info
                changed = max(changed, kv.mod_revision)
            elif kv.key == self.left_key:
                changed = max(changed, kv.mod_revision)
            elif kv.key.startswith(self.applied_key):
                acks.append(kv)
        with self._lock:
            self.members = members
        self._members_seen(changed or revision)  # the last join or departure (``_departed``)
        for kv in acks:  # after the members: a new member set drops departed members' acks
            self._ack_seen(kv)
        if state is not None and state.mod_revision != self.state_revision:
            self._state_seen(state)
        self._master_seen(master)
        return revision

    # ---- election --------------------------------------------------------------------------
    def _campaign(self) -> None:
        """Create the master key if it is absent; either way act on who holds it."""
        for _ in range(5):
            if not self.lease or self._stop.is_set():
                return
            value = json.dumps({"id": self.id, "rest": self.rest_url}).encode()
            r = self.client.txn([compare_create(self.master_key, 0)],
                                [op_put(self.master_key, value, self.lease)],
                                [op_range(self.master_key)])
            if r.succeeded:
                kv = KeyValue(self.master_key, value, r.revision, r.revision, 1, self.lease)
                with self._lock:
                    self.takeover["elected"] = self.clock()
            else:
                kvs = r.responses[0] if r.responses else []
                if not kvs:
                    continue  # deleted in between: try again
                kv = kvs[0]
            self._master_seen(kv, campaign=False)
            return

    def _master_seen(self, kv: KeyValue | None, campaign: bool = True) -> None:
        if kv is None:
            with self._lock:
                prev = self.master
                if prev and prev["id"] != self.id and self.takeover.get("lease") != prev["lease"]:
                    self.takeover = {"master_lost": self.clock(), "previous": prev["id"],
                                     "detected_by": "etcd", "lease": prev["lease"]}
                self.master = None
                self._master_changed.set()
            if campaign:
                self._campaign()
            return
        info = json.loads(kv.value)
        mine = info.get("id") == self.id and kv.lease == self.lease and self.lease != 0
        with self._lock:
            self.master = {"id": info.get("id"), "rest": info.get("rest"), "lease": kv.lease,
                           "generation": kv.create_revision}
            self._master_changed.set()
        self._set_role("master" if mine else "standby", kv.create_revision)

    def _set_role(self, role: str, generation: int) -> None:
        with self._lock:
            if (role, generation) == (self.role, self.generation):
                return
            # a master's term ends with its generation (a new term reloads the stored intent)
            stepped_down = self.role == "master" and (role, generation) != (self.role,
                                                                           self.generation)
            if role != self.role or role == "master":
                self.serving = False
                self.role_since = self.clock()
                self.switch_roles.clear()
            self.role, self.generation = role, generation
        LOG.info("mlroute: controller %s is %s (generation %d)", self.id, role, generation)
        if self.shares is not None:
            self.shares.wake()  # a planner's wait for acknowledgements ends if it stepped down
        if stepped_down:
            self._step_down()
        self.on_role(role, generation)

    def _step_down(self) -> None:
        """No longer master at this generation: a change etcd never took is dropped (the new
        master's intent holds; its takeover undoes the change at the switches), and the writes
        answered 202 say so."""
        if self.store.discard():
            LOG.error("mlroute: controller %s stepped down before etcd stored its last change; "
                      "the change is dropped", self.id)
        # its memory may hold a change etcd never took: follow the stored intent again, once
        # the shell stood by (the keep-alive loop does, a loop later)
        self._reload = time.monotonic()
        self.writes.dropped("this controller lost the master role before etcd stored the "
                            "change; the new master's intent holds (its takeover undoes the "
                            "change at the switches)")

    def fence(self) -> tuple[bytes, int] | None:
        """(master key, generation) while this controller is the master, else None."""
        with self._lock:
            return (self.master_key, self.generation) if self.role == "master" else None

    def fence_lost(self) -> None:
        """A fenced write failed: read who is master now (this controller steps down)."""
        try:
            self._master_seen(self.client.get(self.master_key))
        except EtcdError as e:
            LOG.error("mlroute: %s", e)

    def took_over(self, generation: int, info: dict) -> None:
        """The shell confirmed the master role at the switches and synchronised them."""
        with self._lock:
            if self.role == "master" and self.generation == generation:
                self.serving = True
                self.takeover.update(info)

    def switch_role(self, dpid: int, role: str | None) -> None:
        """What a switch confirmed for this controller ("master", "slave", an error text), or
        None when the switch left."""
        with self._lock:
            if role is None:
                self.switch_roles.pop(dpid, None)
            else:
                self.switch_roles[dpid] = role

    # ---- loops -----------------------------------------------------------------------------
    def _keepalive_loop(self) -> None:
        """Refresh the lease every quarter TTL, the first at once: under Ryu this loop first
        runs when the start yields (1.2-1.5 s after the grant at a k = 16 restart; a quarter
        TTL more let a 2 s lease end in some restarts, and the controller was elected again)."""
        interval, wait = max(0.1, self.granted_ttl / 4), 0.0
        while not self._stop.wait(wait):
            wait = interval
            try:
                lease, ttl = self._keepalive(timeout=max(0.5, interval))
            except EtcdUnavailable as e:
                if self.healthy:
                    LOG.error("mlroute: %s: writes are refused until it returns", e)
                self.healthy = False
                continue
            except EtcdError as e:
                LOG.error("mlroute: lease keep-alive: %s", e)
                continue
            if not self.healthy:
                LOG.info("mlroute: etcd at %s answers again", self.client.url)
            self.healthy = True
            if ttl == 0:
                self._lease_lost(lease)
            elif self.store.unsaved is not None:
                self.store.flush()
            if self._rejoining and self._rejoin_backoff.due(time.monotonic()):
                self._rejoin()
            if self._reload and time.monotonic() - self._reload >= interval and \
                    self.role != "master":
                self._reload = 0.0 if self.refresh(again=True) else self._reload

    def _keepalive(self, timeout: float) -> tuple[int, int]:
        """Refresh this controller's lease: (lease, its TTL; 0: ended). A refreshed lease
        lives at least its TTL from the moment the request left (``confirmed_until``)."""
        with self._lock:
            lease = self.lease
        if not lease:
            return 0, -1  # joining again
        sent = time.monotonic()
        ttl = self.client.keepalive(lease, timeout=timeout)
        with self._lock:
            if self.lease == lease:
                self.confirmed_until = sent + ttl if ttl else 0.0
        return lease, ttl

    def confirmed_master(self) -> bool:
        """True only while this controller is the master at a generation etcd still holds.
        Its lease, refreshed within its TTL, proves it at no cost; past that (the process was
        frozen, etcd is unreachable) etcd is asked (at most every CHECK_INTERVAL): an ended
        lease steps down at once, and an unanswered question is no proof."""
        with self._lock:
            if self.role != "master":
                return False
            if time.monotonic() < self.confirmed_until:
                return True
            if time.monotonic() - self._checked_at < CHECK_INTERVAL:
                return False
            self._checked_at = time.monotonic()
        try:
            lease, ttl = self._keepalive(timeout=0.5)
            if ttl == 0:
                self._lease_lost(lease)
            if ttl <= 0:
                return False
            kv = self.client.get(self.master_key)
        except EtcdError as e:
            LOG.debug("mlroute: the master role cannot be confirmed: %s", e)
            return False
        with self._lock:
            mine = (kv is not None and kv.lease == lease == self.lease and
                    kv.create_revision == self.generation and self.role == "master")
        if not mine:
            self._master_seen(kv)
        return mine

    def _lease_lost(self, lease: int) -> None:
        """etcd ended this controller's lease (it was unreachable, or frozen, for longer than
        the TTL): step down, join again and take part in the next election."""
        with self._lock:
            if lease != self.lease:
                return  # already handled (by the keep-alive loop or a view)
            gen = self.generation
            self.lease = 0
            self.confirmed_until = 0.0
        LOG.error("mlroute: controller %s lost its etcd lease; joining again", self.id)
        self._set_role("standby", gen)
        self._rejoin()

    def _rejoin(self) -> None:
        """Join again (a new lease) and act on the master key. A failure (etcd unreachable,
        or refusing leases while its space is exhausted) is tried again by the keep-alive
        loop after a back-off (0.25 s, doubling up to 4 s), until it succeeds."""
        try:
            if not self.lease:
                self._join()
            self._master_seen(self.client.get(self.master_key))
        except (EtcdError, ClusterError) as e:
            self._rejoining = True
            wait = self._rejoin_backoff.failed(time.monotonic())
            LOG.error("mlroute: joining again: %s; next try in %.2f s", e, wait)
            return
        self._rejoining = False
        self._rejoin_backoff.ok()

    def _watch_loop(self, revision: int) -> None:
        """Follow every change under the prefix; after a broken stream read everything again
        (changes while disconnected, such as the master key's deletion, are acted on)."""
        while not self._stop.is_set():
            try:
                self._watch = self.client.watch(self.prefix.encode(),
                                                prefix_end(self.prefix.encode()), revision + 1)
                for events in self._watch:
                    for ev in events:
                        self._event(ev)
                    revision = max(revision, self._watch.revision)
            except EtcdError as e:
                if self._stop.is_set():
                    return
                LOG.debug("mlroute: watch: %s", e)
            while not self._stop.wait(0.2):
                try:
                    revision = self._resync()
                    break
                except EtcdError as e:
                    LOG.debug("mlroute: resync: %s", e)

    def _event(self, ev) -> None:
        kv = ev.kv
        if kv.key == self.master_key:
            self._master_seen(kv if ev.kind == "put" else None)
        elif kv.key == self.store.key:
            if ev.kind == "put":
                self._state_seen(kv)
        elif kv.key.startswith(self.members_key):
            mid = kv.key[len(self.members_key):].decode()
            with self._lock:
                if ev.kind == "put":
                    self.members[mid] = json.loads(kv.value)
                else:
                    self.members.pop(mid, None)
            if ev.kind == "put":
                self._members_seen(kv.mod_revision)
            else:
                self._departed(kv.mod_revision)
        elif kv.key == self.left_key and ev.kind == "put":
            self._members_seen(kv.mod_revision)
        elif kv.key.startswith(self.applied_key) and ev.kind == "put":
            self._ack_seen(kv)

    # ---- shared switch mastership (ownership.py) ---------------------------------------------
    def _members_seen(self, revision: int) -> None:
        """The member set as of ``revision``: with shared mastership a new set moves switches
        (``on_members``: the shell sends the new roles, the service takes its new share)."""
        with self._lock:
            ids = set(self.members)
        if self.shares is not None and self.shares.set_members(ids, revision):
            LOG.info("mlroute: %d controllers share the switches (revision %d)", len(ids),
                     revision)
            self.on_members(revision)

    def _departed(self, revision: int) -> None:
        """A member left at ``revision``. With shared mastership the member set's revision is
        the generation id of every role request, so every member must name a set by the same
        revision, also one that reads the set later (a read shows joins, not departures):
        the first member to see a departure writes ``left`` (the others' transactions find it
        newer), and its revision names the set (``_event``, ``_resync``)."""
        if self.shares is None:
            return
        try:
            self.client.txn([compare_older(self.left_key, revision)],
                            [op_put(self.left_key, str(revision).encode())])
        except EtcdError as e:  # the departure's own revision, as every member saw it
            LOG.error("mlroute: noting a departure at revision %d: %s", revision, e)
            self._members_seen(revision)

    def _ack_seen(self, kv: KeyValue) -> None:
        ack = parse_ack(kv.value)
        if self.shares is not None and ack is not None:
            self.shares.acknowledged(kv.key[len(self.applied_key):].decode(), *ack)

    def acknowledge(self, revision: int, members_revision: int) -> bool:
        """This member enforced the stored intent of ``revision`` on its share of the member
        set of ``members_revision``; False if etcd did not take it (tried again)."""
        lease = self.lease
        if not lease:
            return False  # joining again: a key without a lease would outlive this member
        try:
            self.client.put(self.applied_key + self.id.encode(),
                            ack_value(revision, members_revision), lease)
            return True
        except EtcdError as e:
            LOG.error("mlroute: acknowledging revision %d: %s", revision, e)
            return False

    def _state_seen(self, kv: KeyValue, again: bool = False) -> None:
        if kv.mod_revision <= self.state_revision and not again:
            return
        self.state_revision = kv.mod_revision
        try:
            doc = decode(kv.value)
        except (ValueError, zlib.error) as e:
            LOG.error("mlroute: unreadable state document in etcd (revision %d): %s",
                      kv.mod_revision, e)
            return
        self.on_state(doc, kv.mod_revision)

    # ---- REST ------------------------------------------------------------------------------
    def write(self, method: str, path: str, body: bytes, headers: dict,
              local: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
        """A writing REST request (``controller/service/writes.py``)."""
        return self.writes.write(method, path, body, headers, local)

    def refresh(self, again: bool = False) -> bool:
        """Read the stored document now (after a forwarded write: read your own writes;
        ``again``: hand it over even if it was, after a change this controller dropped).
        False if etcd could not be read."""
        try:
            kv = self.client.get(self.store.key)
        except EtcdError as e:
            LOG.warning("mlroute: %s", e)
            return False
        if kv is not None:
            self._state_seen(kv, again)
        return True

    def view(self) -> dict:
        """The document of ``GET /v1/cluster`` (``clusterview.py``)."""
        return cluster_view(self)
