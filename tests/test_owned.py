"""The harness cleans up only what it made (issue 59, item 12), checked without Open vSwitch or
Mininet: the machine's listings (bridges, links, processes) are faked, and so is every command
that would change it. Beside the harness's own leftovers the machine holds another emulation:
a bridge ``br-user`` and its links, a ``ping``, a ``ryu-manager`` and a Mininet node shell of
someone else, and the bridges, processes and records of a harness run that still runs."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
from types import ModuleType, SimpleNamespace

import pytest

from emulation.harness import fabricnet, ha

NEW = importlib.util.find_spec("emulation.harness.owned") is not None


def _ns() -> str:
    return "".join(c for c in os.readlink("/proc/self/ns/pid") if c.isdigit())


def _token(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return f"{pid}-{fh.read().rsplit(')', 1)[1].split()[19]}-{_ns()}"


ME = _token(os.getpid())
GONE = f"999999999-1-{_ns()}"  # a killed run of the harness: no such process
LIVE = _token(os.getppid())  # another run of the harness, still running
HOME, HOST = "net:[4026531840]", "net:[4026532999]"  # the root namespace, an emulated host's


def _bridges_json(rows) -> str:
    """``ovs-vsctl --format=json --columns=name,external_ids,controller list bridge``."""
    data = [[name, ["map", [["mlroute-emulation", t]] if t else []],
             ["uuid", ctl[0]] if len(ctl) == 1 else ["set", [["uuid", u] for u in ctl]]]
            for name, t, ctl in rows]
    return json.dumps({"headings": ["name", "external_ids", "controller"], "data": data})


class Machine:
    """The faked machine: what the listings show, and every command and signal sent."""

    def __init__(self, bridges, links, procs, records):
        self.bridges, self.links, self.procs, self.records = bridges, links, procs, records
        self.commands, self.batches, self.killed, self.mn_cleanup = [], [], [], 0

    def run(self, args, **kw):
        args = list(args)
        out = ""
        if args[0] == "ovs-vsctl" and "list-br" in args:
            out = "".join(f"{b}\n" for b, _t, _c in self.bridges)
        elif args[0] == "ovs-vsctl" and args[-2:] == ["list", "bridge"]:
            out = _bridges_json(self.bridges)
        elif args[0] == "ovs-vsctl" and args[-2:] == ["list", "controller"]:
            out = "".join(f"{u}\n" for _b, _t, c in self.bridges for u in c)
        elif args[:3] == ["ip", "-o", "link"]:
            out = "".join(f"{i}: {n}@if{i + 100}: <BROADCAST,UP> mtu 9100\n"
                          for i, n in enumerate(sorted(self.links), start=2))
        elif args[0] == "pgrep":
            pattern = args[-1]
            out = " ".join(str(p.pid) for p in self.procs.values() if (
                "mininet:" in p.cmd if "mininet:" in pattern
                else p.cmd.split()[0] in pattern.strip("^$()").split("|")))
        elif args[:2] == ["ip", "-force"]:
            self.batches.append(kw.get("input", ""))
        else:
            self.commands.append(args)
        return subprocess.CompletedProcess(args, 0, out, "")

    def kill(self, pid, sig):
        if pid == os.getpid() or pid not in self.procs:
            raise AssertionError(f"signal {sig} to {pid}: not a process of the fake machine")
        self.killed.append(pid)

    def deleted_bridges(self) -> set:
        return {a[i + 1] for a in self.commands for i, w in enumerate(a) if w == "del-br"}

    def deleted_links(self) -> set:
        return {line.split()[-1] for b in self.batches for line in b.splitlines()}


def P(pid, cmd, token=None, netns=HOME, ppid=1):  # noqa: N802 - a process, as owned.Proc
    if NEW:
        from emulation.harness.owned import Proc
        return Proc(pid, ppid, token, netns, cmd, "1")
    return SimpleNamespace(pid=pid, ppid=ppid, token=token, netns=netns, cmd=cmd)


FOREIGN_PROCS = [P(200, "ping -i 0.2 10.0.0.2"), P(201, "ryu-manager user_app.py"),
                 P(202, "bash --norc -is mininet:h1", netns=HOST)]
FOREIGN_BRIDGES = [("br-user", None, ["u-user"])]
FOREIGN_LINKS = {"br-user-eth1", "h1-eth0", "s1-eth1", "eth0", "lo"}


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A machine with the foreign emulation and a run of the harness still going (``LIVE``);
    the test adds what the harness left."""
    monkeypatch.setenv("MLROUTE_EMULATION", "unset")  # claim() sets it: restored afterwards

    def make(bridges=(), links=(), procs=(), records=None):
        me = P(os.getpid(), "python -m pytest", ppid=os.getppid())
        parent = P(os.getppid(), "bash")
        m = Machine(FOREIGN_BRIDGES + [("l9", LIVE, ["u-live"])] + list(bridges),
                    FOREIGN_LINKS | {"l9-eth1"} | set(links),
                    {p.pid: p for p in [me, parent, *FOREIGN_PROCS,
                                        P(400, "ryu-manager app.py", LIVE), *procs]},
                    {LIVE: ["l9-eth1"], **(records or {})})
        monkeypatch.setattr(subprocess, "run", m.run)
        monkeypatch.setattr(os, "kill", m.kill)
        clean = ModuleType("mininet.clean")
        clean.cleanup = lambda: setattr(m, "mn_cleanup", m.mn_cleanup + 1)
        monkeypatch.setitem(sys.modules, "mininet.clean", clean)
        if NEW:
            from emulation.harness import owned
            for token, links in m.records.items():
                (tmp_path / f"{token}.json").write_text(json.dumps({"links": links}))
            monkeypatch.setattr(owned, "RECORDS", str(tmp_path))
            monkeypatch.setattr(owned, "_procs", lambda: dict(m.procs))
            monkeypatch.setattr(owned, "_same", lambda p: p.pid not in m.killed)
            monkeypatch.setattr(owned, "KILL_GRACE_S", 0.0)
        return m
    return make


def test_another_emulation_on_the_machine_is_no_leftover(machine):
    """Only someone else's emulation and a harness run still going: nothing to clean, and
    cleaning changes nothing (Mininet's cleanup would kill the ping and the controller and
    delete the bridge)."""
    m = machine()
    assert fabricnet.leftovers() == []
    fabricnet.cleanup()
    assert m.mn_cleanup == 0 and not m.killed and not m.deleted_bridges() and not m.batches


def test_a_killed_run_is_cleaned_up_and_nothing_else(machine, tmp_path):
    """A run of the harness killed while it ran: its bridges (marked), their links, a veth
    it recorded before its bridges existed, its controller, node shells and a ping inside an
    emulated host go; the foreign bridge, links, ping, controller and node shell stay, and
    so does everything of the run still going."""
    m = machine(bridges=[("l0", GONE, ["u0"]), ("s0", GONE, ["u1", "u2"])],
                links={"l0-eth1", "s0-eth1", "l1-eth2"},
                procs=[P(300, "ryu-manager app.py", GONE), P(301, "bash -is mininet:h0_0",
                                                            GONE, HOST),
                       P(302, "ping 10.0.1.1", GONE, HOST)],
                records={GONE: ["l1-eth2", "l1-eth3"]})
    left = " ".join(fabricnet.leftovers())
    assert "l0" in left and "br-user" not in left and "l9" not in left, left
    fabricnet.cleanup()
    assert m.mn_cleanup == 0
    assert sorted(m.killed) == [300, 301, 302]
    assert m.deleted_bridges() == {"l0", "s0"}
    assert m.deleted_links() == {"l0-eth1", "s0-eth1", "l1-eth2"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{t}.json" for t in (LIVE, ME))  # the killed run's record went with it


def test_this_process_cleans_its_fabric_not_its_controller(machine):
    """A half-built fabric of this process (its teardown after an interrupted build): its
    bridge, links and node shells go; its controller, which its ``ControllerProcess`` stops,
    stays, and the cleanup may run while it is up."""
    m = machine(bridges=[("l0", ME, ["u0"])], links={"l0-eth1", "l0-eth3"},
                procs=[P(500, "ryu-manager app.py", ME),
                       P(501, "bash -is mininet:l0", ME), P(502, "bash -is mininet:h0_0", ME,
                                                            HOST),
                       P(503, "iperf3 -s", ME, HOST)],
                records={ME: ["l0-eth1", "l0-eth3", "h0_0-eth0"]})
    fabricnet.cleanup()
    assert m.mn_cleanup == 0 and sorted(m.killed) == [501, 502, 503]
    assert m.deleted_bridges() == {"l0"} and m.deleted_links() == {"l0-eth1", "l0-eth3"}


def test_max_backoff_sets_only_this_process_switches(machine):
    """``ha.max_backoff`` rewrote every controller record on the machine; now only those of
    the bridges this process made."""
    m = machine(bridges=[("l0", ME, ["u0"]), ("s0", ME, ["u1", "u2"]),
                         ("x0", GONE, ["u-gone"])])
    ha.max_backoff(1000)
    changed = {a[i + 1] for a in m.commands for i, w in enumerate(a) if w == "controller"
               and "set" in a}
    assert changed == {"u0", "u1", "u2"}, m.commands


def test_a_fabric_s_links_are_recorded_before_mininet_makes_them(machine, monkeypatch,
                                                                 tmp_path):
    """``fabricnet.build`` writes the names of the veths it will make before Mininet makes
    any: a run killed during the build leaves veths and no bridge, and only the record says
    they are the harness's."""
    machine()
    seen = {}

    class FakeMininet:
        def __init__(self, topo, controller):
            seen["record"] = json.loads((tmp_path / f"{ME}.json").read_text())["links"]
            seen["topo"] = topo
    net = ModuleType("mininet.net")
    net.Mininet = FakeMininet
    monkeypatch.setitem(sys.modules, "mininet.net", net)
    fabricnet.build(1, 2, 1, 10)
    assert "l0-eth1" in seen["record"] and "s0-eth2" in seen["record"]
    assert set(seen["record"]) >= {f"{n}-eth{p}" for n, ports in seen["topo"].ports.items()
                                   for p in ports}


def test_the_switches_the_harness_starts_carry_its_mark(monkeypatch):
    """The mark goes in the transaction that adds the bridge (``ClosSwitch.bridgeOpts``),
    only when a harness process started the switch: ``mn --custom`` run by hand marks
    nothing."""
    from topologies import clos
    sw = object.__new__(clos.ClosSwitch)
    sw.__dict__.update(name="l0", dpid="0000000000010000", failMode="secure", inband=False,
                       datapath="user", protocols="OpenFlow13", stp=False)
    monkeypatch.setattr(clos.ClosSwitch, "isOldOVS", lambda self: False)
    monkeypatch.setenv("MLROUTE_EMULATION", ME)
    assert f"external_ids:mlroute-emulation={ME}" in sw.bridgeOpts()
    monkeypatch.delenv("MLROUTE_EMULATION")
    assert "mlroute-emulation" not in sw.bridgeOpts()
    from emulation.harness import owned
    assert (owned.ENV, owned.KEY) == (clos.OWNER_ENV, clos.OWNER_KEY)


def test_an_owner_of_another_pid_namespace_is_never_judged_gone():
    """A token from another PID namespace (a container sharing this Open vSwitch) says
    nothing about this machine's processes: it counts as alive; so does a malformed one."""
    from emulation.harness import owned
    assert not owned.alive(GONE) and owned.alive(ME)
    assert owned.alive("999999999-1-1") and owned.alive("junk")
    listing = owned.Listing(bridges={"l0": "999999999-1-1", "br-user": None})
    assert owned.plan(listing, ME).bridges == []


def test_signals_go_only_to_the_process_listed(monkeypatch):
    """A PID that another process got since the listing is not signalled."""
    from emulation.harness import owned
    sent = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(owned, "KILL_GRACE_S", 0.0)
    monkeypatch.setattr(owned, "_proc", lambda pid: owned.Proc(pid, 1, None, HOME, "x", "7"))
    owned.stop([owned.Proc(10, 1, ME, HOME, "ryu-manager", "7"),
                owned.Proc(11, 1, ME, HOME, "ping", "6"),
                owned.Proc(12, 1, ME, HOST, "bash -is mininet:h0_0", "7")])
    assert sent == [(10, signal.SIGTERM), (12, signal.SIGKILL), (10, signal.SIGKILL)]
