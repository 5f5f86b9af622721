"""Which hosts' segments documents a change touched: per host, the state version at which its
document last changed, which is the document's version and what its agent's watch holds.

Why per host: with one version for the whole state, every change woke every agent's watch
(a ring of 512 at k = 32 woke 7,680 non-members, and an all-to-all of 64 hosts served 27-29
MB of documents). A host's document depends on its own flow parts (their paths, members and
shares, and the backups the fabric's alive links give them), its host-mode ports and its
addresses, and a spraying flow's path set (``pathsets.selection``: its standbys follow the
alive links); a fingerprint of those, compared after each change, names the hosts to wake.
Probe duties depend on the fabric's shape, and on what is down only through
``duties.extras``, which the fingerprints hold.

Cost: O(flow parts of srv6 and host-mode jobs) per change of the state (the index the
documents are built from, ``segments.by_host``, is built once per change anyway), with the
backup of each distinct path computed once per fabric.

>>> v = HostVersions()
>>> v.changed_at, v.base
({}, 0)
"""
from __future__ import annotations

from controller.service import duties, hostreports, pathsets
from controller.service.segments import EPOCH, _members, backup_path, by_host


class HostVersions:
    """Per host: the state version at which its document last changed (``base`` for a host
    never touched since the fabric was declared)."""

    def __init__(self):
        self.key = None  # (state version, fabric, declared fabric) last looked at
        self.declared = None  # identity of the declared fabric the fingerprints are of
        self.base = 0  # the state version when the fingerprints started
        self.prints: dict[str, int] = {}  # host -> fingerprint of its document's inputs
        self.changed_at: dict[str, int] = {}  # host -> state version of its last change
        self.pending: set[str] = set()  # hosts changed and not yet ``drain``ed (the waking)

    def version(self, state, host: str, ports: dict | None = None) -> str:
        """The version of ``host``'s document now (``update`` first: call under the lock)."""
        self.update(state, ports)
        return f"{EPOCH}:{self.changed_at.get(host, self.base)}"

    def peek(self, host: str) -> str:
        """``host``'s version as last updated (no update: for a reader without the lock,
        which ``drain``'s waking covers: ``changed_at`` is set before a host is drained)."""
        return f"{EPOCH}:{self.changed_at.get(host, self.base)}"

    def drain(self) -> set[str]:
        """The hosts changed since the last drain (whoever updated), forgotten here."""
        out, self.pending = self.pending, set()
        return out

    def update(self, state, ports: dict | None = None) -> set[str]:
        """The hosts whose document changed since the last call (none when the state did
        not change; a port report changes its version too); a new declared fabric changes
        every host's. ``ports``: host mode's reported ports (``segments_view``'s)."""
        key = (state.version, id(state.fabric), id(state.declared))
        if key == self.key:
            return set()
        self.key = key
        if state.fabric is None:
            self.prints, self.changed_at, self.base = {}, {}, state.version
            return set()
        if id(state.declared) != self.declared:  # every document: addresses, SIDs
            self.declared = id(state.declared)
            self.prints, self.changed_at, self.base = fingerprints(state, ports), {}, \
                state.version
            self.pending |= set(state.fabric.host_leaves)
            return set(state.fabric.host_leaves)
        prints = fingerprints(state, ports)
        changed = {h for h in prints.keys() | self.prints.keys()
                   if prints.get(h) != self.prints.get(h)}
        for h in changed:
            self.changed_at[h] = state.version
        self.prints = prints
        self.pending |= changed
        return changed


def fingerprints(state, ports: dict | None = None) -> dict[str, int]:
    """Host -> a hash of what its document holds (parts, backups, host-mode ports), for the
    hosts that have any; a host without is absent (its document is its addresses only)."""
    fabric = state.fabric
    backups: dict = {}  # path -> its backup and members (one computation per distinct path)

    def backup_of(path: tuple):
        if path not in backups:
            other = backup_path(fabric, list(path)) if len(path) > 1 else None
            backups[path] = (tuple(other), tuple(_members(fabric, other))) if other else None
        return backups[path]

    entries: dict[str, list] = {}
    for host, items in by_host(state).items():
        out = entries.setdefault(host, [])
        for r, flow, parts in items:
            for where, share in parts:
                path = tuple(where)  # the host's list: the path, or reversed (the part back)
                mine = path if flow.src == host else path[::-1]
                out.append((r.job.id, flow.five_tuple(), path,
                            tuple(getattr(where, "members", None) or ()), share,
                            backup_of(mine)))
            if flow.src == host and pathsets.sprays(r):  # its standbys follow alive links
                out.append(tuple(pathsets.selection(fabric, flow, parts)))
    for host, more in duties.extras(fabric).items():  # probe duties a failure added
        entries.setdefault(host, []).append(tuple((tuple(p), d) for p, d in more))
    if ports is not None:  # host mode where hosts learn their ports: the parts and ports
        for host in hostreports.learning_hosts(state):
            entries.setdefault(host, []).append(repr(hostreports.entries(state, host, ports)))
    return {host: hash(tuple(items)) for host, items in entries.items()}


def of(service) -> HostVersions:
    """The service's ``HostVersions`` (made at first use)."""
    held = service.__dict__.get("watch_versions")
    if held is None:
        held = service.__dict__["watch_versions"] = HostVersions()
    return held


def host_ports(service) -> dict | None:
    """Host mode's reported ports where hosts learn them (the documents' ``ports``), else
    None."""
    hp = service.hostports
    return hp.ports.ports if hp.from_hosts else None
