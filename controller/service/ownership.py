"""Switch mastership shared out among redundant controllers (``--mlroute-share-switches``):
which member masters which switch, and which members have enforced which stored intent.

One controller is elected to plan (``cluster.py``'s master key); with shared mastership the
switches' tables are written by several: every member is OpenFlow MASTER of its share of the
switches and SLAVE of the rest, as ONOS shares out mastership in its cluster. A member
enforces the stored intent on its share and acknowledges the intent's revision under
``<prefix>applied/<id>``; the planner answers a write once every member owning switches has
acknowledged it (``Shares.wait``).

The share is rendezvous hashing (highest random weight, Thaler and Ravishankar, 1998): each
(member, switch) pair gets a hash and a switch goes to the member with the highest. Every
member computes the same owners from the same member set with no coordination, the shares are
even in expectation, and a member that leaves moves only its own switches (each to the member
with its next highest hash); one that joins takes about 1/n of every other's. O(members) per
switch, cached per member set.

The role requests' generation id is the etcd revision of the membership the share was
computed from (never less than the planner's election revision): etcd revisions only grow, so
the new owner of a switch after a membership change outranks its previous owner at the switch,
and a member that has not yet seen the change is refused.

>>> s = Shares("c1")
>>> s.set_members({"c1", "c2", "c3"}, 7)
True
>>> owners = {d: s.owner(d) for d in range(1, 301)}
>>> sorted(set(owners.values()))
['c1', 'c2', 'c3']
>>> s.set_members({"c1", "c3"}, 9)  # c2 left: only its switches move
True
>>> all(s.owner(d) == o for d, o in owners.items() if o != "c2")
True
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable

ACK_TIMEOUT = 10.0  # seconds the planner waits for the members to confirm their share


def weight(member: str, dpid: int) -> int:
    """The rendezvous weight of ``member`` for switch ``dpid``: the same in every process
    (not Python's salted ``hash``)."""
    digest = hashlib.blake2b(f"{member}\0{dpid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner_of(dpid: int, members: Iterable[str]) -> str | None:
    """The member mastering ``dpid`` (None without members); ties, which a 64-bit hash makes
    vanishingly rare, go to the smallest name."""
    best = None
    for m in members:
        key = (weight(m, dpid), _neg(m))
        if best is None or key > best[0]:
            best = (key, m)
    return best[1] if best else None


def ack_value(revision: int, members_revision: int) -> bytes:
    """An ``applied/<id>`` value: the state revision enforced, on the share of the member set
    of ``members_revision``.

    >>> parse_ack(ack_value(41, 7)), parse_ack(b"41"), parse_ack(b"junk")
    ((41, 7), (41, 0), None)
    """
    return f"{revision}:{members_revision}".encode()


def parse_ack(value: bytes) -> tuple[int, int] | None:
    """``ack_value`` read back (None: not one; a bare revision: of no member set)."""
    try:
        parts = [int(x) for x in value.decode().split(":")]
    except (UnicodeDecodeError, ValueError):
        return None
    return (parts[0], parts[1] if len(parts) > 1 else 0) if 1 <= len(parts) <= 2 else None


def _neg(name: str) -> tuple:
    return tuple(-b for b in name.encode())


class Shares:
    """This member's view of the shared mastership: the member set and its revision, the owner
    of each switch, and what every member has acknowledged. Thread-safe: the cluster's watch
    loop updates it, the service and the shell read it."""

    def __init__(self, me: str, clock: Callable[[], float] = time.monotonic):
        self.me = me
        self.clock = clock
        self.members: frozenset[str] = frozenset()
        self.revision = 0  # etcd revision of the membership the owners are computed from
        # member -> (newest state revision it enforced, revision of the member set whose
        # share it enforced it on)
        self.applied: dict[str, tuple[int, int]] = {}
        self._owners: dict[int, str | None] = {}
        self._cond = threading.Condition()

    def set_members(self, members: Iterable[str], revision: int) -> bool:
        """A membership seen at ``revision``; True when it changed: another set (owners
        recomputed), or the same set named by a later revision (a member rejoined, or the
        ``left`` key named a departure after it: ``Cluster._departed``)."""
        members = frozenset(members)
        with self._cond:
            if members == self.members and revision <= self.revision:
                return False
            self.members, self.revision = members, revision
            self._owners = {}
            self.applied = {m: r for m, r in self.applied.items() if m in members}
            self._cond.notify_all()
            return True

    def owner(self, dpid: int) -> str | None:
        with self._cond:
            if dpid not in self._owners:
                self._owners[dpid] = owner_of(dpid, self.members)
            return self._owners[dpid]

    def snapshot(self) -> tuple[Callable[[int], bool], int]:
        """``owns`` of the current member set, frozen, and the set's revision: the roles a
        member sends and the switches it writes follow one member set at a time, changed
        together once the switches confirmed the new roles (``Roles.reshare``). Before the
        first member set is known: every switch (a lone controller)."""
        with self._cond:
            members, revision = self.members, self.revision
        mine: dict[int, bool] = {}

        def owns(dpid: int) -> bool:
            if dpid not in mine:
                mine[dpid] = not members or owner_of(dpid, members) == self.me
            return mine[dpid]
        return owns, revision

    def count(self, dpids: Iterable[int]) -> dict[str, int]:
        """Switches per member among ``dpids``."""
        out = dict.fromkeys(sorted(self.members), 0)
        for d in dpids:
            o = self.owner(d)
            if o is not None:
                out[o] = out.get(o, 0) + 1
        return out

    def acknowledged(self, member: str, revision: int, members_revision: int = 0) -> None:
        """``member`` enforced the stored intent up to ``revision`` on its share of the member
        set of ``members_revision`` (its ``applied`` key, ``ack_value``)."""
        with self._cond:
            self.applied[member] = max((revision, members_revision),
                                       self.applied.get(member, (0, 0)))
            self._cond.notify_all()

    def pending(self, revision: int, dpids: Iterable[int]) -> list[str]:
        """Members other than this one that own some of ``dpids`` and have not acknowledged
        ``revision`` on their share of the current member set."""
        owners = {self.owner(d) for d in dpids}
        with self._cond:
            return sorted(m for m in owners if m is not None and m != self.me
                          and not (self.applied.get(m, (0, 0))[0] >= revision
                                   and self.applied[m][1] >= self.revision))

    def wake(self) -> None:
        """Wake a ``wait`` to check its ``until`` (this controller's role changed)."""
        with self._cond:
            self._cond.notify_all()

    def wait(self, revision: int, dpids: Iterable[int], timeout: float,
             until: Callable[[], bool] | None = None) -> list[str]:
        """Wait until every other member owning some of ``dpids`` acknowledged ``revision``
        (a member that leaves meanwhile is not waited for: its switches' new owner reads and
        repairs them), or ``until()`` turns False (no longer the planner). Returns the members
        still pending then, or at ``timeout`` (empty: all did)."""
        dpids = list(dpids)
        deadline = self.clock() + timeout
        with self._cond:
            while True:
                left = self.pending(revision, dpids)
                remaining = deadline - self.clock()
                if not left or remaining <= 0 or (until is not None and not until()):
                    return left
                self._cond.wait(min(remaining, 0.5))
