"""Host-enforced routing (``host`` mode): the switches hold only static state and every planned
flow gets a source port that its source leaf sends to the planned spine.

Why: a leaf's ACL/TCAM holds a few hundred to a few thousand 5-tuple entries, while a training
job can have thousands of connections; RoCE libraries already choose one UDP source port per
queue pair (HCCL reads them from a file). So the controller plans spines as in the other modes,
and instead of one entry per flow it tells the host which source port to use.

The mapping port -> spine comes from the switch, never from a guessed hash. The leaves choose the
uplink of TCP and RoCEv2 packets from the low bits of the source port (``clos_hostmode.
clos_host_static_rules``); the controller learns what each candidate port does by *probing*: it
injects a packet carrying the probe mark (IP DSCP 59) into the leaf with a packet-out whose
in_port is a host port (the packet goes through the leaf's own tables), and every spine sends
packets with that mark to the controller (a static entry). The spine whose packet-in carries
the probe's token is the spine that port takes. A map's key says all the leaf's pipeline does
for it (the uplinks that reach the destination, in order: ``clos_hostmode.dest_class``), so a
learned map never goes stale: a failure changes the keys of the flows it touches, their new
keys are probed, and the flows whose port no longer leads to their planned spine get a new
one, reported so that the host can open the new connection before closing the old (make
before break). Every fabric is served as a ``model.clos.Clos`` (a leaf-spine is one plane of
one pod, its spines the aggregation switches).

Cost: the pipeline maps by source port only, so one map per (leaf, spines that reach the
destination in order, protocol) serves every flow of the leaf (``scope="leaf"``): the leaf is probed
once with as many consecutive ports as its busiest host needs on one spine times the buckets
(at least 4 per bucket), in one round; more ports (twice as many, another round) only if the
switch spreads them less evenly than that. Probes per flow therefore fall as flows grow
(``benchmarks/hostmode.py`` measures probes and time for 1,000 flows). For a switch whose
hash also covers the addresses, ``scope="pair"`` learns a map per (source, destination,
protocol) with the same code: probes then grow with the host pairs.

A probe sent right after the pipeline changed may take a path the switch's datapath cached
from before (Open vSwitch revalidates its cached flows after answering the barrier): an
answer that contradicts the installed pipeline (``clos_hostmode.pipeline_hops``) is probed
again after a pause (``HostPorts._settle``), and the answer that persists is kept.

Bundles (a Clos whose switches are joined by parallel links): the port also codes the planned
member of every bundle hop, in fields above the bits that choose the hops (``clos_hostmode.
MemberBits``). Probes carry member fields 0 and teach the hops; the controller sets a part's
member fields from its route's members (``choose_ports``), so the port of a part whose member
changes changes too, reported like any port change.

Everything here is pure: the probes go out through a function the caller passes (the Ryu shell
sends packet-outs and collects packet-ins; ``emulation/harness/fake_switch.py`` traces them).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from controller.enforcement import clos_hostmode
from controller.enforcement.probepacket import (  # noqa: F401 - the probe packets' home
    PROBE_DSCP,
    TCP,
    UDP,
    ip_checksum,
    parse_probe,
    probe_packet,
)
from controller.enforcement.rules import ROCE_DPORT
from controller.errors import ConflictError, InputError, InstallError
from controller.model.clos import Clos

PORT_MIN, PORT_MAX = 49152, 65535  # IANA dynamic ports, where RoCE takes its source ports
SETTLE_S = (0.05, 0.2, 0.5)  # pauses before a contradicting answer is probed again (_settle)
SCOPES = ("leaf", "pair")
PROBE_TCP_DPORT = 9  # leaf scope, TCP: the pipeline ignores the destination port
PROTO_NAMES = {UDP: "udp", TCP: "tcp"}

Arrivals = dict  # probe token -> (dpid, in_port) of the packet-in that carried it
ProbeFn = Callable[[list], Arrivals]


@dataclass(frozen=True)
class Probe:
    """One probe packet: ``data`` goes to the leaf ``dpid`` as a packet-out from ``in_port``."""
    token: int
    key: tuple  # the map it teaches: (leaf, class, proto) or (src, dst, proto(, plane))
    sport: int
    dpid: int
    in_port: int
    data: bytes


@dataclass
class PortMap:
    """What one map key's candidate ports do, as learned from probes (the key says all its
    pipeline does: a map holds as long as its key)."""
    spine_of: dict = field(default_factory=dict)  # source port -> the hops it reached
    window: int = 0  # the first ``window`` ports have been probed: PORT_MIN .. PORT_MIN +
    # window - 1, with bundles those with member fields 0 (``MemberBits.index_port``)


# ---- flows and keys -------------------------------------------------------------------------
def host_protocol(flow) -> int:
    """The protocol whose source port steers a host-mode flow: TCP (any destination port) or
    UDP to the RoCEv2 port; anything else keeps the select group and cannot be steered.

    >>> from controller.model.jobs import Flow
    >>> host_protocol(Flow("j", "a", "b", 1.0, 17, 0, 4791))
    17
    """
    if flow.proto == TCP or (flow.proto == UDP and flow.dport == ROCE_DPORT):
        return flow.proto
    raise InputError(f"flow {flow.src} -> {flow.dst}: host mode steers TCP and RoCEv2 (UDP to "
                     f"port {ROCE_DPORT}) by source port; this flow is protocol {flow.proto} to "
                     f"port {flow.dport}")


def map_key(fabric: Clos, flow, scope: str = "leaf", part=None) -> tuple:
    """The map the ports of a flow's route ``part`` are read from. Leaf scope, when the
    switch chooses by source port only: (source leaf in the part's plane, the class of the
    destination, protocol) (``clos_hostmode.dest_class``: on two tiers the spines that reach
    the destination leaf, since a leaf gives destinations that some uplinks cannot reach
    buckets of their own). Pair scope, when its hash may see the addresses: (source,
    destination, protocol), and the plane when it is not the first."""
    proto = host_protocol(flow)
    q = fabric.part_plane(part[0]) if part else 0
    if scope == "leaf":
        a, b = fabric.host_leaves[flow.src][q], fabric.host_leaves[flow.dst][q]
        return (a, clos_hostmode.dest_class(fabric, a, b), proto)
    return (flow.src, flow.dst, proto) + ((q,) if q else ())


def _leaf_key(fabric: Clos, key: tuple) -> bool:
    return fabric.tier_of.get(key[0]) == 0


def key_leaf(fabric: Clos, key: tuple) -> str:
    """The source leaf of a map key (in its plane: a pair key's fourth element, if any)."""
    if _leaf_key(fabric, key):
        return key[0]
    return fabric.host_leaves[key[0]][key[3]] if len(key) > 3 else fabric.hosts[key[0]]


def _dst_leaf(fabric: Clos, key: tuple) -> str:
    """The destination leaf of a pair key, in its plane."""
    return fabric.host_leaves[key[1]][key[3] if len(key) > 3 else 0]


def key_buckets(fabric: Clos, key: tuple) -> int:
    """The distinct choices the pipeline makes for a key's ports: the buckets of its
    aggregation switches (spines) times those of their cores."""
    leaf = key_leaf(fabric, key)
    klass = key[1] if _leaf_key(fabric, key) else clos_hostmode.dest_class(
        fabric, leaf, _dst_leaf(fabric, key))
    return clos_hostmode.buckets(klass)


def first_window(fabric: Clos, scope: str = "leaf", key: tuple | None = None) -> int:
    """Ports probed the first time a key is needed: 4 (leaf) or 2 (pair) ports per bucket of
    the key, so that each choice has a few candidates."""
    return (4 if scope == "leaf" else 2) * key_buckets(fabric, key)


def part_members(part):
    """The members a route part's path names (``model.intent.MemberPath``), or None."""
    return getattr(part[0], "members", None) if part else None


def part_target(fabric: Clos, part) -> tuple | None:
    """What a route part's port must reach: its hops (``clos_hostmode.part_hops``: on two
    tiers its spine; None for a path that never leaves its leaf)."""
    return clos_hostmode.part_hops(part) if len(part[0]) > 1 else None


def make_probes(fabric: Clos, key: tuple, sports: Iterable[int], token0: int) -> list[Probe]:
    """Probes for ``sports`` of one map key. Leaf scope sends from the leaf's first host to
    the first host of the first leaf of that class (``clos_hostmode.probe_ends``: the
    pipeline treats every such destination alike); pair scope uses the pair. The mark says
    which tier traps the probe (a spine inside a pod, a core between pods), and a probe
    carries the addresses of its leaf's plane, as the host's interface to that plane sends."""
    leaf = key_leaf(fabric, key)
    q = fabric.plane_of_switch(leaf)
    if _leaf_key(fabric, key):
        src, dst, mark = clos_hostmode.probe_ends(fabric, leaf, key[1])
    else:
        src, dst = key[0], key[1]
        mark = clos_hostmode.probe_mark(clos_hostmode.dest_class(fabric, leaf,
                                                                 _dst_leaf(fabric, key)))
    proto = key[2]
    dport = ROCE_DPORT if proto == UDP else PROBE_TCP_DPORT
    dpid, in_port = fabric.dpids[leaf], fabric.port(leaf, src)
    return [Probe(token0 + i, key, sport, dpid, in_port,
                  probe_packet(fabric.mac_of(src, q), fabric.mac_of(dst, q), fabric.ip_of(src, q),
                               fabric.ip_of(dst, q), proto, sport, dport, token0 + i, mark))
            for i, sport in enumerate(sports)]


def learn(fabric: Clos, sent: list[Probe], arrivals: Arrivals) -> dict[tuple, dict]:
    """Per map key, the hops (on two tiers: the spine) each probed source port reached, read
    from the packet-ins (``clos_hostmode.reached``).

    A probe that reached no trap, or one that its leaf cannot reach, is an ``InstallError``
    naming the leaf and the ports: the map must come from the switch, so nothing is guessed.
    O(probes).
    """
    out: dict[tuple, dict[int, str]] = {}
    lost: dict[tuple, list[int]] = {}
    for p in sent:
        got = arrivals.get(p.token)
        if got is None:
            lost.setdefault(p.key, []).append(p.sport)
            continue
        dpid, in_port = got
        leaf = key_leaf(fabric, p.key)
        where = clos_hostmode.reached(fabric, leaf, dpid, in_port)
        if where is None:
            raise InstallError(f"probe of leaf {leaf} ({PROTO_NAMES[p.key[2]]} source port "
                               f"{p.sport}) arrived at "
                               f"{fabric.switch_of_dpid.get(dpid) or hex(dpid)} port {in_port}, "
                               f"not on a way up from {leaf}" + (
                                   " over the member its source port codes"
                                   if fabric.bundled else ""))
        out.setdefault(p.key, {})[p.sport] = where
    if lost:
        key, ports = next(iter(lost.items()))
        raise InstallError(
            f"{sum(len(v) for v in lost.values())} of {len(sent)} probes reached no "
            f"{'spine' if fabric.tiers == 2 else 'aggregation switch or core'} (leaf "
            f"{key_leaf(fabric, key)}, {PROTO_NAMES[key[2]]} source ports {min(ports)}-"
            f"{max(ports)} first): is the host-mode pipeline installed?")
    return out


# ---- choosing ports -------------------------------------------------------------------------
def choose_ports(fabric: Clos, flows: list, maps: dict[tuple, PortMap],
                 previous: dict | None = None, taken: Iterable[tuple] = (),
                 scope: str = "leaf") -> tuple[dict, dict[tuple, int]]:
    """A source port per part of every host-mode flow.

    ``flows``: (name, flow, parts) with parts ((path, share), ...), None for an intra-leaf
    flow (one port, any) or () for a flow with no alive path (no port). A part's port must be
    one its map sends to the part's hops (``part_target``: on two tiers its spine), and
    unique among the ports of its source host and protocol (``taken`` holds (host, proto,
    port) already used, e.g. by flow-mode jobs), so connections never share a 5-tuple or a
    socket. A part keeps its ``previous`` port when that still holds, so a re-plan changes
    only what it must.
    Returns ({name: (port or None, ...)}, {map key: parts left without a port}).
    O(parts + probed ports).

    >>> from controller.model.jobs import Flow
    >>> f = Clos.leaf_spine(2, 2, 1).wire()
    >>> key = map_key(f, Flow("j", "h0_0", "h1_0", 1.0, 17, 0, 4791))
    >>> m = {key: PortMap({49152: ("s0",), 49153: ("s1",), 49154: ("s0",)}, 3)}
    >>> via = lambda s: ("l0", s, "l1")
    >>> flows = [("a", Flow("j", "h0_0", "h1_0", 1.0, 17, 0, 4791), ((via("s1"), 1.0),)),
    ...          ("b", Flow("j", "h0_0", "h1_0", 1.0, 17, 1, 4791), ((via("s0"), 0.5),
    ...                                                              (via("s1"), 0.5)))]
    >>> choose_ports(f, flows, m)
    ({'a': (49153,), 'b': (49152, None)}, {('l0', (('s0', ()), ('s1', ())), 17): 1})
    """
    previous = previous or {}
    bits = clos_hostmode.MemberBits(fabric)
    used: dict[tuple, set] = {}
    for host, proto, port in taken:
        used.setdefault((host, proto), set()).add(port)
    by_spine: dict[tuple, dict[str, list[int]]] = {}
    for key, pm in maps.items():
        lists: dict[str, list[int]] = {}
        for port in sorted(pm.spine_of):
            lists.setdefault(pm.spine_of[port], []).append(port)
        by_spine[key] = lists
    out: dict = {}
    todo = []
    for name, flow, parts in flows:  # first keep what still holds
        if parts == ():
            out[name] = ()
            continue
        proto = host_protocol(flow)
        mine = used.setdefault((flow.src, proto), set())
        spines = [(None, None)] if parts is None else [(part_target(fabric, p), p)
                                                        for p in parts]
        old = previous.get(name, ())
        chosen = []
        for i, (spine, part) in enumerate(spines):
            port = old[i] if len(old) == len(spines) else None
            if port is not None and port not in mine and (spine is None or (maps.get(
                    map_key(fabric, flow, scope, part), PortMap(())).spine_of.get(
                    bits.hop_port(port)) == spine and port == bits.port(port, part_members(part)))):
                mine.add(port)
                chosen.append(port)
            else:
                chosen.append(None)
                todo.append((name, i, flow, spine, part, proto))
        out[name] = chosen
    missing: dict[tuple, int] = {}
    cursor: dict[tuple, int] = {}
    for name, i, flow, spine, part, proto in todo:
        mine = used[(flow.src, proto)]
        if spine is None:  # intra-leaf: never crosses a spine, any free port
            port = PORT_MIN
            while port in mine:
                port += 1
            if port > PORT_MAX:
                raise ConflictError(f"host {flow.src} has no free {PROTO_NAMES[proto]} source "
                                    "port left")
        else:
            key = map_key(fabric, flow, scope, part)
            ports = by_spine.get(key, {}).get(spine, [])
            members = part_members(part)  # coded into the member fields of the probed port
            c = cursor.get((flow.src, key, spine, members), 0)
            while c < len(ports) and bits.port(ports[c], members) in mine:
                c += 1
            cursor[(flow.src, key, spine, members)] = c
            if c == len(ports):
                missing[key] = missing.get(key, 0) + 1
                continue
            port = bits.port(ports[c], members)
        mine.add(port)
        out[name][i] = port
    return {k: tuple(v) for k, v in out.items()}, missing


def by_part(ports: dict) -> dict:
    """{(job id, flow key): ports} of ports kept by job, ``{job id: {flow key: ports}}``
    (``HostPorts.ports``)."""
    return {(j, fk): p for j, by_flow in ports.items() for fk, p in by_flow.items()}


def port_changes(old: dict, new: dict, moved: set) -> list[tuple]:
    """(name, part, old port, new port) of every part whose port changed, or that is in
    ``moved`` ((name, part): its plane changed, so the connection moves even on the same
    port); new parts (no old port) are not changes."""
    out = []
    for name, ports in new.items():
        before = old.get(name)
        if before is None:
            continue
        for i, port in enumerate(ports):
            was = before[i] if i < len(before) else None
            if was is not None and (was != port or (name, i) in moved):
                out.append((name, i, was, port))
    return out


# ---- the orchestration, with probes through a function ---------------------------------------
class HostPorts:
    """Learned maps and chosen ports of host mode. ``place`` computes the ports of a set of jobs
    (probing what it must), ``commit`` keeps them once the change is installed."""

    def __init__(self, scope: str = "leaf"):
        if scope not in SCOPES:
            raise InputError(f"unknown probe scope {scope!r} (choose from {', '.join(SCOPES)})")
        self.scope = scope
        self.maps: dict[tuple, PortMap] = {}
        self.ports: dict[str, dict] = {}  # job id -> {flow key: (port or None, ...)}
        self.probes_sent = 0
        self.probe_rounds = 0
        self.probes_repeated = 0  # answers that contradicted the pipeline, probed again
        self._token = 1

    def broken(self, fabric: Clos, flows: list) -> bool:
        """Whether a committed port of ``flows`` (as ``place`` takes them) no longer reaches
        its part's target: the flow's class changed, or its map is gone."""
        bits = clos_hostmode.MemberBits(fabric)
        for (jid, fk), flow, parts in flows:
            ports = self.ports.get(jid, {}).get(fk)
            if not parts or ports is None:
                continue
            for part, port in zip(parts, ports):
                pm = self.maps.get(map_key(fabric, flow, self.scope, part))
                target = part_target(fabric, part)
                if target is not None and (pm is None or pm.spine_of.get(bits.hop_port(port)) != target
                                           or port != bits.port(port, part_members(part))):
                    return True
        return False

    def place(self, fabric: Clos, flows: list, probe: ProbeFn, taken: Iterable[tuple] = (),
              max_rounds: int = 16, pause: Callable[[float], None] | None = None) -> dict:
        """Ports for ``flows`` ((job id, flow key), flow, parts) as ``choose_ports``, keeping
        the committed ports that still hold. Keys with no map get ``first_window`` ports
        probed; a key whose spines ran short gets its window doubled. ``pause(seconds)``: how
        to wait before probing again an answer that contradicts the pipeline (``_settle``;
        None: never). Raises ConflictError when the port range cannot serve a spine,
        InstallError when probes are lost. Returns {(job id, flow key): ports}."""
        previous = by_part(self.ports)
        taken = list(taken)
        span = clos_hostmode.MemberBits(fabric).span  # ports probed: member fields 0
        want: dict[tuple, int] = {}
        for k, need in self._demand(fabric, flows).items():
            window = min(span,
                         max(first_window(fabric, self.scope, k), need))
            if k not in self.maps or self.maps[k].window < window:
                want[k] = window
        for _ in range(max_rounds):
            if want:
                self._probe(fabric, want, probe, pause)
            ports, missing = choose_ports(fabric, flows, self.maps, previous, taken, self.scope)
            if not missing:
                return ports
            want = {}
            for k in missing:
                if self.maps[k].window >= span:
                    raise ConflictError(
                        f"host mode: the {PROTO_NAMES[k[2]]} source ports of leaf "
                        f"{key_leaf(fabric, k)} cannot give every flow part its own port to "
                        f"its planned spine ({missing[k]} parts left)")
                want[k] = min(span, 2 * self.maps[k].window)
        raise ConflictError("host mode: no source ports found within the probe rounds")

    def _demand(self, fabric: Clos, flows: list) -> dict[tuple, int]:
        """Per map key, the ports worth probing at once: for every host, the most parts it
        sends to one spine (hops) times the buckets of the key, plus its parts of other keys
        (they take ports of the same range, spread over the buckets as these are: a host's
        ports are unique whatever the key), so that with buckets spread as the pipeline
        spreads them one round of probes serves every host, most of the time; more are probed
        when the switch spreads them less evenly or other keys took more of one spine's."""
        count: dict[tuple, int] = {}
        per_host: dict[tuple, int] = {}  # (host, protocol): ports are unique per both
        per_key_host: dict[tuple, int] = {}
        for _name, flow, parts in flows:
            if not parts:
                continue
            for part in parts:
                k = map_key(fabric, flow, self.scope, part)
                mine = (flow.src, k[2])
                s = part_target(fabric, part)
                count[(k, flow.src, s)] = count.get((k, flow.src, s), 0) + 1
                per_host[mine] = per_host.get(mine, 0) + 1
                per_key_host[(k, flow.src)] = per_key_host.get((k, flow.src), 0) + 1
        out: dict[tuple, int] = {}
        for (k, src, _s), n in count.items():
            need = (n * key_buckets(fabric, k) + per_host[(src, k[2])]
                    - per_key_host[(k, src)])
            out[k] = max(out.get(k, 0), need)
        return out

    def _probe(self, fabric: Clos, want: dict[tuple, int], probe: ProbeFn,
               pause: Callable[[float], None] | None = None) -> None:
        bits = clos_hostmode.MemberBits(fabric)
        asked = {k: [bits.index_port(i) for i in range(
            self.maps[k].window if k in self.maps else 0, window)] for k, window in want.items()}
        learned = self._round(fabric, asked, probe)
        if pause is not None:
            learned = self._settle(fabric, learned, probe, pause)
        for k, window in want.items():
            pm = self.maps.setdefault(k, PortMap())
            pm.spine_of.update(learned.get(k, {}))
            pm.window = max(pm.window, window)

    def _round(self, fabric: Clos, asked: dict[tuple, list[int]], probe: ProbeFn) -> dict:
        """One round of probes: the ports ``asked`` per map key; what they reached (``learn``)."""
        sent = []
        for k, sports in asked.items():
            sent += make_probes(fabric, k, sports, self._token + len(sent))
        if not sent:
            return {}
        self._token += len(sent)
        self.probes_sent += len(sent)
        self.probe_rounds += 1
        return learn(fabric, sent, probe(sent))

    def _settle(self, fabric: Clos, learned: dict, probe: ProbeFn,
                pause: Callable[[float], None]) -> dict:
        """Answers of leaf-scope keys that contradict the pipeline the controller installed
        (``clos_hostmode.pipeline_hops``) probed again after a pause, up to ``SETTLE_S``.

        Why: Open vSwitch follows a change of its flow tables in its datapath asynchronously
        (its revalidators update the cached flows after the barrier is answered), so a probe
        sent right after the pipeline was installed can take a path cached from before. Seen
        in the fat-tree emulation: one placement in eight took a port whose packets then went
        to another core than planned. An answer that still contradicts after the last pause is
        the switch's, and kept (the map must come from the switch)."""
        def wrong(got: dict) -> dict:
            out: dict = {}
            for k, ports in got.items():
                if _leaf_key(fabric, k):
                    for port, hops in ports.items():
                        if hops != clos_hostmode.pipeline_hops(fabric, k[0], k[1], port):
                            out.setdefault(k, []).append(port)
            return out
        doubt = wrong(learned)
        for seconds in SETTLE_S:
            if not doubt:
                break
            pause(seconds)
            self.probes_repeated += sum(map(len, doubt.values()))
            again = self._round(fabric, doubt, probe)
            for k, ports in again.items():
                learned[k].update(ports)
            doubt = wrong(again)
        return learned

    def commit(self, ports: dict) -> None:
        """Keep ``ports`` ({(job id, flow key): ports}) as the committed ports."""
        by_job: dict[str, dict] = {}
        for (jid, fk), p in ports.items():
            by_job.setdefault(jid, {})[fk] = p
        self.ports = by_job

    def changes(self, ports: dict, moved: set) -> list[tuple]:
        """Port changes of ``ports`` against the committed ones (``moved``: parts whose plane
        changed, as ``port_changes``)."""
        previous = by_part(self.ports)
        return port_changes(previous, ports, moved)


# ---- the export for job launchers -------------------------------------------------------------
def export_lines(fabric: Clos, connections: list[tuple]) -> str:
    """One line per connection: source IP, destination IP, protocol, source port, destination
    port (in the spirit of HCCL's MultiQpSrcPort.cfg); ``connections`` holds (flow, port) or
    (flow, port, plane): on a multi-plane fabric the addresses say the plane.

    >>> from controller.model.jobs import Flow
    >>> f = Clos.leaf_spine(1, 2, 1).wire()
    >>> print(export_lines(f, [(Flow("j", "h0_0", "h1_0", 1.0, 17, 0, 4791), 49153)]), end="")
    10.0.0.1 10.0.1.1 udp 49153 4791
    """
    def line(flow, port, plane=0):
        return (f"{fabric.ip_of(flow.src, plane)} {fabric.ip_of(flow.dst, plane)} "
                f"{PROTO_NAMES.get(flow.proto, flow.proto)} {port} {flow.dport}\n")
    return "".join(line(*c) for c in connections)
