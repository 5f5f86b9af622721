"""Who may do what over REST (issue 72): per-host credentials (an HMAC of the host's name),
client certificates naming hosts, TLS, and the client's list of URLs, on a real REST server
over loopback sockets (threads or the native front) with the fake switch tables."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from controller.cli import main as cli_main
from controller.client import Client, ControllerError, ControllerUnreachable
from controller.model.clos import Clos
from controller.service import credentials
from controller.service.credentials import ADMIN, ANONYMOUS, Policy, Principal, decide, who
from controller.service.route_service import RouteService
from controller.shell.rest import RestServer
from controller.shell.restsecurity import tls_context
from emulation.harness.fake_switch import FakeSwitches
from emulation.harness.pki import make_pki

ADMIN_TOKEN = "admin-token-0123456789"
SECRET = b"host-secret-0123456789abcdef"


def _service():
    f = Clos.generate(2, 4, 2, 0.01, wiring=True)
    svc = RouteService(FakeSwitches(f.dpids.values()), f)
    for d in f.dpids.values():
        svc.switch_connected(d, {p: True for p in f.ports[f.switch_of_dpid[d]].values()})
    return svc


def _serve(policy, native=False, tls=None):
    rest = RestServer(_service(), "127.0.0.1", 0, native=native, policy=policy, tls=tls)
    rest.sock.settimeout(0.05)
    if native:
        rest.start()
        return rest, None
    thread = threading.Thread(target=rest.serve, daemon=True)
    thread.start()
    return rest, thread


def _stop(rest, thread):
    rest.stop()
    if thread is not None:
        thread.join(timeout=5)
        assert not thread.is_alive()


@pytest.fixture(params=[False, True], ids=["threads", "native"])
def server(request):
    rest, thread = _serve(Policy(admin_token=ADMIN_TOKEN, host_secrets=(SECRET,)),
                          native=request.param)
    try:
        yield rest
    finally:
        _stop(rest, thread)


def _client(rest, token=None, **kw):
    return Client(f"http://127.0.0.1:{rest.port}", token=token, timeout=10, **kw)


def _cred(host):
    return credentials.host_credential(SECRET, host)


RING = {"id": "r", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"], "bytes": 1e6}
PROBES = {"paths": [{"path": ["l0", "s0", "l1"], "ok": True}]}


def test_a_host_reads_and_reports_only_for_itself_and_writes_no_job(server):
    admin, h0 = _client(server, ADMIN_TOKEN), _client(server, _cred("h0_0"))
    assert admin.request("POST", "/v1/jobs", RING)[0] == 201
    status, doc = h0.request("GET", "/v1/hosts/h0_0/segments")
    assert status == 200 and doc["host"] == "h0_0"
    status, doc = h0.request("GET", "/v1/hosts/h1_0/segments")  # another host's plan
    assert status == 403 and "may not act for host 'h1_0'" in doc["error"]
    before = json.dumps(admin.jobs(), sort_keys=True)
    for method, path, body in (("POST", "/v1/hosts/h1_0/probes", PROBES),
                               ("POST", "/v1/hosts/h1_0/traffic", {"pairs": []}),
                               ("POST", "/v1/hosts/h1_0/ports", {"ports": []}),
                               ("POST", "/v1/jobs", {**RING, "id": "h"}),
                               ("DELETE", "/v1/jobs/r", None), ("PUT", "/v1/fabric", {}),
                               ("GET", "/v1/jobs", None), ("GET", "/v1/routes", None)):
        status, doc = h0.request(method, path, body)
        assert status == 403, (method, path, status, doc)
    assert json.dumps(admin.jobs(), sort_keys=True) == before  # nothing changed
    assert set(server.refusals) == {"h1_0"} and server.refusals["h1_0"]["count"] == 4
    assert h0.request("GET", "/v1/ready")[0] in (200, 503)


def test_the_admin_reports_for_no_host_and_nobody_reads_without_a_credential(server):
    admin = _client(server, ADMIN_TOKEN)
    status, doc = admin.request("POST", "/v1/hosts/h0_0/probes", PROBES)
    assert status == 403 and "agent-credential" in doc["error"]
    assert admin.request("GET", "/v1/hosts/h0_0/segments")[0] == 200  # an operator looks
    anonymous = _client(server)
    for path in ("/v1/jobs", "/v1/fabric", "/v1/hosts/h0_0/segments"):
        status, doc = anonymous.request("GET", path)
        assert status == 401 and "Bearer" in doc["error"], path
    assert anonymous.request("GET", "/v1/ready")[0] in (200, 503)  # readiness probes
    assert anonymous.request("GET", "/metrics")[0] == 200
    forged = _cred("h0_0")[:-4] + "h1_0"  # h0_0's MAC under h1_0's name
    for token in (forged, "mlh1.AAAA.h0_0", "Bearer", "x" * 300, ADMIN_TOKEN + "x"):
        status, doc = _client(server, token).request("GET", "/v1/hosts/h1_0/segments")
        assert status == 401, token
    status, _ = _client(server, _cred("h0_0")).request("POST", "/v1/hosts/h0_0/probes",
                                                       PROBES)
    assert status != 401 and status != 403  # its own report goes through (its rules apply)


def test_decide_without_credentials_is_open_and_health_can_be_closed():
    open_ = Policy()
    assert decide(open_, ANONYMOUS, "POST", "post_job", {}) is None
    assert decide(open_, ANONYMOUS, "POST", "post_probes", {"host": "h"}) is None
    closed = Policy(admin_token="t", open_health=False)
    assert decide(closed, ANONYMOUS, "GET", "get_ready", {})[0] == 401
    assert decide(closed, ADMIN, "GET", "get_ready", {}) is None
    # one admin token and no host credentials: the agents hold it and report with it
    assert decide(closed, ADMIN, "POST", "post_probes", {"host": "h"}) is None
    per_host = Policy(admin_token="t", host_secrets=(b"k" * 16,))
    assert decide(per_host, ADMIN, "POST", "post_probes", {"host": "h"})[0] == 403
    assert decide(per_host, Principal("host", "h"), "GET", "get_ready", {}) is None
    assert decide(per_host, None, "GET", "get_ready", {})[0] == 401  # a wrong credential


def test_who_checks_every_secret_and_a_certificate_naming_another_host():
    old, new = b"o" * 16, b"n" * 16
    cred = credentials.host_credential(old, "h3")
    assert who(f"Bearer {cred}", None, [new, old]) == Principal("host", "h3")  # rotation
    assert who(f"Bearer {cred}", None, [new]) is None  # the old secret dropped
    assert who(None, "h3", [new]) == Principal("host", "h3")  # a client certificate
    assert who(f"Bearer {cred}", "h4", [old]) is None  # the two name different hosts
    assert who("Bearer t", None, [], "t") == ADMIN
    assert who("Basic dXNlcg==", None, [old], "t") is None
    assert who("Bearer \u20ac".encode().decode("latin-1"), None, [old], "t") is None
    with pytest.raises(ValueError, match="printable ASCII"):
        credentials.host_credential(old, "h 0")


def test_agent_credential_command(tmp_path, capsys):
    secrets = tmp_path / "secrets"
    secrets.write_text("# current first\n" + SECRET.decode() + "\nolder-secret-0123456789\n")
    assert cli_main(["agent-credential", "h0_0", "--secret-file", str(secrets)]) == 0
    assert capsys.readouterr().out.strip() == _cred("h0_0")
    fabric = tmp_path / "fabric.json"
    fabric.write_text(json.dumps(Clos.leaf_spine(2, 2, 2).to_dict()))
    assert cli_main(["agent-credential", "--secret-file", str(secrets), "--fabric",
                     str(fabric), "--out", str(tmp_path / "creds")]) == 0
    made = sorted(p.name for p in (tmp_path / "creds").iterdir())
    assert made == ["h0_0.credential", "h0_1.credential", "h1_0.credential",
                    "h1_1.credential"]
    path = tmp_path / "creds" / "h1_1.credential"
    assert path.read_text().strip() == _cred("h1_1") and path.stat().st_mode & 0o077 == 0
    assert cli_main(["agent-credential", "nowhere", "--secret-file", str(secrets),
                     "--fabric", str(fabric)]) == 2
    assert "no host 'nowhere'" in capsys.readouterr().err
    (tmp_path / "short").write_text("short\n")
    assert cli_main(["agent-credential", "h0_0", "--secret-file",
                     str(tmp_path / "short")]) == 2
    assert "shorter than 16" in capsys.readouterr().err


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, the server's certificate for 127.0.0.1 and a client certificate for h0_0."""
    d = tmp_path_factory.mktemp("pki")
    make_pki(str(d), "127.0.0.1", client_hosts=["h0_0"])
    return d


@pytest.mark.parametrize("native", [False, True], ids=["threads", "native"])
def test_tls_with_client_certificates_naming_hosts(pki, native):
    tls = tls_context(str(pki / "server.pem"), str(pki / "server.key"), str(pki / "ca.pem"),
                      native=native)
    rest, thread = _serve(Policy(admin_token=ADMIN_TOKEN, host_secrets=(SECRET,),
                                 client_certificates=True), native=native, tls=tls)
    try:
        url = f"https://127.0.0.1:{rest.port}"
        admin = Client(url, ADMIN_TOKEN, timeout=10, ca_file=str(pki / "ca.pem"))
        assert admin.request("POST", "/v1/jobs", RING)[0] == 201
        host = Client(url, timeout=10, ca_file=str(pki / "ca.pem"),
                      cert_file=str(pki / "h0_0.pem"), key_file=str(pki / "h0_0.key"))
        doc = host.segments("h0_0")
        assert doc["host"] == "h0_0" and "flows" in doc  # the certificate names the host
        with pytest.raises(ControllerError) as e:
            host.segments("h1_0")
        assert e.value.status == 403
        with pytest.raises(ControllerError) as e:  # a credential naming another host
            Client(url, _cred("h1_0"), timeout=10, ca_file=str(pki / "ca.pem"),
                   cert_file=str(pki / "h0_0.pem"), key_file=str(pki / "h0_0.key")
                   ).segments("h1_0")
        assert e.value.status == 401
        with pytest.raises(ControllerUnreachable, match="TLS"):  # the server is not trusted
            Client(url, ADMIN_TOKEN, timeout=10).jobs()
        plain = Client(f"http://127.0.0.1:{rest.port}", ADMIN_TOKEN, timeout=5)
        with pytest.raises(ControllerError):  # plain HTTP to a TLS port gets no answer
            plain.jobs()
        assert admin.jobs()["jobs"]  # the server still serves after those
    finally:
        _stop(rest, thread)


def test_a_frozen_first_controller_costs_one_timeout_then_goes_last(server):
    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(16)  # accepts (the kernel does) and never answers
    try:
        c = Client(f"http://127.0.0.1:{frozen.getsockname()[1]},http://127.0.0.1:{server.port}",
                   ADMIN_TOKEN, timeout=0.5)
        start = time.monotonic()
        assert "jobs" in c.jobs()  # a read: asked of the next URL at once
        first = time.monotonic() - start
        start = time.monotonic()
        assert "jobs" in c.jobs()
        assert time.monotonic() - start < first / 2  # the frozen one now goes last
        c2 = Client(c.url, ADMIN_TOKEN, timeout=0.5)
        with pytest.raises(ControllerUnreachable):  # a write is never sent twice
            c2.add_job(RING)
        assert c2.add_job(RING)["id"] == "r"  # the next write goes to the live one
    finally:
        frozen.close()


def test_two_srv6_jobs_with_one_five_tuple_are_refused_and_change_nothing():
    """Issue 72, item 7: planned apart but steered together (the agent installs one list per
    destination, protocol and ports). The second job is refused naming the flow."""
    from controller.service import api
    from tests.test_srv6 import service_on, wired
    svc = service_on(wired(Clos.leaf_spine(2, 2, 2)))
    one = {"id": "one", "mode": "srv6", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1e6}]}
    assert api.handle(svc, "POST", "/v1/jobs", json.dumps(one).encode())[0] == 201
    before = api.handle(svc, "GET", "/v1/routes")[1]
    two = {**one, "id": "two"}
    status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(two).encode())
    assert status == 409 and "h0_0 -> h1_0" in doc["error"] and "job one's" in doc["error"]
    assert api.handle(svc, "GET", "/v1/routes")[1] == before
    two["flows"][0]["dport"] = 5000  # told apart by a port: both run
    assert api.handle(svc, "POST", "/v1/jobs", json.dumps(two).encode())[0] == 201


def test_srv6_on_several_planes_is_accepted_and_each_part_names_its_plane():
    """Issue 73, eight planes: refused while the agent steered on one interface (parts of
    plane 1 and up were black-holed); now each part and probe names its plane, whose
    interface the agent takes."""
    from controller.agent import steering
    from controller.errors import InputError
    from controller.service import api
    from controller.shell.static import StaticSwitches
    from tests.test_srv6 import wired
    fabric = wired(Clos.leaf_spine(2, 2, 2, planes=2))
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6")
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    pairs = [("h0_0", "h1_0"), ("h0_0", "h1_1"), ("h0_1", "h1_0"), ("h0_1", "h1_1")]
    job = {"id": "s", "mode": "srv6", "flows": [{"src": a, "dst": b, "bytes": 1e6}
                                                  for a, b in pairs]}
    status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(job).encode())
    assert status == 201, doc
    assert {r["plane"] for r in doc["routes"]} == {"plane0", "plane1"}
    for host in ("h0_0", "h0_1"):
        seg = api.handle(svc, "GET", f"/v1/hosts/{host}/segments")[1]
        read = steering.read(seg)
        for f, s in zip(seg["flows"], read.steers):
            assert s.plane == f["plane"] == fabric.plane_of[f["path"][0]]
            assert f["dst_ip"] == fabric.ip_of(f["dst"], f["plane"])
        want = steering.wanted(read.steers, {}, (f"{host}-eth0", f"{host}-eth1"))
        assert {w.route.split(" dev ")[1].split()[0] for w in want.values()} == \
            {f"{host}-eth{s.plane}" for s in read.steers}
        with pytest.raises(InputError, match="on plane 1: this agent has 1 interface"):
            steering.wanted([s for s in read.steers if s.plane == 1], {}, f"{host}-eth0")


def test_ready_names_hosts_refused_a_credential_or_their_document_and_silent_ones():
    """Issue 72: a refused report is counted on the controller and /v1/ready names the hosts
    whose agents are silent, refused by the REST server or refused their document."""
    from tests.test_srv6 import service_on, wired
    svc = service_on(wired(Clos.leaf_spine(2, 2, 2)))
    rest, thread = _serve(Policy(admin_token=ADMIN_TOKEN, host_secrets=(SECRET,)))
    rest.service = svc
    svc.credential_refusals = rest.refusals
    try:
        admin, h0 = _client(rest, ADMIN_TOKEN), _client(rest, _cred("h0_0"))
        assert "hosts" not in admin.ready()  # no agent spoke yet
        admin.add_job({"id": "r", "mode": "srv6", "flows": [
            {"src": "h0_0", "dst": "h1_0", "bytes": 1e6},
            {"src": "h0_1", "dst": "h1_1", "bytes": 1e6}]})
        assert h0.request("POST", "/v1/hosts/h0_1/probes", PROBES)[0] == 403
        report = {"paths": [{"path": ["l0", "s0", "l1"], "ok": True}],
                  "refused": {"version": "x:1", "error": "flow 0: dst_ip 12345"}}
        assert h0.request("POST", "/v1/hosts/h0_0/probes", report)[0] == 200
        hosts = admin.ready()["hosts"]
        assert hosts["credential_refused"] == 1 and \
            hosts["credential_refused_hosts"]["h0_1"]["status"] == 403
        assert hosts["document_refused_hosts"]["h0_0"]["error"] == "flow 0: dst_ip 12345"
        assert hosts["reporting"] == 1 and hosts["with_flows"] == 4
        assert hosts["silent_hosts"] == ["h0_1", "h1_0", "h1_1"]  # h0_0 reported
    finally:
        _stop(rest, thread)
