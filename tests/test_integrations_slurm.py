"""Slurm's PrologSlurmctld / EpilogSlurmctld hooks (controller/integrations/slurm.py and the thin
scripts in integrations/slurm/) run as Slurm runs them: a bare environment with the variables
slurmctld sets, against a recording stand-in of the REST API. They declare the job by its
members, remove it, and whatever goes wrong exit 0 within their deadline with one line on
stderr."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from controller.integrations.slurm import SlurmHookError, expand_nodelist, read_host_map
from emulation.harness.ports import free_port
from tests.fake_controller import FakeController

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODES = ["gpu01", "gpu02", "gpu03", "gpu07"]
ADDRS = ["10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"]


def slurm_env(**extra):
    """What slurmctld gives a PrologSlurmctld (no PATH: Slurm sets no search path)."""
    env = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "gpu[01-03,07]",
           "SLURM_JOB_NUM_NODES": "4", "SLURM_JOB_NAME": "train", "SLURM_JOB_USER": "alice",
           "SLURM_JOB_UID": "1000", "SLURM_JOB_PARTITION": "gpu",
           "SLURM_JOB_ACCOUNT": "ml", "SLURM_CLUSTER_NAME": "c1",
           "SLURM_SCRIPT_CONTEXT": "prolog_slurmctld",
           # the settings file names the interpreter (the venv of the Python under test)
           "MLROUTE_PYTHON": sys.executable}
    env.update(extra)
    return env


def hook(name, env, script=False, timeout=60):
    cmd = ([os.path.join(REPO, "integrations", "slurm", f"{name}.sh")] if script else
           [sys.executable, "-m", "controller.integrations.slurm", name])
    if not script:
        env = dict(env, PYTHONPATH=REPO)
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                       cwd="/")
    return r, time.monotonic() - t0


@pytest.fixture
def setup(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("# node address\n" + "".join(f"{n} {a}\n" for n, a in zip(NODES, ADDRS))
                     + "gpu04 10.0.9.9  # not in this job\n")
    token = tmp_path / "token"
    token.write_text("tok\n")
    with FakeController(token="tok") as ctl:
        yield ctl, slurm_env(MLROUTE_URL=ctl.url, MLROUTE_HOST_MAP=str(hosts),
                             MLROUTE_TOKEN_FILE=str(token),
                             MLROUTE_SLURM_LOG=str(tmp_path / "hook.log")), tmp_path


@pytest.mark.parametrize("script", [False, True], ids=["module", "prolog.sh"])
def test_prolog_declares_members_and_epilog_removes(setup, script):
    ctl, env, tmp = setup
    r, _ = hook("prolog", env, script)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "job slurm-4242 declared with 4 members" in r.stdout
    (post,) = ctl.writes()
    assert (post["method"], post["path"]) == ("POST", "/v1/jobs")
    assert post["body"] == {"id": "slurm-4242", "members": ADDRS}
    assert post["headers"]["Authorization"] == "Bearer tok"
    r, _ = hook("epilog", dict(env, SLURM_SCRIPT_CONTEXT="epilog_slurmctld"), script)
    assert r.returncode == 0 and "job slurm-4242 removed" in r.stdout
    assert [(w["method"], w["path"]) for w in ctl.writes()][1] == ("DELETE",
                                                                   "/v1/jobs/slurm-4242")
    assert ctl.jobs == {}
    log = (tmp / "hook.log").read_text().splitlines()
    assert len(log) == 2 and "prolog: job slurm-4242 declared" in log[0]


def test_node_names_without_map_and_options(setup):
    ctl, env, _ = setup
    env = {k: v for k, v in env.items() if k != "MLROUTE_HOST_MAP"}
    r, _ = hook("prolog", env)
    assert r.returncode == 0, r.stderr
    assert ctl.writes()[0]["body"] == {"id": "slurm-4242", "members": NODES}
    r = subprocess.run([sys.executable, "-m", "controller.integrations.slurm", "prolog",
                        "--job-prefix", "s", "--bytes", "4e6", "--no-learn", "--mode", "host"],
                       env=dict(env, PYTHONPATH=REPO), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert ctl.writes()[1]["body"] == {"id": "s4242", "members": NODES, "bytes": 4e6,
                                       "learn": False, "mode": "host"}


@pytest.mark.parametrize("change, message", [
    ({"SLURM_JOB_NODELIST": "gpu[01-05]"}, "has no entry for gpu05"),
    ({"SLURM_JOB_NODELIST": "gpu[01-"}, "bad hostlist"),
    ({"SLURM_JOB_ID": ""}, "SLURM_JOB_ID is not set"),
    ({"MLROUTE_URL": ""}, "no controller URL"),
    ({"MLROUTE_HOST_MAP": "/nonexistent"}, "cannot read host map /nonexistent"),
    ({"MLROUTE_TOKEN_FILE": "/nonexistent"}, "cannot read token file /nonexistent"),
])
def test_bad_setup_exits_0_names_the_problem_sends_nothing(setup, change, message):
    ctl, env, _ = setup
    r, _ = hook("prolog", dict(env, **change))
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert ctl.requests == []


def test_one_node_job_is_not_declared(setup):
    ctl, env, _ = setup
    r, _ = hook("prolog", dict(env, SLURM_JOB_NODELIST="gpu03", SLURM_JOB_NUM_NODES="1"))
    assert r.returncode == 0 and "runs on 10.0.2.1: nothing to declare" in r.stdout
    assert ctl.requests == []


def test_controller_refusals_exit_0(setup):
    ctl, env, _ = setup
    assert hook("prolog", env)[0].returncode == 0
    r, _ = hook("prolog", env)  # the same job again: 409
    assert r.returncode == 0 and "HTTP 409: job 'slurm-4242' already exists" in r.stderr
    r, _ = hook("epilog", dict(env, MLROUTE_TOKEN_FILE="", MLROUTE_TOKEN="wrong"))
    assert r.returncode == 0 and "HTTP 401" in r.stderr
    assert list(ctl.jobs) == ["slurm-4242"]
    r, _ = hook("epilog", dict(env, SLURM_JOB_ID="7"))
    assert r.returncode == 0 and "job slurm-7 was not declared" in r.stdout


@pytest.mark.slow
def test_unreachable_and_hanging_controllers_are_bounded(setup):
    _, env, _ = setup
    r, took = hook("prolog", dict(env, MLROUTE_URL=f"http://127.0.0.1:{free_port()}"))
    assert r.returncode == 0 and "controller unreachable" in r.stderr and took < 10
    srv = socket.socket()  # accepts, never answers
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        r, took = hook("prolog", dict(env, MLROUTE_URL=url, MLROUTE_TIMEOUT="1"))
        assert r.returncode == 0 and "timed out" in r.stderr and took < 10
        # three controllers that hang: the deadline ends the run, not the 3 x 5 s of timeouts
        r, took = hook("prolog", dict(env, MLROUTE_URL=",".join([url] * 3),
                                      MLROUTE_DEADLINE="1.5", MLROUTE_TIMEOUT="5"))
        assert r.returncode == 0 and "1.5 s deadline" in r.stderr and took < 8
    finally:
        srv.close()


def test_expand_and_host_map_files(tmp_path, monkeypatch):
    assert expand_nodelist("gpu[01-03,07]") == NODES
    assert expand_nodelist("a1,b2") == ["a1", "b2"]
    assert expand_nodelist("n[1-2],m[08-09]") == ["n1", "n2", "m08", "m09"]
    # without the library: scontrol show hostnames (a stand-in that records its arguments)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\nprintf 'x1\\nx2\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert expand_nodelist("x[1-2]", use_library=False) == ["x1", "x2"]
    assert (tmp_path / "args").read_text().split() == ["show", "hostnames", "x[1-2]"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SlurmHookError, match="neither the python-hostlist package nor scontrol"):
        expand_nodelist("x[1-2]", use_library=False)
    j = tmp_path / "map.json"
    j.write_text(json.dumps({"gpu01": "h0_0", "gpu02": "10.0.1.1"}))
    assert read_host_map(str(j)) == {"gpu01": "h0_0", "gpu02": "10.0.1.1"}
    j.write_text(json.dumps({"gpu01": 5}))
    with pytest.raises(SlurmHookError, match="node 'gpu01' needs an address"):
        read_host_map(str(j))
    t = tmp_path / "map.txt"
    t.write_text("gpu01 10.0.0.1\ngpu02\n")
    with pytest.raises(SlurmHookError, match="line 2: expected 'node address'"):
        read_host_map(str(t))
