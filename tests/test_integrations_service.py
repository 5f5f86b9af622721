"""The client, the command line and the PyTorch and Slurm hooks against the real REST dispatcher
and service (controller.service.api over fake switch tables, served by a stdlib HTTP server in
this process): what they send is accepted and planned as they mean it, and the service's own
refusals reach the user as status and message."""
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controller.client import Client, ControllerError, members_job
from controller.integrations.pytorch import job_document
from controller.service import api
from controller.service.metrics import exposition
from tests.test_control_plane import start, wired

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def served():
    f = wired(2, 4, 2)
    sw, svc = start(f)

    class H(BaseHTTPRequestHandler):
        def _serve(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/metrics":
                status, doc = 200, exposition(svc)[0].decode()
            else:
                status, doc = api.handle(svc, self.command, self.path, body, dict(self.headers))
            text = isinstance(doc, str)
            out = doc.encode() if text else json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_DELETE = do_PUT = _serve

        def log_message(self, *args):
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), H)
    http.daemon_threads = True
    t = threading.Thread(target=http.serve_forever, args=(0.05,), daemon=True)  # quick shutdown
    t.start()
    try:
        yield f, svc, f"http://127.0.0.1:{http.server_address[1]}"
    finally:
        http.shutdown()
        http.server_close()
        t.join(5)


def test_client_on_every_endpoint_of_the_real_api(served):
    f, svc, url = served
    c = Client(url, timeout=30)
    view = c.add_job({"id": "r", "collective": "ring_allreduce",
                      "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 4e6})
    assert view["id"] == "r" and len(view["routes"]) == 4
    assert [j["id"] for j in c.jobs()["jobs"]] == ["r"]
    assert c.job("r")["job"]["rings"] == [["h0_0", "h1_0", "h2_0", "h3_0"]]
    assert len(c.job_ports("r").strip().splitlines()) == 1 + 4  # a comment, one per connection
    assert len(c.routes()["routes"]) == 4
    assert c.links()["links"] and c.fabric()["declared"]["leaves"] == f.leaves
    c.imbalance(), c.optimize(), c.openapi()
    advice = c.advise({"id": "a", "collective": "ring_allreduce",
                       "ranks": ["h0_0", "h2_0", "h1_0", "h3_0"], "bytes": 1e6})
    assert advice["jobs"]["a"]["rings"][0]["order"] == ["h0_0", "h2_0", "h1_0", "h3_0"]
    assert "mlroute_" in c.metrics()
    with pytest.raises(ControllerError) as e:
        c.add_job({"id": "r", "collective": "ring_allreduce", "ranks": ["h0_1", "h1_1"],
                   "bytes": 1e6})
    assert e.value.status == 409 and "r" in e.value.message
    with pytest.raises(ControllerError) as e:
        c.add_job(members_job("m", ["h0_1", "zz"]))
    assert e.value.status == 400 and "unknown host 'zz'" in e.value.message
    assert c.delete_job("r") is not None and c.jobs()["jobs"] == []
    with pytest.raises(ControllerError) as e:
        c.delete_job("r")
    assert e.value.status == 404


def test_gloo_declaration_plans_the_data_direction(served):
    f, svc, url = served
    ips = [f.host_ip[h] for h in ("h0_0", "h1_0", "h2_0", "h3_0")]  # rank r on leaf r
    doc = job_document("g", ips, "gloo", bytes_hint=4e6)
    view = Client(url, timeout=30).add_job(doc)
    pairs = {(r["src"], r["dst"]) for r in view["routes"]}
    # rank r -> rank r - 1, in the host names the controller answers with
    assert pairs == {("h0_0", "h3_0"), ("h3_0", "h2_0"), ("h2_0", "h1_0"), ("h1_0", "h0_0")}
    inter = job_document("i", [f.host_ip[h] for h in ("h0_1", "h1_1", "h0_1", "h1_1")], "gloo",
                         bytes_hint=1e6)
    assert {(r["src"], r["dst"]) for r in Client(url).add_job(inter)["routes"]} == {
        ("h0_1", "h1_1"), ("h1_1", "h0_1")}
    nccl = job_document("n", [f.host_ip[h] for h in ("h2_1", "h3_1")], "nccl")
    Client(url).add_job(nccl)
    assert Client(url).job("n")["matrix"] == "learning"


@pytest.mark.slow
def test_cli_members_job_against_the_service(served):
    f, svc, url = served

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "controller", "job", *args, "--url", url],
                              capture_output=True, text=True, timeout=120)
    r = cli("add", "--members", "10.0.0.1,10.0.1.1,h2_0", "--id", "m", "--bytes", "1e6")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("job m added")
    r = cli("show", "m", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["matrix"] == "learning"
    r = cli("show", "m")  # for people
    assert r.returncode == 0 and r.stdout.startswith("job m: ")
    assert "matrix learning" in r.stdout.splitlines()[0]
    r = cli("list")
    assert r.returncode == 0 and r.stdout.splitlines()[1].split()[0] == "m"
    r = cli("add", "--members", "10.0.0.1,10.0.0.2", "--id", "one-leaf")
    assert r.returncode == 1 and "HTTP 400" in r.stderr and "every member is on leaf" in r.stderr
    r = cli("delete", "m")
    assert r.returncode == 0 and svc.state.jobs == {}


def test_slurm_hooks_against_the_service(served, tmp_path):
    f, svc, url = served
    hosts = tmp_path / "hosts"
    hosts.write_text("node1 h0_0\nnode2 h1_0\nnode3 10.0.2.1\n")
    env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_NUM_NODES": "3",
           "MLROUTE_URL": url, "MLROUTE_HOST_MAP": str(hosts), "PYTHONPATH": REPO}
    r = subprocess.run([sys.executable, "-m", "controller.integrations.slurm", "prolog"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert svc.state.jobs["slurm-77"].job.to_dict()["members"] == ["h0_0", "h1_0", "h2_0"]
    r = subprocess.run([sys.executable, "-m", "controller.integrations.slurm", "epilog"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "removed" in r.stdout and svc.state.jobs == {}
