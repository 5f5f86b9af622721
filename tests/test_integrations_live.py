"""The command line and the Slurm hooks against the real controller (ryu-manager with a write
token) in front of a Mininet fabric of Open vSwitch switches: a members-only job added, listed,
shown as learning, refused with the controller's message, removed; the Slurm prolog declares
and the epilog removes. Run under the OVS lock (integration)."""
import json
import os
import subprocess
import sys

import pytest

from emulation.session import Session
from tests.integration import HOSTS, LEAVES, SPINES, require_root_and_ovs

pytestmark = pytest.mark.integration
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cli_and_slurm_hooks_on_the_real_controller(tmp_path):
    require_root_and_ovs()
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with Session(SPINES, LEAVES, HOSTS, 0.0, str(tmp_path), token="s3cret") as s:
        ips = [s.fabric.host_ip[f"h{i}_0"] for i in range(LEAVES)]

        def cli(*args, auth=True):
            return subprocess.run(
                [sys.executable, "-m", "controller", "job", *args, "--url", s.ctl.url,
                 *(["--token-file", str(token)] if auth else [])],
                capture_output=True, text=True, timeout=120, cwd=REPO)

        r = cli("add", "--members", ",".join(ips), "--id", "m", "--bytes", "4e6")
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("job m added")
        r = cli("list", auth=False)
        assert r.returncode == 0 and [l.split()[0] for l in r.stdout.splitlines()[1:]] == ["m"]
        view = json.loads(cli("show", "m", auth=False).stdout)
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
