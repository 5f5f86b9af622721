"""The agent's host mode on routers (``agent/hostports.py``, ``Agent.ports_loop``) against an
in-process controller on routers and a fake prober whose "routers" hash the 5-tuple: the
agent learns a port per part, the controller keeps and serves it, the application's file
lists it; when the hash changes, the next document's re-check finds out and learns again."""
import json
import threading
import time
import zlib

from controller.agent import hostports
from controller.agent.hostports import PortKeeper, confirm
from controller.agent.main import Agent
from controller.agent.portmap import Target
from controller.client import ControllerError
from controller.service import api
from tests.test_hostreports import JOB, call, service


class InProcess:
    """The client calls an agent makes, answered by ``api.handle`` of a live service."""
    url = "in-process"

    def __init__(self, svc):
        self.svc, self.reports = svc, []

    def _answer(self, status, doc, method, path):
        if status >= 400:
            raise ControllerError(doc["error"], status, method, path, doc)
        return doc

    def segments(self, host, held="", wait=0.0, timeout=None):
        path = f"/v1/hosts/{host}/segments"
        return self._answer(*api.handle(self.svc, "GET", path), "GET", path)

    def report_ports(self, host, ports, timeout=None):
        self.reports.append(ports)
        path = f"/v1/hosts/{host}/ports"
        return self._answer(*call(self.svc, "POST", path, {"ports": ports}), "POST", path)


class FakeRouters:
    """A ``portmap.Prober``: hop 2 (the spine) of a probe is chosen by a hash of its
    destination, protocol, ports and ``seed``; answers come from the spines' addresses."""

    def __init__(self, seed=0):
        self.seed, self.src, self.routers, self.sent = seed, "", {}, []

    def __call__(self, probes):
        self.sent += probes
        out = {}
        for key, sport, ttl in probes:
            if ttl == 2:
                h = zlib.crc32(repr((self.src, key, sport, self.seed)).encode())
                out[(key, sport, ttl)] = self.routers.get(("100.64.0.3", "100.64.0.4")[h % 2])
        return out

    def spine(self, entry, sport):
        key = (entry["dst_ip"], entry["proto"], entry["dport"])
        return self([(key, sport, 2)])[(key, sport, 2)]


def sports(svc):
    return {r["dport"]: r["sport"] for r in call(svc, "GET", "/v1/jobs/p")[1]["routes"]}


def wait_for(what, timeout=5.0):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if what():
            return True
        time.sleep(0.01)
    return False


def test_the_agent_learns_reports_and_exports_each_parts_port(tmp_path, monkeypatch):
    f, svc = service()
    assert call(svc, "POST", "/v1/jobs", JOB)[0] == 201
    client, routers = InProcess(svc), FakeRouters()
    path = tmp_path / "ports"
    agent = Agent(client, "h0_0", "eth0", apply=lambda lines: None, read=lambda: {},
                  ports_file=str(path))
    agent.step(wait=0)
    loop = threading.Thread(target=agent.ports_loop, args=(routers,), daemon=True)
    loop.start()
    try:
        assert wait_for(lambda: None not in sports(svc).values()), client.reports
        entries = {e["dport"]: e for e in call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"]}
        for dport, sport in sports(svc).items():  # each port goes where its part is planned
            assert routers.spine(entries[dport], sport) == entries[dport]["path"][1]
        assert routers.src == "10.0.0.1" and {p[2] for p in routers.sent} == {2}
        assert wait_for(path.exists)
        text = call(svc, "GET", "/v1/jobs/p/ports")[1]
        assert path.read_text().splitlines()[2:] == text.splitlines()[1:]
        assert path.read_text().splitlines()[1] == "# job p"
        # its own report's version: nothing probed again (learned within FRESH_S)
        agent.step(wait=0)
        n = len(routers.sent)
        time.sleep(0.3)
        assert len(routers.sent) == n and len(client.reports) == 1
        # the routers hash otherwise now (a next hop changed): the next document's re-check
        before = sports(svc)
        routers.seed = 1
        monkeypatch.setattr(hostports, "FRESH_S", 0.0)  # as if the ports were checked long ago
        assert call(svc, "POST", "/v1/jobs", {"id": "q", "flows": [  # a new version of
            {"src": "h1_1", "dst": "h0_0", "bytes": 1e6}]})[0] == 201  # h0_0's document
        agent.step(wait=0)
        assert wait_for(lambda: all(routers.spine(entries[d], s) == entries[d]["path"][1]
                                    for d, s in sports(svc).items())), (before, sports(svc))
        assert sports(svc) != before and len(client.reports) == 2  # learned again, reported
    finally:
        agent.stopping.set()
        loop.join(3)
    assert not loop.is_alive()  # stops with the others (SIGTERM sets ``stopping``)


def test_a_port_that_answers_elsewhere_is_learned_again_and_silence_keeps_it():
    t = Target("10.0.1.1", 6, 5201, ("s1",))
    name = ("p", ("h0_0", "h1_0", 6, 0, 5201), 0)
    entry = {"job": "p", "flow": dict(zip(("src", "dst", "proto", "sport", "dport"), name[1])),
             "part": 0, "dst_ip": t.dst_ip, "proto": 6, "dport": 5201,
             "path": ["l0", "s1", "l1"], "sport": 49152}
    parity = lambda probes: {p: f"s{p[1] % 2}" for p in probes}
    assert confirm({name: (t, 49152)}, parity) == {name: ("s0",)}
    assert confirm({name: (t, 49152)}, lambda probes: {}) == {}  # 3 rounds, no answer
    keeper = PortKeeper(parity)
    report, ports = keeper.handle([entry])  # 49152 goes to s0 now: 49153 instead
    assert [r["sport"] for r in report] == [49153] and ports == {name: 49153}
    silent = PortKeeper(lambda probes: {})
    assert silent.handle([entry]) == ([], {name: 49152})  # unanswered: kept as it was
    assert json.dumps(report)  # what goes to the controller is JSON


def test_a_held_port_that_goes_elsewhere_with_no_other_found_is_withdrawn():
    f, svc = service()
    assert call(svc, "POST", "/v1/jobs", JOB)[0] == 201
    parity = lambda probes: {p: f"s{p[1] % 2}" for p in probes}
    keeper = PortKeeper(parity)
    entries = call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"]
    report, _ = keeper.handle(entries)
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": report})[0] == 200
    entries = call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"]
    on_s1 = next(e for e in entries if e["path"][1] == "s1")
    # a link failed under the leaf: every port now hashes to s0, the plan is unchanged
    keeper.clock = lambda: time.monotonic() + 2 * hostports.FRESH_S  # checked long ago
    keeper.network = lambda probes: {p: "s0" for p in probes}
    report, ports = keeper.handle(entries)
    assert report == [{"job": "p", "flow": on_s1["flow"], "part": 0, "path": on_s1["path"],
                       "sport": None}]  # withdrawn: nothing reaches s1 now
    assert hostports.name_of(on_s1) not in ports and len(ports) == 1
    text = hostports.export("h0_0", "10.0.0.1", entries, ports)
    assert str(on_s1["sport"]) not in text and len(text.splitlines()) == 3  # not the app's
    assert json.dumps(report)
    assert call(svc, "POST", "/v1/hosts/h0_0/ports", {"ports": report})[0] == 200
    after = {e["dport"]: e["sport"] for e in call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"]}
    assert after[on_s1["dport"]] is None and None not in (
        after[d] for d in after if d != on_s1["dport"])
    # the next document: the part has no port, so nothing is withdrawn again
    report, ports = keeper.handle(call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"])
    assert report == [] and len(ports) == 1
    # no answer at all for a held port is no evidence of another path: kept, not withdrawn
    silent = PortKeeper(lambda probes: {})
    entries = call(svc, "GET", "/v1/hosts/h0_0/segments")[1]["ports"]
    assert silent.handle(entries) == ([], {hostports.name_of(e): e["sport"] for e in entries
                                           if e["sport"]})


def test_sigterm_removes_the_ports_file_and_a_round_still_running_writes_it_no_more(tmp_path):
    """``remove_all`` (SIGTERM) takes the file away while the ports loop may still be in a
    round (its probes, its report: longer than the 2 s the agent waits for its loops): that
    round's end must not write it back."""
    from tests.test_agent_safety import PORTS
    path = tmp_path / "ports"
    agent = Agent(None, "h0_0", "eth0", apply=lambda lines: None, read=lambda: {},
                  ports_file=str(path))
    keeper = type("K", (), {"handle": lambda self, entries, used: (
        [], {hostports.name_of(e): 49153 for e in entries}), "checked": {}, "probes": 0})()
    assert agent._ports_once(keeper, PORTS, set())
    assert "10.0.1.1 tcp 49153 5201" in path.read_text()
    agent.stopping.set()  # SIGTERM
    agent.remove_all()
    assert not path.exists()
    agent._ports_once(keeper, PORTS, set())  # the round that was still running ends
    assert not path.exists()


def test_the_ports_loop_reads_a_document_once_not_each_wait(monkeypatch):
    """The ports thread wakes at least once a second: a version it has done costs nothing
    (its routers, up to 65,536 of them, and its parts were read again each wake before)."""
    from controller.agent import main as agent_main
    from tests.test_agent_safety import PORTS, FakeClient, FakeKernel, document
    monkeypatch.setattr(agent_main, "PORTS_WAIT_S", 0.005)
    kernel = FakeKernel()
    agent = Agent(FakeClient([document(ports=PORTS, routers={"100.64.0.3": "s0"})]), "h0_0",
                  "eth0", apply=kernel.apply, read=kernel.read, sockets=lambda: [])
    agent.step(wait=0)
    reads = []

    class Routers(FakeRouters):
        def __setattr__(self, name, value):
            if name == "routers":
                reads.append(value)
            object.__setattr__(self, name, value)
    prober = Routers()
    loop = threading.Thread(target=agent.ports_loop, args=(prober,), daemon=True)
    loop.start()
    try:
        time.sleep(0.3)  # about 60 wakes
    finally:
        agent.stopping.set()
        loop.join(3)
    assert not loop.is_alive()
    assert reads[1:] == [{"100.64.0.3": "s0"}]  # (the prober's own empty map first)
