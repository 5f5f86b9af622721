"""Redundant controllers sharing their intent through etcd: membership, election of the one
OpenFlow master, the intent store, and REST writes routed to the master.

Keys under a prefix (``/mlroute/`` by default; several fabrics can share one etcd):

* ``state``: the intent document of ``controller/service/state.py`` (``to_doc``: fabric, jobs and their
  routes by flow), zlib-compressed JSON. One key, so every change, even a re-plan that moves the
  routes of many jobs, is one atomic write, and a standby never sees half of one;
* ``master``: ``{"id", "rest"}`` of the master, created by a transaction only while absent and
  attached to the master's lease. Its ``create_revision`` is the master's **generation id**:
  etcd revisions only grow, so every takeover gets a larger one, which the switches check
  (OpenFlow role requests): a deposed master's messages are refused by the switches;
* ``members/<id>``: ``{"id", "rest", "started"}`` of each running controller, on its lease.

Only the master writes ``state`` and only while it holds ``master`` at its generation (a fenced
transaction); every controller watches the prefix and a standby adopts each new document as is,
routes included: it never re-plans (``auto`` and ``ilp`` stop at time limits, so two planners
may differ on a busy machine; the stored routes cannot).

Failover. A master that crashes stops renewing its lease, which etcd ends after the TTL (2 s at
the least with etcd's default timing, plus up to 0.5 s until etcd notices). To take over within
a second a standby also holds an idle TCP connection to the master's REST port: when the master
process dies the kernel closes it, and if the port then refuses connections (nothing listens:
the process is gone) the standby revokes the master's lease at once. A master that is alive but
unreachable (a network partition) is left to the lease; whichever controller wins, the switches
only accept the highest generation.

REST writes go to any controller: a standby forwards them to the master (which plans, installs,
confirms by barriers and stores), so the API keeps its contract (201 once the switches confirmed,
409 on a conflict) whichever controller is asked. When etcd is unreachable writes get 503 and
the switches keep their tables; a change the master made meanwhile (a link failure) is stored
when etcd returns.
"""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from typing import Callable

from controller.errors import ServiceUnavailable
from controller.service.etcd import (Etcd, EtcdError, EtcdUnavailable, KeyValue, compare_create,
                                     op_put, op_range, prefix_end)

LOG = logging.getLogger("mlroute")
DEFAULT_PREFIX = "/mlroute/"
MAX_DOC = 1_400_000  # bytes; etcd refuses requests over 1.5 MiB unless --max-request-bytes
FORWARD_TIMEOUT = 120.0  # seconds a forwarded write may take (a large job, a slow switch)
FORWARDED = "X-Mlroute-Forwarded"


class ClusterError(RuntimeError):
    """The controller cannot join the cluster (etcd unreachable, its id taken); the message
    names the etcd URL."""


# ---- the intent document in etcd -----------------------------------------------------------
def encode(doc: dict) -> bytes:
    """The state document as stored: compact JSON, zlib-compressed (routes repeat host names
    and spine ids, so documents shrink about tenfold).

    >>> decode(encode({"version": 2, "jobs": []}))
    {'version': 2, 'jobs': []}
    """
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 6)


def decode(data: bytes) -> dict | None:
    """A stored document; plain JSON is read too (a document put by hand with etcdctl)."""
    if not data:
        return None
    if data[:1] == b"{":
        return json.loads(data)
    return json.loads(zlib.decompress(data))


class EtcdStore:
    """The intent in etcd with the ``save``/``load`` of ``controller/service/store.py`` (so the service
    uses either), plus ``watch``. Inside a cluster a save is fenced by the master key at this
    controller's generation. ``save`` never raises: the service calls it after the switches
    took a change, so a document that could not be stored is kept (``unsaved``) and stored
    when etcd returns (``flush``); ``Cluster.write`` tells the REST client."""

    def __init__(self, client: Etcd, prefix: str = DEFAULT_PREFIX, cluster: "Cluster" = None):
        self.client = client
        self.key = (prefix + "state").encode()
        self.cluster = cluster
        self.unsaved: bytes | None = None  # encoded document not stored yet
        self.too_large = 0  # size of the last document etcd could not take
        self.fence_failures = 0  # saves refused because this controller is no longer master
        self.revision = 0  # of the last save or load
        self.lock = threading.Lock()

    def load(self) -> dict | None:
        kv = self.client.get(self.key)
        if kv is None:
            return None
        self.revision = kv.mod_revision
        return decode(kv.value)

    def save(self, doc: dict) -> None:
        data = encode(doc)
        if len(data) > MAX_DOC:
            self.too_large = len(data)
            LOG.error("mlroute: the state document (%d bytes compressed) is larger than etcd "
                      "takes (1.5 MiB unless etcd runs with --max-request-bytes)", len(data))
            return
        self.too_large = 0
        with self.lock:
            self._flush(data)

    def flush(self) -> bool:
        """Store a document kept while etcd was unreachable; True if nothing is left."""
        with self.lock:
            return self.unsaved is None or self._flush(self.unsaved)

    def _flush(self, data: bytes) -> bool:
        """Store ``data`` (fenced); kept in ``unsaved`` if etcd cannot be reached."""
        self.unsaved = None
        fence = self.cluster.fence() if self.cluster else None
        try:
            if fence is None and self.cluster is None:
                self.revision = self.client.put(self.key, data)
            elif fence is None:
                LOG.error("mlroute: not storing the state: this controller is not the master")
                self.fence_failures += 1
                return True
            else:
                r = self.client.txn([compare_create(fence[0], fence[1])],
                                    [op_put(self.key, data)])
                if not r.succeeded:
                    self.fence_failures += 1
                    LOG.error("mlroute: the state was not stored: this controller lost the "
                              "master role (generation %d)", fence[1])
                    self.cluster.fence_lost()
                    return True
                self.revision = r.revision
        except EtcdUnavailable as e:
            LOG.warning("mlroute: %s; the state is stored when etcd returns", e)
            self.unsaved = data
            return False
        except EtcdError as e:
            LOG.error("mlroute: storing the state failed: %s", e)
            self.unsaved = data
            return False
        return True


# ---- membership and election ---------------------------------------------------------------
def _rest_address(url: str) -> tuple[str, int]:
    p = urllib.parse.urlsplit(url)
    return p.hostname or "127.0.0.1", p.port or 80


def process_gone(url: str, timeout: float = 0.5) -> bool:
    """True if nothing listens at ``url``'s address (the connection is refused): the process
    that advertised it is gone. A timeout or an unreachable host proves nothing (False)."""
    try:
        socket.create_connection(_rest_address(url), timeout=timeout).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


class Cluster:
    """This controller's membership. ``start`` joins (lease, member key), elects (a
    transaction creating the master key while it is absent) and starts three loops: lease
    keep-alive, a watch of the prefix (state, master, members) and the failover probe.

    Callbacks, called from those loops: ``on_role(role, generation)`` whenever this
    controller's role or the master's generation changes ("master" or "standby"), and
    ``on_state(doc, revision)`` for every stored document (a standby adopts it)."""

    def __init__(self, client: Etcd, member_id: str, rest_url: str,
                 prefix: str = DEFAULT_PREFIX, ttl: int = 2, probe: bool = True,
                 clock: Callable[[], float] = time.time):
        if not member_id or "/" in member_id:
            raise ClusterError(f"controller id {member_id!r}: give a non-empty name without '/'")
        self.client = client
        self.id = member_id
        self.rest_url = rest_url
        self.prefix = prefix
        self.ttl = ttl
        self.probe = probe
        self.clock = clock
        self.store = EtcdStore(client, prefix, self)
        self.master_key = (prefix + "master").encode()
        self.members_key = (prefix + "members/").encode()
        self.on_role: Callable[[str, int], None] = lambda role, gen: None
        self.on_state: Callable[[dict | None, int], None] = lambda doc, rev: None
        self.lease = 0
        self.granted_ttl = 0
        self.role = "standby"
        self.generation = 0  # of the current master (this one or another)
        self.master: dict | None = None  # {"id", "rest", "lease", "generation"}
        self.members: dict[str, dict] = {}
        self.healthy = False  # etcd answered the last keep-alive
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
    def start(self, on_role=None, on_state=None) -> "Cluster":
        """Join and elect; raises ClusterError naming the etcd URL if etcd does not answer or
        another live controller has this id."""
        if on_role:
            self.on_role = on_role
        if on_state:
            self.on_state = on_state
        self.check()
        try:
            self._join()
            revision = self._resync()
        except EtcdError as e:
            raise ClusterError(f"joining the controllers at etcd {self.client.url}: {e}") from None
        self.healthy = True
        for name, target, args in (("keepalive", self._keepalive_loop, ()),
                                   ("watch", self._watch_loop, (revision,)),
                                   ("probe", self._probe_loop, ())):
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

    def _resync(self) -> int:
        """Read the whole prefix (members, master, state) and act on it; returns the revision
        of the read, from which the watch continues."""
        kvs, revision = self.client.prefix(self.prefix.encode())
        members, master, state = {}, None, None
        for kv in kvs:
            if kv.key == self.master_key:
                master = kv
            elif kv.key == self.store.key:
                state = kv
            elif kv.key.startswith(self.members_key):
                info = json.loads(kv.value)
                members[info["id"]] = info
        with self._lock:
            self.members = members
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
            if role != self.role or role == "master":
                self.serving = False
                self.role_since = self.clock()
                self.switch_roles.clear()
            self.role, self.generation = role, generation
        LOG.info("mlroute: controller %s is %s (generation %d)", self.id, role, generation)
        self.on_role(role, generation)

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
        interval = max(0.1, self.granted_ttl / 4)
        while not self._stop.wait(interval):
            try:
                ttl = self.client.keepalive(self.lease, timeout=max(0.5, interval))
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
                self._lease_lost()
            elif self.store.unsaved is not None:
                self.store.flush()

    def _lease_lost(self) -> None:
        """etcd ended this controller's lease (it was unreachable for longer than the TTL):
        step down, join again and take part in the next election."""
        LOG.error("mlroute: controller %s lost its etcd lease; joining again", self.id)
        with self._lock:
            gen = self.generation
            self.lease = 0
        self._set_role("standby", gen)
        try:
            self._join()
            self._master_seen(self.client.get(self.master_key))
        except (EtcdError, ClusterError) as e:
            LOG.error("mlroute: %s", e)

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

    def _state_seen(self, kv: KeyValue) -> None:
        if kv.mod_revision <= self.state_revision:
            return
        self.state_revision = kv.mod_revision
        try:
            doc = decode(kv.value)
        except (ValueError, zlib.error) as e:
            LOG.error("mlroute: unreadable state document in etcd (revision %d): %s",
                      kv.mod_revision, e)
            return
        self.on_state(doc, kv.mod_revision)

    def _probe_loop(self) -> None:
        """The failover probe: an idle connection to the master's REST port; when it closes
        and the port refuses connections, the master process is gone: end its lease now."""
        while not self._stop.is_set():
            self._master_changed.clear()
            with self._lock:
                m = dict(self.master) if self.master else None
                standby = self.role != "master"
            if not self.probe or not standby or m is None or m["id"] == self.id or not m["rest"]:
                self._master_changed.wait(1.0)
                continue
            try:
                sock = socket.create_connection(_rest_address(m["rest"]), timeout=1.0)
            except ConnectionRefusedError:
                self._master_gone(m)
                continue
            except OSError:
                self._stop.wait(0.5)  # cannot tell: the lease decides
                continue
            try:
                sock.settimeout(0.5)
                while not self._stop.is_set() and not self._master_changed.is_set():
                    try:
                        if sock.recv(1) == b"":
                            break  # closed by the other end
                    except socket.timeout:
                        continue
                    except OSError:
                        break
            finally:
                sock.close()
            if not self._master_changed.is_set() and process_gone(m["rest"], timeout=1.0):
                self._master_gone(m)

    def _master_gone(self, m: dict) -> None:
        t = self.clock()
        with self._lock:
            if not self.master or self.master["lease"] != m["lease"]:
                return
            self.takeover = {"master_lost": t, "previous": m["id"], "detected_by": "probe",
                             "lease": m["lease"]}
        LOG.warning("mlroute: master %s at %s is gone; ending its lease", m["id"], m["rest"])
        try:
            self.client.revoke(m["lease"])
            self._campaign()
        except EtcdError as e:
            LOG.error("mlroute: %s", e)
            self._stop.wait(0.2)

    # ---- REST ------------------------------------------------------------------------------
    def write(self, method: str, path: str, body: bytes, headers: dict,
              local: Callable[[], tuple[int, dict]]) -> tuple[int, dict]:
        """Serve a writing request: locally on the master, else forwarded to it. 503 (raised
        as ServiceUnavailable) while etcd is unreachable, no master is elected, or this
        controller is still taking over."""
        try:
            kv = self.client.get(self.master_key)
        except EtcdError as e:
            raise ServiceUnavailable(f"{e}: writes are refused until it returns (the switches "
                                     "keep their tables; nothing is lost)") from None
        if kv is None:
            raise ServiceUnavailable("no master controller is elected (a failover is under "
                                     "way): retry in a second")
        info = json.loads(kv.value)
        if info.get("id") == self.id and kv.lease == self.lease:
            if not self.serving:
                raise ServiceUnavailable(f"controller {self.id} is taking over as master: "
                                         "retry in a second")
            before = self.store.fence_failures
            status, doc = local()
            if status < 400:
                self._check_saved(before)
            return status, doc
        if headers.get(FORWARDED):
            raise ServiceUnavailable(f"controller {self.id} got a request forwarded by "
                                     f"{headers[FORWARDED]} but {info.get('id')} is the master: "
                                     "retry")
        status, doc = self._forward(info, method, path, body, headers)
        if status < 400:
            self.refresh()
        return status, doc

    def _check_saved(self, fence_failures: int) -> None:
        if self.store.fence_failures != fence_failures:
            raise ServiceUnavailable(f"controller {self.id} lost the master role during the "
                                     "request; the change was not stored: retry")
        if self.store.too_large:
            raise ServiceUnavailable(f"the state document ({self.store.too_large} bytes "
                                     "compressed) is larger than etcd takes (run etcd with a "
                                     "larger --max-request-bytes); the change is installed "
                                     "but not stored")
        if self.store.unsaved is not None:
            raise ServiceUnavailable(f"etcd at {self.client.url} is unreachable: the change is "
                                     "installed on the switches but not stored yet; it is "
                                     "stored when etcd returns")

    def _forward(self, master: dict, method: str, path: str, body: bytes,
                 headers: dict) -> tuple[int, dict]:
        url = master["rest"].rstrip("/") + urllib.parse.quote(path, safe="/~")
        out = {"Content-Type": "application/json", FORWARDED: self.id}
        if headers.get("Authorization"):
            out["Authorization"] = headers["Authorization"]
        req = urllib.request.Request(url, data=body or None, method=method, headers=out)
        try:
            with urllib.request.urlopen(req, timeout=FORWARD_TIMEOUT) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, {"error": text.decode(errors="replace")}
        except OSError as e:
            raise ServiceUnavailable(f"the master {master.get('id')} at {master.get('rest')} "
                                     f"did not answer ({getattr(e, 'reason', e)}); a standby "
                                     "takes over within seconds: retry") from None

    def refresh(self) -> None:
        """Read the stored document now (after a forwarded write: read your own writes)."""
        try:
            kv = self.client.get(self.store.key)
        except EtcdError as e:
            LOG.warning("mlroute: %s", e)
            return
        if kv is not None:
            self._state_seen(kv)

    def view(self) -> dict:
        """The document of ``GET /v1/cluster``."""
        with self._lock:
            roles = list(self.switch_roles.values())
            master_id = self.master["id"] if self.master else None
            members = [{"id": mid, "rest": m.get("rest"),
                        "role": "master" if mid == master_id else "standby"}
                       for mid, m in sorted(self.members.items())]
            return {
                "self": {"id": self.id, "role": self.role, "rest": self.rest_url,
                         "serving": self.serving, "since": self.role_since,
                         "switches": {"master": roles.count("master"),
                                      "slave": roles.count("slave"),
                                      "failed": sum(r not in ("master", "slave") for r in roles)}},
                "members": members, "etcd": self.client.url, "master": master_id,
                "generation": self.generation, "healthy": self.healthy,
                "unsaved": self.store.unsaved is not None, "state_revision": self.state_revision,
                "takeover": dict(self.takeover)}


def standalone_view(member_id: str | None = None) -> dict:
    """``GET /v1/cluster`` of a controller without etcd: it is the only member and the master."""
    me = {"id": member_id or "standalone", "role": "master"}
    return {"self": dict(me), "members": [me], "etcd": None}
