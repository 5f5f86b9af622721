"""What the emulation harness made on this machine, so that its cleanup removes that and nothing
else (issue 59, item 12). Mininet's own cleanup (``mn -c``) kills every process named like a
controller or ``ping``, deletes every bridge and every link named ``*-ethN``, and
``/tmp/*.log``: run before each emulation, it destroyed any other emulation on the machine.

A harness process is an owner, named by its token ``<pid>-<start time>-<PID namespace>`` (a
PID alone may be reused). ``claim`` makes the process one; then what it makes carries its token:

* processes: ``MLROUTE_EMULATION=<token>`` in the environment, which every child inherits
  (controllers, etcd, Mininet's node shells and whatever runs in the emulated hosts);
* bridges: ``external_ids:mlroute-emulation=<token>``, set in the transaction that adds them
  (``topologies.clos.ClosSwitch``, ``benchmarks.reconcile.build_bridges``);
* links: a veth carries no mark, so their names go to ``RECORDS/<token>.json`` before Mininet
  creates them (a run killed while it builds leaves veths and no bridge yet); and a link named
  after one of the owner's bridges (Mininet's ``<switch>-ethN``) is the owner's too.

``plan`` (pure) decides what a cleanup removes: everything of an owner that is gone; of this
process, its bridges, links and Mininet nodes (not its controllers: whoever started them stops
them); nothing of an owner still running, and nothing unmarked. Two harness runs at once
still collide (the same switch names): that is not what this prevents.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field

ENV = "MLROUTE_EMULATION"  # topologies.clos.OWNER_ENV (a test checks they agree)
KEY = "mlroute-emulation"  # topologies.clos.OWNER_KEY
RECORDS = "/run/mlroute-emulation"
KILL_GRACE_S = 1.0


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22),
    None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_namespace() -> str:
    try:
        return re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return "0"


def token_of(pid: int) -> str | None:
    """``<pid>-<start time>-<PID namespace>``: one process, never another that got its PID
    later; the namespace, because PIDs of another one (a container sharing this Open
    vSwitch) say nothing here."""
    start = start_time(pid)
    return None if start is None else f"{pid}-{start}-{_pid_namespace()}"


def alive(token: str) -> bool:
    """The owner of ``token`` still runs. A token of another PID namespace, or one this
    harness did not write, counts as alive: what cannot be judged is left alone."""
    parts = token.split("-")
    if len(parts) != 3 or not all(x.isdigit() for x in parts) or \
            parts[2] != _pid_namespace():
        return True
    return token_of(int(parts[0])) == token


def claim(links=()) -> str:
    """Make this process an owner (its children inherit the token) and add ``links`` to its
    record; returns its token. Without root (no record can be written) only the environment
    is marked: such a process makes no bridge or link either."""
    me = token_of(os.getpid())
    os.environ[ENV] = me
    path = os.path.join(RECORDS, f"{me}.json")
    try:
        os.makedirs(RECORDS, exist_ok=True)
        had = _read_record(path) if os.path.exists(path) else []
        with open(path + ".tmp", "w") as fh:
            json.dump({"links": sorted(set(had) | set(links))}, fh)
        os.replace(path + ".tmp", path)
    except OSError:
        pass
    return me


def link_names(topo) -> list[str]:
    """The names Mininet gives the interfaces of a topology's links (``Link.intfName``:
    ``<node>-eth<port>``), known before it creates any."""
    names = []
    for _src, _dst, info in topo.links(withInfo=True):
        for end in "12":
            names.append(info.get(f"intfName{end}") or
                         f"{info[f'node{end}']}-eth{info[f'port{end}']}")
    return names


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    token: str | None  # its MLROUTE_EMULATION (as it was started)
    netns: str
    cmd: str
    start: str = ""  # start time (``start_time``): the same PID, the same process


@dataclass
class Listing:
    """What runs on the machine: bridge -> its owner's token (None: unmarked), the links of
    this namespace, the processes, and each record's links."""
    bridges: dict = field(default_factory=dict)
    links: set = field(default_factory=set)
    procs: dict = field(default_factory=dict)  # pid -> Proc
    records: dict = field(default_factory=dict)  # token -> [link names]


@dataclass
class Plan:
    kill: list = field(default_factory=list)
    bridges: list = field(default_factory=list)
    links: list = field(default_factory=list)
    records: list = field(default_factory=list)  # owners gone: their records go too

    def describe(self, procs: dict) -> list[str]:
        """Human lines, as ``leftovers`` returns them (empty: nothing to remove)."""
        out = []
        if self.bridges:
            out.append("bridges: " + " ".join(self.bridges[:5]))
        if self.links:
            out.append("links: " + " ".join(self.links[:5]))
        if self.kill:
            out.append("processes: " + " ".join(
                f"{p} ({procs[p].cmd.split(' ', 1)[0][:32]})" for p in self.kill[:5]))
        return out


def plan(listing: Listing, me: str, is_alive=alive) -> Plan:
    """What a cleanup by the owner ``me`` removes (module docstring). Never this process or
    its ancestors, nor a process that is itself an owner still running."""
    mypid = int(me.split("-")[0])
    owners = set(listing.records) | {t for t in listing.bridges.values() if t}
    gone = {t for t in owners if t != me and not is_alive(t)}
    ours = gone | {me}
    spared, pid = set(), mypid
    while pid in listing.procs and pid not in spared:
        spared.add(pid)
        pid = listing.procs[pid].ppid
    spared.add(mypid)
    spared |= {int(t.split("-")[0]) for t in owners - gone if t.split("-")[0].isdigit()}
    netns = listing.procs[mypid].netns if mypid in listing.procs else None
    kill = sorted(p.pid for p in listing.procs.values() if p.pid not in spared and (
        p.token in gone or (p.token == me and ("mininet:" in p.cmd or (
            netns is not None and p.netns != netns)))))
    bridges = sorted(b for b, t in listing.bridges.items() if t in ours)
    named = re.compile("^(" + "|".join(map(re.escape, bridges)) + r")-eth\d+$") \
        if bridges else None
    links = sorted(n for n in listing.links if (named and named.match(n)) or any(
        n in listing.records.get(t, ()) for t in ours))
    return Plan(kill, bridges, links, sorted(gone & set(listing.records)))


def bridge_rows(text: str) -> list[tuple[str, str | None, list[str]]]:
    """(name, owner token or None, controller UUIDs) of each bridge in ``ovs-vsctl
    --format=json --columns=name,external_ids,controller list bridge`` (OVSDB JSON: a map is
    ``["map", pairs]``, a set of one is its element, of several ``["set", elements]``)."""
    doc = json.loads(text)
    col = {h: i for i, h in enumerate(doc["headings"])}
    rows = []
    for row in doc["data"]:
        ids = dict(row[col["external_ids"]][1]) if "external_ids" in col else {}
        ctl = row[col["controller"]] if "controller" in col else ["set", []]
        uuids = [u for _, u in ctl[1]] if ctl[0] == "set" else [ctl[1]]
        rows.append((row[col["name"]], ids.get(KEY), uuids))
    return rows


def list_bridges() -> list[tuple[str, str | None, list[str]]]:
    """``bridge_rows`` of this machine's Open vSwitch ([] when it does not answer)."""
    out = subprocess.run(["ovs-vsctl", "--timeout=5", "--format=json",
                          "--columns=name,external_ids,controller", "list", "bridge"],
                         capture_output=True, text=True, timeout=30)
    return bridge_rows(out.stdout) if out.returncode == 0 and out.stdout.strip() else []


def _read_record(path: str) -> list[str]:
    try:
        with open(path) as fh:
            return list(json.load(fh).get("links", []))
    except (OSError, ValueError, AttributeError):
        return []


def _proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read().rsplit(")", 1)[1].split()
        if stat[0] == "Z":  # a zombie: gone, waiting for its parent
            return None
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        netns = os.readlink(f"/proc/{pid}/ns/net")
    except (OSError, IndexError):
        return None
    mark = ENV.encode() + b"="
    token = next((e[len(mark):].decode() for e in env if e.startswith(mark)), None)
    return Proc(pid, int(stat[1]), token, netns, cmd, stat[19])


def listing() -> Listing:
    """This machine now: bridges, links, processes (about 10-30 ms), the records."""
    records = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(RECORDS):
            if name.endswith(".json"):
                records[name[:-5]] = _read_record(os.path.join(RECORDS, name))
    links = set(re.findall(r"^\d+:\s+([^:@\s]+)", subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=30).stdout,
        re.MULTILINE))
    return Listing({b: t for b, t, _ in list_bridges()}, links, _procs(), records)


def _procs() -> dict:
    """pid -> ``Proc`` of every process of the machine (zombies left out)."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = _proc(int(name))
            if p is not None:
                procs[p.pid] = p
    return procs


def leftovers() -> list[str]:
    """What a cleanup would remove now, in words ([]: nothing)."""
    state = listing()
    return plan(state, claim()).describe(state.procs)


def cleanup() -> list[str]:
    """Remove what ``plan`` says: stop the processes (SIGTERM, then SIGKILL after
    ``KILL_GRACE_S``; Mininet's node shells at once, an interactive bash ignores SIGTERM),
    delete the bridges, then the links, then the records of owners gone. Returns what it
    removed, in words."""
    me = claim()
    state = listing()
    p = plan(state, me)
    said = p.describe(state.procs)
    stop([state.procs[q] for q in p.kill])
    for i in range(0, len(p.bridges), 64):
        args = [a for b in p.bridges[i:i + 64] for a in ("--", "--if-exists", "del-br", b)]
        subprocess.run(["ovs-vsctl", "--timeout=30", *args], capture_output=True, timeout=120)
    if p.links:
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join(
            f"link delete {n}\n" for n in p.links), capture_output=True, text=True,
            timeout=60)
    for t in p.records:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(RECORDS, f"{t}.json"))
    return said


def _same(p: Proc) -> bool:
    """``p`` still runs (not a zombie) and its PID was not reused."""
    now = _proc(p.pid)
    return now is not None and now.start == p.start


def stop(procs: list[Proc]) -> None:
    """SIGTERM each (SIGKILL at once for Mininet's node shells), then SIGKILL what still runs
    after ``KILL_GRACE_S``. Each checked against its start time first: never another process
    that got its PID since the listing."""
    left = []
    for p in procs:
        if _same(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL if "mininet:" in p.cmd else signal.SIGTERM)
            if "mininet:" not in p.cmd:
                left.append(p)
    deadline = time.monotonic() + KILL_GRACE_S
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if _same(p)]
    for p in left:
        if _same(p):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)


def controllers_of_mine(rows, me: str) -> list[str]:
    """The controller records of the bridges ``me`` made (``bridge_rows``)."""
    return [u for _name, token, uuids in rows if token == me for u in uuids]


def max_backoff(ms: int) -> None:
    """Switches of this process's bridges retry a lost controller at most every ``ms`` (Open
    vSwitch waits up to 8 s by default); other bridges' controller records are left as they
    are."""
    uuids = controllers_of_mine(list_bridges(), claim())
    args = [a for u in uuids for a in ("--", "set", "controller", u, f"max_backoff={ms}")]
    if args:
        subprocess.run(["ovs-vsctl", *args], capture_output=True, timeout=30, check=True)
