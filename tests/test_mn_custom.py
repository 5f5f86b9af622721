"""The topology file works with Mininet's own command line against the real controller."""
import json
import os
import subprocess

import pytest

from emulation import fabricnet
from emulation.controller_proc import REPO, ControllerProcess
from tests.integration import require_root_and_ovs
from topologies.clos import clos_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_mn_custom_clos_pingall(tmp_path):
    require_root_and_ovs()
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps(clos_fabric(2, 3, 2).to_dict()))
    fabricnet.ensure_ovs()
    fabricnet.cleanup()
    ctl = ControllerProcess(str(path), str(tmp_path / "controller.log")).start()
    try:
        out = subprocess.run(
            ["mn", "--custom", os.path.join(REPO, "topologies", "clos.py"), "--topo", "clos,2,3,2",
             "--switch", "ovs,datapath=user,protocols=OpenFlow13",
             "--controller", f"remote,ip=127.0.0.1,port={ctl.of_port}", "--test", "pingall"],
            capture_output=True, text=True, timeout=180)
        text = out.stdout + out.stderr
        assert "Results: 0% dropped (30/30 received)" in text, text[-3000:]
    finally:
        ctl.stop()
