"""The PyTorch hook (controller/integrations/pytorch.py): the declaration built from the ranks'
addresses (pure), and real torch.distributed (Debian's python3-torch, gloo, under
/usr/bin/python3) over loopback processes against a recording stand-in of the REST API: the
posted ring direction, the bytes gloo really sends per peer (read from the ranks' own TCP
sockets), the delete at destroy_process_group / at exit / never when unreachable, and the
example script under torchrun with two "nodes"."""
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from controller.integrations.pytorch import (
    default_job_id,
    job_document,
    pick_interface,
    rank_address,
)
from emulation.harness.ports import free_port
from tests.fake_controller import FakeController

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PY = "/usr/bin/python3"
A, B, C, D = "10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"
# Debian's torch 1.13 under Python 3.11: torchrun's default --redirects 0 parses to None (3.11's
# flag enums) and the agent crashes; any single stream works
TORCHRUN_FIX = ["--redirects", "1", "--tee", "1", "--log_dir"]


# ---- pure: what is declared ---------------------------------------------------------------
def test_gloo_ring_runs_to_the_previous_rank():
    doc = job_document("j", [A, B, C, D], "gloo", bytes_hint=4e6)
    assert doc == {"id": "j", "collective": "ring_allreduce", "ranks": [A, D, C, B],
                   "bytes": 4e6}
    # several ranks per host (blocks): the ring over hosts, rank 0's host first
    doc = job_document("j", [A, A, B, B, C, C], "gloo", bytes_hint=1.0)
    assert doc["ranks"] == [A, C, B]
    # interleaved ranks visit a host twice: the distinct host pairs, as flows
    doc = job_document("j", [A, B, A, B], "gloo", bytes_hint=1.0)
    assert [(f["src"], f["dst"]) for f in doc["flows"]] == [(A, B), (B, A)]
    assert job_document("j", [A, A, A], "gloo") is None  # one host: nothing crosses the fabric


def test_other_backends_declare_members_unless_told():
    assert job_document("j", [A, B, B, C], "nccl", learn=True) == {
        "id": "j", "members": [A, B, C], "learn": True}
    assert job_document("j", [A, B, C], "nccl", declare="ring") == {"id": "j",
                                                                     "members": [A, B, C]}
    assert job_document("j", [A, B, C], "mpi")["members"] == [A, B, C]
    assert job_document("j", [A, B, C], "mpi", declare="ring", bytes_hint=2.0)["ranks"] == [A, B, C]
    assert job_document("j", [A, B, C], "gloo", declare="members", algorithm="greedy") == {
        "id": "j", "members": [A, B, C], "algorithm": "greedy"}
    with pytest.raises(ValueError, match="declare must be"):
        job_document("j", [A, B], "gloo", declare="sideways")


def test_addresses_and_interfaces():
    names = ["lo", "eth0", "eth1", "ib0", "docker0"]
    assert pick_interface("eth1,eth0", names, prefix=False) == ["eth1", "eth0"]
    assert pick_interface("eth", names, prefix=False) == []
    assert pick_interface("eth", names, prefix=True) == ["eth0", "eth1"]
    assert pick_interface("=eth1", names, prefix=True) == ["eth1"]
    assert pick_interface("^docker,eth", names, prefix=True) == ["ib0"]
    assert rank_address("gloo", {"MLROUTE_ADDRESS": A}) == A
    assert rank_address("gloo", {"GLOO_SOCKET_IFNAME": "lo"}) == "127.0.0.1"
    assert rank_address("nccl", {"NCCL_SOCKET_IFNAME": "l"}) == "127.0.0.1"
    master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert rank_address("nccl", master) == "127.0.0.1"
    # gloo without an interface binds the host name's address: a local one is taken, one this
    # host cannot bind or a loopback one is not (the route to MASTER_ADDR then)
    own = next((a for a in _local_ipv4() if not a.startswith("127.")), None)
    if own:
        assert rank_address("gloo", master, hostname=own) == own
        assert rank_address("nccl", master, hostname=own) == "127.0.0.1"
    assert rank_address("gloo", master, hostname="192.0.2.254") == "127.0.0.1"
    assert rank_address("gloo", master, hostname="localhost") == "127.0.0.1"
    assert default_job_id({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "42"}) == "torch-42"
    assert default_job_id({"MLROUTE_JOB_ID": "mine", "SLURM_JOB_ID": "42"}) == "mine"
    assert default_job_id({}).startswith("torch-")


def _local_ipv4() -> list[str]:
    from controller.integrations.pytorch import interface_ipv4
    return [a for _, n in socket.if_nameindex() if (a := interface_ipv4(n))]


# ---- real torch.distributed (gloo) under the system Python --------------------------------
def _torch_or_skip():
    try:
        r = subprocess.run([SYSTEM_PY, "-c", "import torch.distributed as d; "
                            "assert d.is_available() and d.is_gloo_available()"],
                           capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        r = None
    if r is None or r.returncode != 0:
        pytest.skip("needs Debian's python3-torch under /usr/bin/python3")


WORKER = r'''
import json, os, re, signal, subprocess, sys, time
# SIGTERM's default action, as torchrun starts its workers, whatever the test runner inherited
signal.signal(signal.SIGTERM, signal.SIG_DFL)
import torch, torch.distributed as dist
from controller.client import Client
from controller.integrations.pytorch import declare_job
end = sys.argv[1]
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
job = declare_job(None, job_id="t", bytes_hint=4 << 20, timeout=5)
n = 1 << 20  # 4 MiB of float32
for _ in range(3):
    x = torch.full((n,), float(rank + 1))
    dist.all_reduce(x)
    assert float(x[0]) == sum(range(1, dist.get_world_size() + 1))
dist.barrier()  # every rank reads its sockets while all are open
out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True).stdout
socks, cur = [], None
for line in out.splitlines():
    m = re.search(r":(\d+)\s+\S+:(\d+)\s+users:.*pid=(\d+),", line)
    if m:
        cur = (int(m.group(1)), int(m.group(2))) if int(m.group(3)) == os.getpid() else None
        continue
    s = re.search(r"bytes_sent:(\d+)", line)
    if cur:  # ss prints no bytes_sent for a socket that sent nothing: 0, but its port counts
        socks.append([cur[0], cur[1], int(s.group(1)) if s else 0])
        cur = None
dist.barrier()
if end == "term":  # wait for the test's SIGTERM
    print("READY", flush=True)
    time.sleep(120)
if end == "destroy":
    dist.destroy_process_group()
    if rank == 0:  # the job is gone now, not only at exit
        print("AFTER_DESTROY " + json.dumps(Client(os.environ["MLROUTE_URL"]).jobs()), flush=True)
elif end == "context":
    with job:
        pass
    job.remove()
print("SOCKS " + json.dumps({"rank": rank, "declared": job.declared, "socks": socks,
                             "document": job.document}), flush=True)
'''


def _run_ranks(tmp_path, url, world, end, extra_env=None):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", MLROUTE_URL=url,
                   MLROUTE_ADDRESS=f"10.0.{r}.1", PYTHONPATH=REPO, **(extra_env or {}))
        procs.append(subprocess.Popen([SYSTEM_PY, str(script), end], env=env, cwd=str(tmp_path),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    for rc, out, err in outs:
        assert rc == 0, err
    return outs


def _sent_per_peer(outs) -> dict:
    """{(from rank, to rank): bytes sent}, matching each socket's peer port to its owner."""
    docs = [json.loads(re.search(r"^SOCKS (.*)$", out, re.M).group(1)) for _, out, _ in outs]
    owner = {lport: d["rank"] for d in docs for lport, _, _ in d["socks"]}
    sent = {}
    for d in docs:
        for _, rport, b in d["socks"]:
            if rport in owner and owner[rport] != d["rank"]:
                key = (d["rank"], owner[rport])
                sent[key] = sent.get(key, 0) + b
    return sent


@pytest.mark.slow
def test_gloo_ring_declared_in_its_data_direction_and_removed_at_destroy(tmp_path):
    _torch_or_skip()
    world = 4
    with FakeController() as ctl:
        outs = _run_ranks(tmp_path, ctl.url, world, "destroy")
        writes = ctl.writes()
    addrs = [f"10.0.{r}.1" for r in range(world)]
    assert [(w["method"], w["path"]) for w in writes] == [("POST", "/v1/jobs"),
                                                          ("DELETE", "/v1/jobs/t")]
    assert writes[0]["body"] == {"id": "t", "collective": "ring_allreduce",
                                 "ranks": [addrs[0], addrs[3], addrs[2], addrs[1]],
                                 "bytes": 4 << 20}
    rank0 = outs[0][1]
    docs = [json.loads(re.search(r"^SOCKS (.*)$", o, re.M).group(1))["document"]
            for _, o, _ in outs]
    assert docs == [writes[0]["body"]] * world  # every rank waited for rank 0's declaration
    assert json.loads(re.search(r"^AFTER_DESTROY (.*)$", rank0, re.M).group(1)) == {"jobs": []}
    # what gloo really sent: each rank's data goes to rank - 1, the declared direction
    sent = _sent_per_peer(outs)
    step = 2 * (world - 1) / world * (4 << 20) * 3  # ring All-Reduce bytes per rank, 3 times
    for r in range(world):
        down, up = sent.get((r, (r - 1) % world), 0), sent.get((r, (r + 1) % world), 0)
        assert down >= 0.9 * step, (r, sent)
        assert up < 0.05 * down, (r, sent)


@pytest.mark.slow
def test_removed_at_exit_once_and_from_a_with_block(tmp_path):
    _torch_or_skip()
    for end in ("exit", "context"):
        with FakeController() as ctl:
            outs = _run_ranks(tmp_path, ctl.url, 2, end)
            writes = ctl.writes()
        assert [(w["method"], w["path"]) for w in writes] == [("POST", "/v1/jobs"),
                                                              ("DELETE", "/v1/jobs/t")], end
        declared = [json.loads(re.search(r"^SOCKS (.*)$", o, re.M).group(1))["declared"]
                    for _, o, _ in outs]
        assert declared == [True, False]


@pytest.mark.slow
def test_removed_on_sigterm(tmp_path):
    """torchrun stops workers with SIGTERM: the job is removed, then the rank dies of it."""
    _torch_or_skip()
    import signal
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    with FakeController() as ctl:
        procs = [subprocess.Popen(
            [SYSTEM_PY, str(script), "term"], cwd=str(tmp_path), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", MLROUTE_URL=ctl.url,
                     MLROUTE_ADDRESS=f"10.0.{r}.1", PYTHONPATH=REPO)) for r in range(2)]
        try:
            assert procs[0].stdout.readline().strip() == "READY"
            procs[0].send_signal(signal.SIGTERM)
            procs[0].wait(30)
            assert procs[0].returncode == -signal.SIGTERM
            writes = ctl.writes()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.communicate(timeout=30)
    assert [(w["method"], w["path"]) for w in writes] == [("POST", "/v1/jobs"),
                                                          ("DELETE", "/v1/jobs/t")]


@pytest.mark.slow
def test_unreachable_controller_warns_and_training_goes_on(tmp_path):
    _torch_or_skip()
    outs = _run_ranks(tmp_path, f"http://127.0.0.1:{free_port()}", 2, "exit")
    assert "mlroute: job t not declared" in outs[0][2] and "unreachable" in outs[0][2]
    assert "mlroute" not in outs[1][2]  # only rank 0 talks to the controller


@pytest.mark.slow
def test_example_under_torchrun_two_nodes(tmp_path):
    """examples/torch_allreduce.py, 2 torchrun agents ("nodes", 2 ranks each) on loopback,
    each node with its own declared address: one ring over the two hosts, deleted at the end."""
    _torch_or_skip()
    port = free_port()
    with FakeController(token="tok") as ctl:
        agents = []
        for node, addr in enumerate((A, B)):
            env = dict(os.environ, MLROUTE_ADDRESS=addr, GLOO_SOCKET_IFNAME="lo",
                       MLROUTE_TOKEN="tok", PYTHONPATH=REPO, OMP_NUM_THREADS="1")
            agents.append(subprocess.Popen(
                [SYSTEM_PY, "-m", "torch.distributed.run", *TORCHRUN_FIX,
                 str(tmp_path / f"log{node}"), "--nnodes", "2",
                 "--nproc_per_node", "2", "--node_rank", str(node), "--master_addr",
                 "127.0.0.1", "--master_port", str(port),
                 os.path.join(REPO, "examples", "torch_allreduce.py"), "--mib", "1",
                 "--iters", "2", "--mlroute-url", ctl.url, "--job-id", "ex"],
                env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, start_new_session=True))
        outs = []
        try:
            for p in agents:
                out, err = p.communicate(timeout=300)
                outs.append((p.returncode, out, err))
        finally:
            for p in agents:
                if p.poll() is None:
                    os.killpg(p.pid, 9)
                    p.wait(10)
        writes = ctl.writes()
    for rc, _, err in outs:
        assert rc == 0, err[-3000:]
    result = json.loads(re.search(r"^(?:\[\w+\]:)?RESULT (.*)$", outs[0][1], re.M).group(1))
    assert result["world"] == 4 and len(result["allreduce_s"]) == 2
    assert "iteration 1:" in outs[0][1]
    assert [(w["method"], w["path"]) for w in writes] == [("POST", "/v1/jobs"),
                                                          ("DELETE", "/v1/jobs/ex")]
    assert writes[0]["body"] == {"id": "ex", "collective": "ring_allreduce", "ranks": [A, B],
                                 "bytes": 1 << 20}
    assert all(w["headers"]["Authorization"] == "Bearer tok" for w in writes)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
