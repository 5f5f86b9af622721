"""The OpenFlow listener's backlog (``controller/shell/backlog.py``): each framework adapter
widens its controller module's ``StreamServer``, and the kernel holds that many connections
(``ss`` reports a listening socket's backlog as its Send-Q)."""
import shutil
import subprocess
import sys

import pytest

from controller.shell.backlog import BACKLOG

ADAPTERS = [("ryu", "controller.shell.app", "ryu.controller.controller"),
            ("os_ken", "controller.shell.osken_app", "os_ken.controller.controller")]

PROBE = """
import subprocess, sys
import {adapter}
from {module} import StreamServer
server = StreamServer(("127.0.0.1", 0), lambda sock, addr: None)
port = server.server.getsockname()[1]
out = subprocess.run(["ss", "-ltnH", f"sport = :{{port}}"], capture_output=True, text=True).stdout
print(StreamServer.mlroute_backlog, out.split()[2])
"""


@pytest.mark.parametrize("framework,adapter,module", ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_the_adapter_listens_with_the_wide_backlog(framework, adapter, module):
    pytest.importorskip(framework, reason=f"{framework} is not installed in this venv")
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    out = subprocess.run([sys.executable, "-c", PROBE.format(adapter=adapter, module=module),
                          "--"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    declared, kernel = out.stdout.split()
    assert int(declared) == BACKLOG and int(kernel) == BACKLOG  # not eventlet's 50
