"""The agent against hostile or broken documents and its own failures (issue 72): no document
field reaches an ``ip`` line but as a value the agent formats, a document that fails a check
is refused as a whole (rules kept, the controller told), a batch the kernel refuses half way
is rolled back, every loop is supervised, only SIGTERM removes the rules; and the fast probes'
timing with injected clocks. A fake kernel applies the agent's lines and answers ``ip -j`` as
iproute2 6.1 does, so ``kernel.read_installed`` reads back what was applied."""
import ipaddress
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.agent import main as agent_main
from controller.agent import probe, steering
from controller.agent.kernel import read_installed
from controller.agent.main import Agent, AgentFailed
from controller.client import ControllerError
from controller.errors import InputError
from tests.test_agent_hostports import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = "eth0"
A = r"(?:\d{1,3}\.){3}\d{1,3}"
SID = r"fcbb:bbbb:[0-9a-f:]*"
N = r"\d+"
SAFE = re.compile(  # written here apart from steering.LINE: what a line may be, nothing else
    rf"route replace {A}/32 encap seg6 mode (encap|encap\.red) segs {SID}(,{SID})* "
    rf"dev {DEV} rto_min 35ms table {N}"
    rf"|rule add pref {N} to {A}/32 ipproto (tcp|udp)( sport {N})?( dport {N})? table {N}"
    rf"|rule del pref {N}( to {A}/32 ipproto (tcp|udp)( sport {N})?( dport {N})? table {N})?"
    rf"|route del {A}/32 table {N}")


class FakeKernel:
    """The agent's rules and routes as the kernel would hold them: ``apply`` takes the lines
    in order and stops at the first it cannot do (as ``ip -batch``), or at ``fail_at``."""

    def __init__(self):
        self.rules: dict[int, list[dict]] = {}  # pref -> rules (several may share one)
        self.routes: dict[tuple, dict] = {}  # (table, dst) -> route
        self.lines: list[str] = []
        self.fail_at: int | None = None  # the index (in all lines ever applied) that fails

    def apply(self, lines: list[str]) -> None:
        for line in lines:
            if self.fail_at is not None and len(self.lines) == self.fail_at:
                self.fail_at = None
                raise InputError(f"ip -batch refused: Command failed -:{len(self.lines)}")
            self.lines.append(line)
            w = line.split()
            if w[:2] == ["route", "replace"]:
                kv = dict(zip(w[3::2], w[4::2]))
                self.routes[(kv["table"], w[2].split("/")[0])] = {
                    "dst": w[2].split("/")[0], "encap": "seg6", "mode": kv["mode"],
                    "segs": kv["segs"].split(","), "dev": kv["dev"], "table": kv["table"],
                    "metrics": [{"rto_min": int(kv["rto_min"].removesuffix("ms"))}]}
            elif w[:2] == ["route", "del"]:
                if self.routes.pop((w[-1], w[2].split("/")[0]), None) is None:
                    raise InputError("ip -batch refused: No such process")
            elif w[:2] == ["rule", "add"]:
                kv = dict(zip(w[2::2], w[3::2]))
                rule = {"priority": int(kv["pref"]), "src": "all",
                        "dst": kv["to"].split("/")[0], "ipproto": kv["ipproto"],
                        "table": kv["table"]}
                rule.update({k: int(kv[k]) for k in ("sport", "dport") if k in kv})
                self.rules.setdefault(int(kv["pref"]), []).append(rule)
            elif w[:2] == ["rule", "del"]:
                kv = dict(zip(w[2::2], w[3::2]))
                same = [r for r in self.rules.get(int(kv["pref"]), [])
                        if len(kv) == 1 or (r["dst"], r["ipproto"], r["table"], r.get("sport"),
                                            r.get("dport")) == (
                            kv["to"].split("/")[0], kv["ipproto"], kv["table"],
                            _int(kv.get("sport")), _int(kv.get("dport")))]
                if not same:
                    raise InputError("ip -batch refused: No such file or directory")
                self.rules[int(kv["pref"])].remove(same[0])
                if not self.rules[int(kv["pref"])]:
                    del self.rules[int(kv["pref"])]
            else:
                raise InputError(f"ip -batch refused: {line}")

    def show(self, args):
        if "rule" in args:
            return [{"priority": 0, "src": "all", "table": "local"},
                    *(r for p in sorted(self.rules) for r in self.rules[p]),
                    {"priority": 32766, "src": "all", "table": "main"}]
        return [{"type": "unicast", "dst": "10.0.0.0/24", "dev": DEV, "table": "main"},
                *self.routes.values()]

    def read(self):
        return read_installed(self.show)

    def state(self):
        return json.dumps([sorted(self.rules.items()), sorted(self.routes.items())])


def _int(text):
    return None if text is None else int(text)


class FakeClient:
    """The controller: ``docs`` answer the watches in turn (the last again and again, an
    exception is raised); ``call`` records the reports."""
    url = "http://fake"

    def __init__(self, docs, status=None):
        self.docs, self.posts, self.status = list(docs), [], status

    def segments(self, host, held="", wait=0.0, timeout=None):
        doc = self.docs.pop(0) if len(self.docs) > 1 else self.docs[0]
        if isinstance(doc, Exception):
            raise doc
        if held and isinstance(doc, dict) and doc.get("version") == held:
            time.sleep(min(wait, 0.01))
        return doc

    def call(self, method, path, doc=None, timeout=None):
        self.posts.append((method, path, doc))
        if self.status:
            raise ControllerError("no", self.status, method, path)
        return {}

    def report_traffic(self, host, doc, timeout=None):
        return self.call("POST", f"/v1/hosts/{host}/traffic", doc)

    def report_ports(self, host, ports, timeout=None):
        return self.call("POST", f"/v1/hosts/{host}/ports", {"ports": ports})


P1, P2 = "fcbb:bbbb:3:2:f001::", "fcbb:bbbb:4:2:f001::"


def flow(dst="10.0.1.1", **more):
    return {"job": "r", "dst_ip": dst, "proto": 6, "sport": 0, "dport": 0, "form": "usid",
            "sids": [P1], "backup": {"form": "usid", "sids": [P2]}, **more}


def document(version="e:1", **more):
    return {"host": "h0_0", "version": version, "block": "fcbb:bbbb::/32", "src_ip": "10.0.0.1",
            "addresses": ["10.0.0.1"],
            "flows": [flow(), flow("10.0.1.2", proto=17, sport=40001, dport=5201)],
            "probes": [{"path": ["l0", "s0", "l1"], "dst_ip": "10.0.1.1", "form": "usid",
                        "sids": [P1]},
                       {"path": ["l0", "s1", "l1"], "dst_ip": "10.0.1.1", "form": "usid",
                        "sids": [P2]}],
            "ports": [], "routers": {}, **more}


def agent_on(kernel, docs, **kw) -> Agent:
    return Agent(FakeClient(docs, **kw), "h0_0", DEV, apply=kernel.apply, read=kernel.read,
                 sockets=lambda: [])


# ---- no document field reaches an ip line ---------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)
INJECTIONS = st.sampled_from([
    "h0\nnetns exec x /bin/sh", "10.0.1.1\nnetns exec x sh", "10.0.1.1 table 1",
    f"{P1}\nrule flush", f"{P1} dev lo", "eth0; reboot", "fcbb:cccc::1", "::1", "ff02::1",
    "0.0.0.0", "255.255.255.255", "10.0.1.1/24", "12345", "", " ", "usid\n", "10.0.1.1\x00",
    "fcbb:bbbb::/0", "::/0", "a" * 70000])
VALUES = INJECTIONS | JSON | st.sampled_from([12345, 2**64, -1, 65536, True, 6.0, [6], {}, []])
VALID = {  # per field, values a document may hold: about half the documents are taken
    "dst_ip": ["10.0.1.9", "10.0.2.1"], "proto": [6, 17], "sport": [0, 443, 65535],
    "dport": [0, 5201], "form": ["usid", "classic"], "job": ["job-b"], "dev": ["x"],
    "sids": [[P2], ["fcbb:bbbb:1::", "fcbb:bbbb:2:f001::"]],
    "backup": [None, {"form": "usid", "sids": [P2]}, {"form": "classic", "sids": [P1, P2]}],
    "version": ["e:9", ""], "block": ["fcbb:bbbb::/32", None, "fcbb:bbbb::/48"],
    "src_ip": ["10.0.0.2"], "addresses": [["10.0.0.1", "10.1.0.1"]], "flows": [[]],
    "probes": [[]], "ports": [[]], "routers": [{}, {"100.64.0.3": "s0"}]}


def value_for(key, valid):
    return st.sampled_from(VALID[key]) if valid else st.sampled_from(VALID[key]) | VALUES


FLOW_KEYS = ["dst_ip", "proto", "sport", "dport", "form", "sids", "backup", "dev", "job"]
DOC_KEYS = ["version", "block", "src_ip", "addresses", "flows", "probes", "ports", "routers"]


@st.composite
def hostile(draw):
    doc = json.loads(json.dumps(document("e:2")))
    valid = draw(st.booleans())  # only values a document may hold: mostly taken
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["doc", "flow", "backup"] if valid else
                                     ["doc", "flow", "backup", "probe", "sid", "port"]))
        if where == "doc":
            key = draw(st.sampled_from(DOC_KEYS))
            doc[key] = draw(value_for(key, valid))
        elif where == "flow" and isinstance(doc.get("flows"), list) and doc["flows"]:
            f = doc["flows"][draw(st.integers(0, len(doc["flows"]) - 1))]
            if isinstance(f, dict):
                key = draw(st.sampled_from(FLOW_KEYS))
                f[key] = draw(value_for(key, valid))
        elif where == "backup" and isinstance(doc.get("flows"), list) and doc["flows"]:
            f = doc["flows"][0]
            if isinstance(f, dict) and isinstance(f.get("backup"), dict):
                key = draw(st.sampled_from(["form", "sids"]))
                f["backup"][key] = draw(value_for(key, valid))
        elif where == "probe" and isinstance(doc.get("probes"), list):
            doc["probes"].append(draw(st.fixed_dictionaries(
                {"path": st.just(["l0", "s0", "l1"]) | VALUES, "dst_ip": VALUES | st.just("10.0.1.1"),
                 "form": st.sampled_from(["usid", "classic"]) | VALUES,
                 "sids": st.just([P1]) | VALUES})))
        elif where == "sid" and isinstance(doc.get("flows"), list) and doc["flows"]:
            if isinstance(doc["flows"][-1], dict):
                doc["flows"][-1]["sids"] = [draw(INJECTIONS | st.text(max_size=40))]
        elif where == "port":
            doc["ports"] = [draw(st.fixed_dictionaries(
                {"job": st.just("p") | VALUES, "flow": st.just(
                    {"src": "h0_0", "dst": "h1_0", "proto": 6, "sport": 0, "dport": 5201}) | VALUES,
                 "part": st.just(0) | VALUES, "dst_ip": st.just("10.0.1.1") | VALUES,
                 "proto": st.just(6) | VALUES, "dport": st.just(5201) | VALUES,
                 "path": st.just(["l0", "s0", "l1"]) | VALUES, "sport": st.none() | VALUES}))]
    return doc


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=hostile())
def test_no_document_puts_a_line_of_its_own_into_ip(doc):
    kernel = FakeKernel()
    agent = agent_on(kernel, [document(), doc])
    agent.watch_once(0.0)
    have, state = dict(agent.have), kernel.state()
    agent.watch_once(0.0)  # never raises: a refusal, or an install
    if agent.refused is not None:
        assert agent.have == have and kernel.state() == state and agent.version == "e:1"
        v = doc.get("version")
        assert agent.refused["version"] == (v[:200] if isinstance(v, str) and v.isprintable()
                                            else "")
        assert len(agent.refused["error"]) <= 500
    else:
        assert agent.version == doc["version"]
    bad = [x for x in kernel.lines if not SAFE.fullmatch(x) or not steering.LINE.fullmatch(x)]
    assert bad == []
    for line in kernel.lines:  # every SID in the block, every address a host's
        for word in line.split():
            if ":" in word and not word.startswith("fcbb:bbbb"):
                raise AssertionError(line)
    assert agent.read() == agent.have


def test_a_flows_dev_never_reaches_a_line_and_the_device_must_be_a_name():
    kernel = FakeKernel()
    doc = document(flows=[flow(dev="h0\nnetns exec x /bin/sh")])
    agent = agent_on(kernel, [doc])
    assert agent.step(wait=0)
    assert all(" dev eth0 " in x for x in kernel.lines if x.startswith("route"))
    for dev in ("h0\nnetns exec x sh", "", ".", "..", "a" * 16, "eth0 table", 5):
        with pytest.raises(InputError, match="an interface name"):
            Agent(FakeClient([doc]), "h0_0", dev)
    with pytest.raises(InputError, match="not an agent's ip line"):
        from controller.agent.kernel import ip_batch
        ip_batch(["route replace 10.0.1.1/32 via 1.2.3.4\nnetns exec x sh"])


@pytest.mark.parametrize("change, why", [
    ({"probes": [1]}, "probe 0: expected an object"),
    ({"flows": [flow(proto=[6])]}, r"flow 0 \(job 'r'\): proto \[6\]"),
    ({"addresses": 5}, "addresses must be a list"),
    ({"ports": 7}, "ports must be a list"),
    ({"flows": [flow(dst_ip=12345)]}, "dst_ip 12345 is not an IPv4 address"),
    ({"flows": [flow(sids=["fcbb:cccc:3:2:f001::"])]}, "outside the block fcbb:bbbb::/32"),
    ({"flows": [flow(backup={"form": "usid", "sids": ["2001:db8::1"]})]}, "backup: sids"),
    ({"probes": [{"path": ["l0"], "dst_ip": "10.0.1.1", "form": "usid", "sids": []}]},
     "probe 0: sids must be a list of 1"),
    ({"routers": {"100.64.0.3": "s0\n# job x"}}, "router name"),
    ({"ports": [{"job": "p\n10.0.0.1 10.0.1.1 tcp 1 2"}]}, "job"),
    ({"version": "v" * 201}, "version"),
    ({"flows": [flow(f"10.0.{i // 250}.{1 + i % 250}") for i in range(steering.MAX_PARTS + 1)]},
     "5001 flows, at most 5000"),
])
def test_a_bad_document_is_refused_whole_rules_kept_and_the_controller_told(change, why, caplog):
    kernel = FakeKernel()
    good = document()
    agent = agent_on(kernel, [good, {**document("e:2"), **change}, good, document("e:3")])
    agent.watch_once(0.0)
    have, state = dict(agent.have), kernel.state()
    with caplog.at_level(logging.WARNING, logger="mlroute-agent"):
        agent.watch_once(0.0)
    assert agent.have == have and kernel.state() == state and len(have) == 2
    assert re.search(why, agent.refused["error"]), agent.refused
    assert agent.refused["version"] == change.get("version", "e:2")[:200]
    assert re.search(why, caplog.text)
    agent._report([])  # the next probe report carries it
    assert agent.client.posts[-1] == ("POST", "/v1/hosts/h0_0/probes",
                                      {"paths": [], "refused": agent.refused})
    agent.watch_once(0.0)  # the same version again: nothing to do
    agent.watch_once(0.0)  # a good one: taken, and the controller hears the refusal is over
    assert agent.refused is None and agent.version == "e:3"
    assert agent.client.posts[-1][2] == {"paths": [], "refused": None}
    agent._report([])
    assert agent.client.posts[-1][2] == {"paths": []}  # said once


def test_without_probes_the_watch_tells_the_refusal_itself():
    kernel = FakeKernel()
    agent = agent_on(kernel, [document(), document("e:2", flows=5)])
    agent.watch_once(0.0)
    agent.watch_once(0.0)
    assert agent.client.posts[-1][2]["refused"]["error"].startswith("segments document")


def test_two_lists_for_one_match_are_a_warning_and_one_list_twice_is_not(caplog):
    kernel = FakeKernel()
    other = flow(sids=[P2], backup={"form": "usid", "sids": [P1]}, job="q")
    with caplog.at_level(logging.WARNING, logger="mlroute-agent"):
        agent_on(kernel, [document(flows=[flow(), flow()])]).step(wait=0)
        assert "share the match" not in caplog.text
        agent_on(FakeKernel(), [document(flows=[flow(), other])]).step(wait=0)
    assert "flows 0 and 1 share the match 10.0.1.1 tcp sport 0 dport 0" in caplog.text


def test_a_huge_document_is_refused(monkeypatch):
    monkeypatch.setattr(agent_main, "MAX_DOCUMENT_BYTES", 10_000)
    agent = agent_on(FakeKernel(), [document(padding="x" * 20_000)])
    with pytest.raises(InputError, match="bytes, at most 10,000"):
        agent.step(wait=0)


# ---- slots: make before break always fits ----------------------------------------------------------
def many(n, second=0):
    return [flow(f"10.{1 + second}.{i // 250}.{1 + i % 250}") for i in range(n)]


def test_a_whole_new_set_of_the_most_parts_swaps_make_before_break():
    kernel = FakeKernel()
    n = steering.MAX_PARTS
    agent = agent_on(kernel, [document(flows=many(n)), document("e:2", flows=many(n, 1))])
    agent.step(wait=0)
    agent.step(wait=0)
    assert len(agent.have) == n and agent.read() == agent.have
    first_del = next(i for i, x in enumerate(kernel.lines[2 * n:]) if " del " in x)
    assert first_del == 2 * n  # every new part made before the first removal


def test_a_kernel_filled_by_an_older_agent_is_emptied_of_the_unwanted_first():
    kernel = FakeKernel()
    full = {}
    for second in (0, 1):  # 10,000 parts, every slot taken
        part = steering.wanted(steering.parse({"flows": many(steering.MAX_PARTS, second)}),
                               full, DEV)
        kernel.apply(steering.batch({}, part))
        full.update(part)
    assert len(kernel.read()) == steering.SLOTS
    agent = agent_on(kernel, [document(flows=many(3, 2) + many(2))])
    agent.have = agent.read()
    agent.step(wait=0)
    assert len(agent.have) == 5 and agent.read() == agent.have


# ---- a failed batch rolls back; every table owned is found ----------------------------------------
@pytest.mark.parametrize("fail_at", [0, 1, 3, 5, 6])
def test_a_batch_refused_half_way_rolls_back_exactly(fail_at, caplog):
    kernel = FakeKernel()
    agent = agent_on(kernel, [document(), document("e:2", flows=[
        flow(sids=[P2]), flow("10.0.1.3", dport=7), flow("10.0.1.4", proto=17)])])
    agent.step(wait=0)
    have, state = dict(agent.have), kernel.state()
    kernel.fail_at = len(kernel.lines) + fail_at
    with caplog.at_level(logging.WARNING, logger="mlroute-agent"), pytest.raises(InputError):
        agent.step(wait=0)
    assert kernel.state() == state and agent.have == have and agent.version == "e:1"
    assert "rolled back to the 2 parts installed before" in caplog.text
    assert "the kernel refused its rules" in agent.refused["error"]
    agent.step(wait=0)  # the next try goes through
    assert agent.version == "e:2" and agent.read() == agent.have


def test_tables_without_a_rule_and_rules_without_a_table_are_found_and_removed():
    kernel = FakeKernel()
    agent = agent_on(kernel, [document()])
    agent.step(wait=0)
    kernel.apply(["route replace 10.0.9.9/32 encap seg6 mode encap.red segs fcbb:bbbb:9:: "
                  "dev eth0 rto_min 35ms table 20777",  # a route whose rule never came
                  "rule add pref 10555 to 10.0.9.8/32 ipproto tcp dport 9 table 20555"])
    found = agent.read()
    assert found[("table", 20777, "10.0.9.9/32")].dst == "10.0.9.9/32"
    assert found[("rule", 10555)].pref == 10555
    agent.remove_all()
    assert not any(kernel.rules.values())
    assert kernel.routes == {}


# ---- supervision, and only SIGTERM removes the rules ------------------------------------------------
class FakeProber:
    """Answers every probe down a container in ``alive``; raises in ``send`` ``fail`` times."""

    def __init__(self, alive, fail=0):
        self.alive, self.fail, self.src, self.seq, self.out = set(alive), fail, "", 0, []
        self.lock = threading.Lock()

    def send(self, probes):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("probe loop's work fails")
        seqs = []
        with self.lock:
            for container, _dst, *_back in probes:
                self.seq += 1
                seqs.append(self.seq)
                if container in self.alive:
                    self.out.append(self.seq)
        return seqs

    def receive(self, until):
        time.sleep(max(0.0, until - time.monotonic()))
        with self.lock:
            got, self.out = self.out, []
        return [(seq, time.monotonic()) for seq in got]


class FailingPorts:
    def __init__(self):
        self.src, self.routers, self.calls = "", {}, 0

    def __call__(self, probes):
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("ports loop's work fails")
        return {}


PORTS = [{"job": "p", "flow": {"src": "h0_0", "dst": "h1_0", "proto": 6, "sport": 0,
                               "dport": 5201}, "part": 0, "dst_ip": "10.0.1.1", "proto": 6,
          "dport": 5201, "path": ["l0", "s0", "l1"], "sport": None}]


def test_every_loop_that_raises_is_started_again_and_fail_over_still_works(caplog):
    kernel = FakeKernel()
    reads = iter([RuntimeError("traffic loop's work fails")])

    def sockets():
        for e in reads:
            raise e
        return []
    good = document(ports=PORTS, routers={"100.64.0.3": "s0"})
    agent = Agent(FakeClient([RuntimeError("watch's work fails"), good]), "h0_0", DEV,
                  apply=kernel.apply, read=kernel.read, sockets=sockets)
    agent.restart_s, agent.traffic_s = (0.01, 0.02), 0.01
    prober, ports = FakeProber({P1, P2}, fail=1), FailingPorts()
    runner = threading.Thread(target=agent.run, args=(prober,),
                              kwargs={"port_prober": ports}, daemon=True)
    with caplog.at_level(logging.ERROR, logger="mlroute-agent"):
        runner.start()
        try:
            assert wait_for(lambda: len(agent.restarts) == 4), agent.restarts
            assert "Traceback" in caplog.text and "watch's work fails" in caplog.text
            assert wait_for(lambda: agent.version == "e:1")
            time.sleep(0.2)  # both lists answer: known
            t = time.monotonic()
            prober.alive.discard(P1)  # the primary's link fails
            assert wait_for(lambda: P2 in kernel.lines[-1] and agent.failed, 2.0)
            assert time.monotonic() - t < 0.5
        finally:
            agent.stopping.set()
            runner.join(3)
    assert not runner.is_alive() and not agent.fatal
    assert agent.restarts == {"watch": 1, "probe": 1, "traffic": 1, "ports": 1}
    assert agent.read() == agent.have and len(agent.have) == 2  # stopping removes nothing


def test_a_loop_that_keeps_failing_ends_the_agent_with_its_rules_kept():
    kernel = FakeKernel()
    agent = agent_on(kernel, [document()])
    agent.restart_s = (0.001, 0.002)
    agent.step(wait=0)
    agent.client.docs = [RuntimeError("always")]
    with pytest.raises(AgentFailed, match="watch loop failed 5 times"):
        agent.run(traffic=False)
    assert len(kernel.read()) == 2


def run_main(tmp_path, monkeypatch, run, *extra):
    removed = []
    monkeypatch.setattr(Agent, "run", run)
    monkeypatch.setattr(Agent, "remove_all", lambda self: removed.append(True))
    status = agent_main.main(["--url", "http://127.0.0.1:9", "--host", "h0_0", "--lock",
                              str(tmp_path / "lock"), "--no-probes", "--no-ports", *extra])
    return status, removed


def test_only_sigterm_or_ctrl_c_removes_the_rules(tmp_path, monkeypatch):
    def interrupted(self, *a, **k):
        raise KeyboardInterrupt

    def broken(self, *a, **k):
        raise RuntimeError("a bug")

    def failing(self, *a, **k):
        raise AgentFailed("the probe loop failed 5 times")
    assert run_main(tmp_path, monkeypatch, interrupted) == (0, [True])
    assert run_main(tmp_path, monkeypatch, broken) == (1, [])
    assert run_main(tmp_path, monkeypatch, failing) == (1, [])


def test_credentials_come_from_a_file_or_the_environment(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(Agent, "run", lambda self, *a, **k: seen.append(self.client.token))
    cred = tmp_path / "agent.credential"
    cred.write_text("s3cret\nignored\n")
    monkeypatch.delenv("MLROUTE_TOKEN", raising=False)
    assert run_main(tmp_path, monkeypatch, Agent.run, "--credential-file", str(cred))[0] == 0
    monkeypatch.setenv("MLROUTE_TOKEN_FILE", str(cred))
    assert run_main(tmp_path, monkeypatch, Agent.run)[0] == 0
    assert seen == ["s3cret", "s3cret"]
    with pytest.raises(SystemExit) as e:
        run_main(tmp_path, monkeypatch, Agent.run, "--credential-file", str(tmp_path / "no"))
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        run_main(tmp_path, monkeypatch, Agent.run, "--dev", "eth0\nnetns")


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_credential_is_a_warning_once_saying_what_to_do(status, caplog):
    agent = agent_on(FakeKernel(), [document()], status=status)
    with caplog.at_level(logging.WARNING, logger="mlroute-agent"):
        for _ in range(3):
            agent._report([{"path": ["l0", "s0", "l1"], "ok": True}])
            agent._ports_once(type("K", (), {"handle": lambda self, e, u: (
                [{"job": "p", "flow": {"src": "h0_0", "dst": "h1_0"}, "part": 0, "path": [],
                  "sport": 1}], {}),
                "checked": {}, "probes": 0})(), [], set())
    warnings = [r.getMessage() for r in caplog.records if "credential" in r.getMessage()]
    assert len(warnings) == 2 and all(f"HTTP {status}" in w for w in warnings)
    assert "check --credential-file / mlroute agent-credential h0_0" in warnings[0]


def test_a_second_agent_leaves_the_running_ones_lock_as_it_was(tmp_path):
    path = str(tmp_path / "lock")
    held = agent_main._lock(path)
    with pytest.raises(InputError, match="another mlroute-agent"):
        agent_main._lock(path)
    assert open(path).read() == str(os.getpid())
    held.close()


# ---- fast probes: timing with injected clocks, bounded memory ---------------------------------------
def test_a_list_in_use_fails_within_the_budget_and_others_slowly():
    h = probe.PathHealth()
    fast, slow = ("in use",), ("other",)
    t = 0.0
    while t < 1.0:  # both answer within 1 ms
        for sids in (fast, slow):
            h.sent(sids, t)
            h.answered(sids, t + 0.001, 0.001)
        t = round(t + probe.FAST_S, 3)
    dead_at, failed_at = t, None
    while failed_at is None:  # the in-use list dies: sent every 30 ms, never answered
        h.sent(fast, t)
        if not h.ok(fast, t + 0.001, probe.FAST_FAIL_S):
            failed_at = t + 0.001
        t = round(t + probe.FAST_S, 3)
    assert probe.FAST_FAIL_S <= failed_at - dead_at <= probe.FAST_FAIL_S + 2 * probe.FAST_S
    for at in (dead_at, dead_at + 1.0):  # the other: probed once a second
        h.sent(slow, at)
    assert h.ok(slow, dead_at + 1.0, probe.FAIL_S)  # two misses are no failure
    loaded = probe.PathHealth()  # a loaded queue: answers of 100 ms, steady
    for i in range(50):
        loaded.sent(fast, i * 0.01)
        loaded.answered(fast, i * 0.01 + 0.1, 0.1)
    for at in (dead_at, dead_at + 0.01, dead_at + 0.02):
        loaded.sent(fast, at)
    assert loaded.ok(fast, dead_at + 0.19, probe.FAST_FAIL_S)  # 2 round trips are waited
    assert not loaded.ok(fast, dead_at + 0.21, probe.FAST_FAIL_S)
    assert not loaded.ok(fast, dead_at + 0.22, probe.FAIL_S)  # failed: until it answers
    loaded.answered(fast, dead_at + 0.3, 0.1)
    assert loaded.ok(fast, dead_at + 0.3, probe.FAST_FAIL_S)
    jumpy = probe.PathHealth()  # answers of 10 to 100 ms: the deviation is waited too
    for i, rtt in enumerate([0.01, 0.1] * 10):
        jumpy.answered(fast, i * 0.1, rtt)
    for at in (dead_at, dead_at + 0.01, dead_at + 0.02):
        jumpy.sent(fast, at)
    srtt, dev = jumpy.rtt[fast]
    assert srtt + 4 * dev > 2 * srtt and jumpy.ok(fast, dead_at + srtt + 4 * dev - 0.01,
                                                  probe.FAST_FAIL_S)
    assert not jumpy.ok(fast, dead_at + srtt + 4 * dev + 0.01, probe.FAST_FAIL_S)


def test_a_dead_list_costs_constant_memory_and_forgotten_lists_nothing():
    h = probe.PathHealth()
    h.answered(("dead",), 0.0)
    for i in range(100_000):
        h.sent(("dead",), i * 0.03)
    assert h.unanswered == {("dead",): (100_000, 0.0)}
    h.forget({("alive",)})
    assert (h.last_ok, h.unanswered, h.ok_since) == ({}, {}, {})
    sent = {seq: (("x",), seq * 0.0001) for seq in range(20_000)}
    probe.forget_old(sent, 2.0)
    assert len(sent) <= probe.MAX_SENT and min(sent) == 20_000 - probe.MAX_SENT


def test_the_probe_rate_is_bounded_and_every_list_in_use_gets_its_turn():
    s = probe.Schedule()
    in_use = [(f"u{i}",) for i in range(100)]
    others = [(f"o{i}",) for i in range(1000)]
    seen, t, most = set(), 0.0, 0
    backups = [(f"b{i}",) for i in range(100)]
    rounds = -(-len(in_use) // probe.FAST_LISTS)
    for _ in range(rounds):
        picked = s.pick(in_use, backups, others, t)
        most = max(most, len(picked))
        seen |= set(picked) & set(in_use)
        t += probe.FAST_S
    assert seen == set(in_use)  # 100 lists in 7 rounds of 16
    per_round = probe.FAST_LISTS + probe.STANDBY_PER_ROUND + probe.SLOW_PER_ROUND
    assert most <= per_round and per_round / probe.FAST_S <= 2700  # the documented bound
    s2 = probe.Schedule()
    n = probe.SLOW_PER_ROUND
    firsts = [s2.pick([], [], others[:n], at) for at in (0.0, 0.5, 1.0)]
    assert [len(x) for x in firsts] == [n, 0, n]  # the others once a second
    s3, backup = probe.Schedule(), [("b",)]
    rounds = [s3.pick([("a",)], backup, [], i * probe.FAST_S) for i in range(7)]
    assert [("b",) in r for r in rounds] == [True, False, False, True, False, False, True]


def test_a_forged_reply_does_not_break_the_probes():
    p = probe.Prober.__new__(probe.Prober)
    p.ident = 7

    class Rx:
        def __init__(self):
            self.packets = [b"", b"\x45" + b"\x00" * 3, b"\x4f" + b"\x00" * 40]

        def recvmsg(self, n, ancillary):
            if not self.packets:
                raise BlockingIOError
            return self.packets.pop(0), [], 0, None
    p.rx = Rx()
    import select as select_module
    real = select_module.select
    try:
        probe.select.select = lambda r, w, x, t: (r if r[0].packets else [], [], [])
        assert p.receive(time.monotonic() + 0.05) == [] and p.rx.packets == []
    finally:
        probe.select.select = real


# ---- the service unit --------------------------------------------------------------------------------
UNIT = os.path.join(REPO, "integrations", "systemd", "mlroute-agent.service")


def test_the_service_unit_restarts_on_failure_and_stops_with_sigterm(tmp_path):
    sections, section = {}, None
    for line in open(UNIT).read().splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = sections.setdefault(line[1:-1], {})
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            section.setdefault(key, []).append(value)
    s = sections["Service"]
    assert s["Type"] == ["simple"] and s["Restart"] == ["on-failure"]
    assert s["KillSignal"] == ["SIGTERM"] and s["RestartSec"] == ["1"]
    assert "--credential-file /etc/mlroute/agent.credential" in s["ExecStart"][0]
    assert "--host %H" in s["ExecStart"][0]
    assert "CAP_NET_ADMIN" in s["AmbientCapabilities"][0]
    assert "CAP_NET_RAW" in s["CapabilityBoundingSet"][0]
    assert "AF_NETLINK" in s["RestrictAddressFamilies"][0]
    assert "WantedBy" in sections["Install"]
    if shutil.which("systemd-analyze"):
        unit = tmp_path / "mlroute-agent.service"
        unit.write_text(open(UNIT).read().replace("/usr/local/bin/mlroute-agent", "/bin/true"))
        p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                           text=True, timeout=60)
        problems = [x for x in p.stderr.splitlines() if "mlroute-agent.service" in x]
        assert problems == [], p.stderr


def test_the_ips_and_sids_formatted_are_the_agents():
    steers = steering.parse({"flows": [flow(sids=["FCBB:BBBB:3:2:F001:0:0:0"])]})
    line = steering.batch({}, steering.wanted(steers, {}, DEV))[0]
    assert "segs fcbb:bbbb:3:2:f001:: " in line and isinstance(steers[0].match[0],
                                                                ipaddress.IPv4Address)


def _first_failure(delay, probe_s, fail_s, dead_at=None, until=3.0):
    """When ``PathHealth`` first judges a list in use failed, probed every ``probe_s``, each
    probe answered ``delay(sent)`` later unless sent at or after ``dead_at``; None: never."""
    h, list_ = probe.PathHealth(), ("in use",)
    answers, t = [], 0.0
    while t < until:
        h.sent(list_, t)
        if dead_at is None or t < dead_at:
            answers.append((t + delay(t), t))
        answers.sort()
        now = t + probe_s
        while answers and answers[0][0] <= now:
            heard, sent = answers.pop(0)
            h.answered(list_, heard, heard - sent)
        if h.known(list_) and not h.ok(list_, now, fail_s):
            return round(now, 3)
        t = round(t + probe_s, 4)
    return None


def test_a_growing_queue_is_no_failure_and_a_dead_list_fails_in_time():
    def ramp(rate, most):  # a queue growing by ``rate`` ms a millisecond from 1 s on
        return lambda t: 0.001 if t < 1.0 else min(most, 0.001 + rate * (t - 1.0))
    now = (probe.FAST_S, probe.FAST_FAIL_S)
    for rate in (0.5, 1, 3, 5):
        for most in (0.05, 0.1, 0.2):
            assert _first_failure(ramp(rate, most), *now) is None, (rate, most)
    assert _first_failure(ramp(5, 0.2), 0.03, 0.09) is not None  # 3 x 30 ms, 90 ms: failed
    assert _first_failure(ramp(3, 0.05), 0.01, 0.03) is not None  # 3 x 10 ms, 30 ms: failed
    assert _first_failure(lambda t: 0.001 if t < 1.0 else 0.07, *now) is not None  # a jump
    for queue in (0.001, 0.03):  # idle, and the outage benchmark's queue
        failed = _first_failure(lambda t, q=queue: q, *now, dead_at=2.0)
        assert failed - 2.0 <= probe.FAST_FAIL_S + 2 * queue + 2 * probe.FAST_S, (queue, failed)


def test_the_hosts_own_port_down_moves_nothing_and_blames_no_link():
    """Both lists fall silent at once (the host's own port): the primary, probed more often,
    fails first, but its backup has not answered since, so the part stays; the report never
    says one path failed and another to that leaf works (the controller would blame links)."""
    kernel = FakeKernel()
    agent = agent_on(kernel, [document()])
    prober = FakeProber({P1, P2})
    runner = threading.Thread(target=agent.run, args=(prober,), kwargs={"traffic": False},
                              daemon=True)
    runner.start()
    try:
        assert wait_for(lambda: agent.version == "e:1")
        time.sleep(0.3)  # both lists answer: known
        lines = len(kernel.lines)
        prober.alive.clear()  # the host's port goes down
        time.sleep(0.5)
        assert not agent.failed and len(kernel.lines) == lines  # nothing moved
        reports = [doc["paths"] for _m, path, doc in agent.client.posts if path.endswith("probes")]
        assert any(r and not any(p["ok"] for p in r) for r in reports)  # both failed, said
        assert not any({p["ok"] for p in r if p["path"][-1] == "l1"} == {True, False}
                       for r in reports)
    finally:
        agent.stopping.set()
        runner.join(3)
