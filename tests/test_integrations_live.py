"""The command line, the Slurm hooks and the PyTorch hook against the real controller
(ryu-manager with a write token) in front of a Mininet fabric of Open vSwitch switches: a
members-only job added, listed, shown as learning, refused with the controller's message,
removed; the Slurm prolog declares and the epilog removes; gloo ranks in the hosts declare their
ring in its data direction. Run under the OVS lock (integration)."""
import json
import os
import subprocess
import sys

import pytest

from emulation.harness.session import Session
from tests.integration import HOSTS, LEAVES, SPINES, require_root_and_ovs

pytestmark = pytest.mark.integration
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def s(tmp_path_factory):
    """One fabric and controller (with a write token) for the module's tests; each test ends
    with no job left."""
    require_root_and_ovs()
    with Session(SPINES, LEAVES, HOSTS, 0.0, str(tmp_path_factory.mktemp("hooks")),
                 token="s3cret") as session:
        yield session


@pytest.fixture(autouse=True)
def no_job_left(s):
    """A test that failed half-way leaves no job to the next one."""
    yield
    for job in s.ctl.client.jobs()["jobs"]:
        s.ctl.rest("DELETE", f"/v1/jobs/{job['id']}")  # with the controller's token


def test_cli_and_slurm_hooks_on_the_real_controller(s, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    ips = [s.fabric.host_ip[f"h{i}_0"] for i in range(LEAVES)]

    def cli(*args, auth=True):
        return subprocess.run(
            [sys.executable, "-m", "controller", "job", *args, "--url", s.ctl.url,
             *(["--token-file", str(token)] if auth else [])],
            capture_output=True, text=True, timeout=120, cwd=REPO)

    r = cli("add", "--members", ",".join(ips), "--id", "m", "--bytes", "4e6")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("job m added")
    r = cli("list", auth=False)  # reads need the credential too (issue 72)
    assert r.returncode == 1 and "HTTP 401" in r.stderr
    r = cli("list")
    assert r.returncode == 0 and [l.split()[0] for l in r.stdout.splitlines()[1:]] == ["m"]
    view = json.loads(cli("show", "m", "--json").stdout)
    assert view["matrix"] in ("learning", "learned")
    r = cli("add", "--members", ",".join(ips), "--id", "m")
    assert r.returncode == 1 and "HTTP 409" in r.stderr and r.stderr.count("\n") == 1
    r = cli("delete", "m", auth=False)
    assert r.returncode == 1 and "HTTP 401" in r.stderr
    r = cli("delete", "m")
    assert r.returncode == 0 and s.ctl.client.jobs()["jobs"] == []

    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"node{i} h{i}_1\n" for i in range(LEAVES)))
    env = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": f"node[0-{LEAVES - 1}]",
           "SLURM_JOB_NUM_NODES": str(LEAVES), "MLROUTE_URL": s.ctl.url,
           "MLROUTE_HOST_MAP": str(hosts), "MLROUTE_TOKEN_FILE": str(token)}
    prolog = os.path.join(REPO, "integrations", "slurm", "prolog.sh")
    r = subprocess.run([prolog], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    job = s.ctl.client.job("slurm-9")
    assert job["job"]["members"] == [f"h{i}_1" for i in range(LEAVES)]
    r = subprocess.run([os.path.join(REPO, "integrations", "slurm", "epilog.sh")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "removed" in r.stdout
    assert s.ctl.client.jobs()["jobs"] == []


def test_torch_gloo_ranks_in_mininet_declare_their_ring(s, tmp_path):
    """examples/torch_allreduce.py with one gloo rank per leaf in Mininet hosts: rank 0 reaches
    the controller (a socat relay through a Unix socket, as Mininet hosts have no route to the
    root namespace), declare_job posts the ring in gloo's data direction, the controller plans
    rank r -> rank r - 1, the sums are right, and the job is gone at the end."""
    import shutil
    import signal

    from emulation.harness import fabricnet
    from emulation.harness.ports import free_port
    if shutil.which("socat") is None:
        pytest.skip("needs socat")
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("needs Debian's python3-torch")
    hosts = [s.net.get(f"h{i}_0") for i in range(LEAVES)]  # rank r on leaf r
    sock = str(tmp_path / "rest.sock")
    procs = []
    try:
        procs.append(subprocess.Popen(
            ["socat", f"UNIX-LISTEN:{sock},fork,reuseaddr",
             f"TCP:127.0.0.1:{s.ctl.rest_port}"], start_new_session=True))
        fabricnet.wait_until(lambda: os.path.exists(sock), 10, what="relay socket")
        procs.append(hosts[0].popen(["socat", "TCP-LISTEN:18080,bind=127.0.0.1,fork,reuseaddr",
                                     f"UNIX-CONNECT:{sock}"]))
        master = s.fabric.host_ip[hosts[0].name]
        port = str(free_port())
        ranks = []
        for r, h in enumerate(hosts):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(LEAVES), LOCAL_RANK="0",
                       MASTER_ADDR=master, MASTER_PORT=port, OMP_NUM_THREADS="1",
                       GLOO_SOCKET_IFNAME=f"{h.name}-eth0", PYTHONPATH=REPO,
                       MLROUTE_URL="http://127.0.0.1:18080", MLROUTE_TOKEN="s3cret")
            ranks.append(h.popen(["/usr/bin/python3",
                                  os.path.join(REPO, "examples", "torch_allreduce.py"),
                                  "--mib", "1", "--iters", "40", "--job-id", "torch"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True))
        procs += ranks
        view = fabricnet.wait_until(lambda: _job(s, "torch"), 120, interval=0.1,
                                    what="job torch declared by rank 0")
        outs = [p.communicate(timeout=300) for p in ranks]
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
    for p, (out, err) in zip(ranks, outs):
        assert p.returncode == 0, err[-2000:]
    result = json.loads(outs[0][0].split("RESULT ", 1)[1])
    assert result["declared"] is True and len(result["allreduce_s"]) == 40
    print(f"declare_job took {result['declare_s']:.3f} s on rank 0 (4 ranks, real controller)")
    names = [h.name for h in hosts]
    pairs = {(x["src"], x["dst"]) for x in view["routes"]}
    assert pairs == {(names[r], names[r - 1]) for r in range(LEAVES)}
    assert view["job"]["rings"] == [[names[0], names[3], names[2], names[1]]]
    assert s.ctl.client.jobs()["jobs"] == []  # removed by rank 0 at destroy_process_group


def _job(s, jid):
    from controller.client import ControllerError
    try:
        return s.ctl.client.job(jid)
    except ControllerError:
        return None
