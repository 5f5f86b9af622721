"""Host mode on fabrics without OpenFlow (``--mlroute-southbound none``): the hosts learn their
source ports, the controller checks and serves them.

Why the hosts: a router hashes the 5-tuple with a seed of its own and the controller has no
packet-out there, so only a packet from the host shows which port goes where
(``controller/agent/portmap.py``). The controller plans as in every mode, names each
host-mode part's path and the routers' addresses in the host's segments document
(``entries``, ``routers``), and takes the agent's ports (``POST /v1/hosts/{host}/ports``,
``reported``): checked against the plan, all or nothing. A reported port is kept while its
part's planned path is unchanged (``kept``); a re-plan that moves the part drops it (a
``port_changes`` entry with ``sport`` null) and the agent learns another. The agent withdraws
a port its probes show going elsewhere now (the routers' next hops changed, the plan did
not) when it found no other: an entry with ``sport`` null drops the kept port the same way.

>>> from controller.model.jobs import Flow
>>> f = Flow("j", "h0_0", "h1_0", 1.0, 6, 0, 5201)
>>> flow_doc(f), flow_of({"src": "h0_0", "dst": "h1_0", "dport": 5201}) == f.five_tuple()
({'src': 'h0_0', 'dst': 'h1_0', 'proto': 6, 'sport': 0, 'dport': 5201}, True)
"""
from __future__ import annotations

from controller.enforcement.hostmode import PROTO_NAMES, TCP, UDP
from controller.enforcement.modes import mode_of
from controller.enforcement.rules import part_sport
from controller.enforcement.srv6_config import router_ips
from controller.errors import ConflictError, InputError, NotFoundError
from controller.model.clos import Clos
from controller.model.intent import UNROUTABLE, flow_key
from controller.service import oplog

MAX_PORTS = 4096  # entries of one report


def flow_doc(flow) -> dict:
    """A flow's 5-tuple as the routes and the segments document name its fields."""
    return {"src": flow.src, "dst": flow.dst, "proto": flow.proto, "sport": flow.sport,
            "dport": flow.dport}


def flow_of(doc) -> tuple:
    """The flow key a report names (``flow_doc``'s fields; proto 6, ports 0 if left out)."""
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in ("src", "dst")):
        raise InputError("'flow' needs 'src' and 'dst' (host names), and 'proto', 'sport' "
                         "and 'dport' as the job gave them")
    rest = [doc.get(k, d) for k, d in (("proto", 6), ("sport", 0), ("dport", 0))]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in rest):
        raise InputError("'flow': 'proto', 'sport' and 'dport' must be integers")
    return (doc["src"], doc["dst"], *rest)


def part_paths(fabric: Clos, flow, parts) -> list[tuple]:
    """Each part's path as switch names; a flow within one leaf (parts None) is one part
    whose path is that leaf."""
    if parts is None:
        return [(fabric.host_leaves[flow.src][0],)]
    return [tuple(list(where)) for where, _share in parts]


def check_dports(flows: list) -> None:
    """A TCP or UDP host-mode flow needs its destination port here: the routers' hash covers
    it, so a port learned for one destination port says nothing of another."""
    for (jid, _fk), flow, _parts in flows:
        if flow.proto in (TCP, UDP) and not flow.dport:
            raise InputError(
                f"job {jid}: flow {flow.src} -> {flow.dst} ({PROTO_NAMES[flow.proto]}) has no "
                "'dport': host mode on routers needs the destination port (the routers' "
                "ECMP hash covers it)")


def kept(fabric: Clos, flows: list, ports: dict, paths: dict) -> dict:
    """{(job id, flow key): ports} of ``flows`` (as ``HostPortService.place`` takes them): a
    reported port where the part's path is still the one it was reported for, else None."""
    out = {}
    for (jid, fk), flow, parts in flows:
        if parts == UNROUTABLE:
            out[(jid, fk)] = ()
            continue
        now = part_paths(fabric, flow, parts)
        old = ports.get(jid, {}).get(fk) or ()
        was = paths.get((jid, fk)) or ()
        out[(jid, fk)] = tuple(old[i] if i < len(old) and i < len(was) and was[i] == p
                               else None for i, p in enumerate(now))
    return out


def prune(paths: dict, ports: dict) -> dict:
    """The reported paths of the parts that keep a port (``ports``: {(job, fk): ports})."""
    out = {}
    for name, chosen in ports.items():
        was = paths.get(name) or ()
        if any(p is not None for p in chosen):
            out[name] = tuple(was[i] if p is not None and i < len(was) else None
                              for i, p in enumerate(chosen))
    return out


# ---- the segments document -------------------------------------------------------------------
def routers(fabric: Clos) -> dict[str, str]:
    """Router address -> switch name (``srv6_config.router_ips``), once per fabric object."""
    return fabric.derived("router_addresses", lambda f: {ip: s for s, ip in router_ips(f).items()})


def learning_hosts(state) -> list[str]:
    """The hosts with host-mode flows whose agents learn ports (their documents' ``ports``)."""
    return list(_host_flows(state))


def _host_flows(state) -> dict[str, list]:
    """Host -> (record, flow, parts) of the host-mode flows it sends, once per state version
    (every agent asks after each change)."""
    key = (state.version, id(state.fabric))
    held = state.__dict__.get("_host_port_flows")
    if held is None or held[0] != key:
        index: dict[str, list] = {}
        for r in state.jobs.values():
            if mode_of(r.mode).host_ports:
                for flow, parts in r.flows_with_parts():
                    if parts != UNROUTABLE:
                        index.setdefault(flow.src, []).append((r, flow, parts))
        held = state.__dict__["_host_port_flows"] = (key, index)
    return held[1]


def entries(state, host: str, ports: dict) -> list[dict]:
    """The host's host-mode parts for its agent: what a port must do and the port it has
    (``ports``: ``HostPorts.ports``; null until the agent reported one)."""
    fabric = state.fabric
    out = []
    for r, flow, parts in _host_flows(state).get(host, ()):
        chosen = ports.get(r.job.id, {}).get(flow_key(flow)) or ()
        wheres = parts if parts is not None else [(None, 1.0)]
        for i, (path, (where, _)) in enumerate(zip(part_paths(fabric, flow, parts), wheres)):
            q = fabric.part_plane(where) if where is not None else 0
            out.append({"job": r.job.id, "flow": flow_doc(flow), "part": i,
                        "dst_ip": fabric.ip_of(flow.dst, q), "proto": flow.proto,
                        "dport": flow.dport, "path": list(path),
                        "sport": chosen[i] if i < len(chosen) else None})
    return out


# ---- POST /v1/hosts/{host}/ports --------------------------------------------------------------
def parse(doc) -> list[tuple[str, tuple, int, list, int | None]]:
    """(job, flow key, part, path, sport) of each entry, ``sport`` None for a withdrawal; an
    InputError names the entry (a part named twice too: the report would not say which)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("ports"), list):
        raise InputError("port report: expected an object with a list 'ports'")
    if len(doc["ports"]) > MAX_PORTS:
        raise InputError(f"port report: at most {MAX_PORTS} entries")
    out, named = [], {}
    for i, e in enumerate(doc["ports"]):
        if not isinstance(e, dict) or not isinstance(e.get("job"), str):
            raise InputError(f"port report: entry {i} needs 'job', 'flow', 'part', 'path' "
                             "and 'sport'")
        try:
            fk = flow_of(e.get("flow"))
        except InputError as err:
            raise InputError(f"port report: entry {i}: {err}") from None
        part, path, sport = e.get("part"), e.get("path"), e.get("sport")
        if not isinstance(part, int) or isinstance(part, bool) or part < 0:
            raise InputError(f"port report: entry {i}: 'part' must be an integer >= 0")
        if not isinstance(path, list) or not path or not all(isinstance(s, str) for s in path):
            raise InputError(f"port report: entry {i}: 'path' must be a list of switch names")
        if sport is not None and (not isinstance(sport, int) or isinstance(sport, bool)
                                  or not 1 <= sport <= 65535):
            raise InputError(f"port report: entry {i}: 'sport' must be a port, 1 to 65535, "
                             f"or null (withdrawn), not {sport!r}")
        j = named.setdefault((e["job"], fk, part), i)
        if j != i:
            raise InputError(f"port report: entry {i}: {_name(e['job'], fk, part)} is "
                             f"entry {j} already")
        out.append((e["job"], fk, part, path, sport))
    return out


def _name(jid: str, fk: tuple, part: int) -> str:
    """A part as messages name it: job, flow (its ports where the job gave them), part."""
    ports = "".join(f" {w} {v}" for w, v in (("sport", fk[3]), ("dport", fk[4])) if v)
    return f"job {jid}'s flow {fk[0]} -> {fk[1]}{ports} part {part}"


def merge(fabric: Clos, records: dict, host: str, report: list, ports: dict,
          paths: dict) -> tuple[dict, dict]:
    """``ports`` and ``paths`` (``HostPortService``'s) with the report in, as new dicts (an
    entry with ``sport`` None drops the part's port: withdrawn; none kept, nothing); the
    first wrong entry raises (InputError: not the host's flow, a part out of range, a port
    another connection of the host uses; ConflictError: the job is gone or the part's path
    is no longer the planned one) and nothing changes."""
    new_ports = {jid: dict(by_flow) for jid, by_flow in ports.items()}
    new_paths = dict(paths)
    replaced = set()
    flows_of: dict[str, dict] = {}  # job id -> {flow key: (flow, parts)}, built once
    for i, (jid, fk, part, path, sport) in enumerate(report):
        r = records.get(jid)
        if r is None:
            raise ConflictError(f"port report: entry {i}: no job {jid!r} (deleted?)")
        if not mode_of(r.mode).host_ports:
            raise InputError(f"port report: entry {i}: job {jid} is in {r.mode} mode, not "
                             "host mode")
        if jid not in flows_of:
            flows_of[jid] = {flow_key(f): (f, p) for f, p in r.flows_with_parts()}
        found = flows_of[jid].get(fk)
        if found is None or found[0].src != host:
            raise InputError(f"port report: entry {i}: job {jid} has no flow {fk[0]} -> "
                             f"{fk[1]} {fk[2:]} from {host}")
        flow, parts = found
        planned = part_paths(fabric, flow, parts) if parts != UNROUTABLE else []
        if part >= len(planned):
            raise InputError(f"port report: entry {i}: {_name(jid, fk, part)}: the flow has "
                             f"{len(planned)} part(s)")
        if tuple(path) != planned[part]:
            raise ConflictError(f"port report: entry {i}: {_name(jid, fk, part)} is planned "
                                f"on {list(planned[part])} now, not {path}: learn its port "
                                "again from the new segments document")
        chosen = list(new_ports.setdefault(jid, {}).get(fk) or ())
        chosen += [None] * (len(planned) - len(chosen))
        chosen[part] = sport
        new_ports[jid][fk] = tuple(chosen[:len(planned)])
        was = list(new_paths.get((jid, fk)) or ())
        was += [None] * (len(planned) - len(was))
        was[part] = planned[part] if sport is not None else None
        new_paths[(jid, fk)] = tuple(was[:len(planned)])
        replaced.add((jid, fk, part))
    _check_unique(records, host, new_ports, replaced, report)
    return new_ports, new_paths


def _check_unique(records: dict, host: str, ports: dict, replaced: set, report: list) -> None:
    """Every source port of ``host`` used once per protocol: by its host-mode parts (the
    reported ones included) and by its flows of other modes."""
    owner: dict[tuple, tuple] = {}  # (proto, port) -> (job id, flow key, part)
    for r in records.values():
        host_mode = mode_of(r.mode).host_ports
        for flow, parts in r.flows_with_parts():
            if flow.src != host:
                continue
            fk = flow_key(flow)
            n = len(parts) if parts not in (None, UNROUTABLE) else 1
            chosen = (ports.get(r.job.id, {}).get(fk) or ()) if host_mode else \
                [part_sport(flow, i, n) for i in range(n)]
            for part, port in enumerate(chosen):
                if port and (r.job.id, fk, part) not in replaced:
                    owner.setdefault((flow.proto, port), (r.job.id, fk, part))
    for i, (jid, fk, part, _path, sport) in enumerate(report):
        if sport is None:  # withdrawn: takes no port
            continue
        other = owner.setdefault((fk[2], sport), (jid, fk, part))
        if other != (jid, fk, part):
            raise InputError(f"port report: entry {i}: {_name(jid, fk, part)}: "
                             f"{PROTO_NAMES.get(fk[2], fk[2])} source port {sport} is "
                             f"already {_name(*other)}'s")


def reported(service, host: str, doc) -> dict:
    """POST /v1/hosts/{host}/ports: keep the ports ``host``'s agent learned and drop the ones
    it withdrew (all or nothing); the routes' ``sport``, ``GET /v1/jobs/{id}/ports`` and the
    segments document serve them. A kept port the report replaced or withdrew is an event's
    ``port_changes`` (the application moves that connection)."""
    report = parse(doc)
    hp = service.hostports
    if not hp.from_hosts:
        raise ConflictError("port report: this controller learns host mode's ports by probes "
                            "through its OpenFlow switches; hosts report none")
    with service.lock:
        fabric = service.state.fabric
        if fabric is None:
            raise InputError("no fabric yet: port reports need a declared fabric")
        if host not in fabric.host_leaves:
            raise NotFoundError(f"no host {host!r} in the fabric")
        ports, paths = merge(fabric, service.state.jobs, host, report, hp.ports.ports,
                             hp.paths)
        changes = hp.reported(fabric, service.state.jobs, ports, paths)
        if report:
            service.state.version += 1  # the documents and their watches show the ports
        if changes:
            withdrawn = sum(c["sport"] is None for c in changes)
            event = {"cause": f"host {host} reported source ports: {len(changes) - withdrawn} "
                              f"replaced, {withdrawn} withdrawn (the routers' hash sends them "
                              "elsewhere now)", "port_changes": changes}
            service.state.add_event({"time": service.clock(), **event})
            oplog.event(event)
    return {"host": host, "ports": len(report)}
