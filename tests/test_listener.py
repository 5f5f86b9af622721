"""The OpenFlow listener (``controller/shell/listener.py``): each framework adapter's
``StreamServer`` listens with the wide backlog (``ss`` reports a listening socket's backlog as
its Send-Q) and adopts the socket ``open_early`` opened, so a switch that connected before the
framework's listener existed is accepted by it; a port another process holds is refused."""
import shutil
import socket
import subprocess
import sys

import pytest

from controller.shell import listener
from controller.shell.listener import BACKLOG

ADAPTERS = [("ryu", "controller.shell.app", "ryu.controller.controller"),
            ("os_ken", "controller.shell.osken_app", "os_ken.controller.controller")]

PROBE = """
import socket, subprocess, sys, threading
import {adapter}
from {module} import StreamServer
from controller.shell.listener import open_early
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
open_early("127.0.0.1", [port])
early = socket.create_connection(("127.0.0.1", port), timeout=5)  # before the framework listens
early.sendall(b"hello")
got = []
def handle(sock, addr):
    got.append(sock.recv(5))
    sock.sendall(b"ok")
server = StreamServer(("127.0.0.1", port), handle)
out = subprocess.run(["ss", "-ltnH", f"sport = :{{port}}"], capture_output=True, text=True).stdout
threading.Thread(target=server.serve_forever, daemon=True).start()
reply = early.recv(2)
print(StreamServer.mlroute_backlog, out.split()[2], server.server.getsockname()[1] == port,
      got[0].decode(), reply.decode())
"""


@pytest.mark.parametrize("framework,adapter,module", ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_the_adapter_adopts_the_early_socket_with_the_wide_backlog(framework, adapter, module):
    pytest.importorskip(framework, reason=f"{framework} is not installed in this venv")
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    out = subprocess.run([sys.executable, "-c", PROBE.format(adapter=adapter, module=module),
                          "--"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    declared, kernel, same_port, got, reply = out.stdout.split()
    assert int(declared) == BACKLOG and int(kernel) == BACKLOG  # not eventlet's 50
    assert same_port == "True" and got == "hello" and reply == "ok"


def test_a_port_another_process_listens_on_is_refused_by_name():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        with pytest.raises(SystemExit, match=f"OpenFlow port 127.0.0.1:{port} is in use"):
            listener.open_early("127.0.0.1", [port])


@pytest.mark.parametrize("framework,adapter,module", ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_the_adapter_loads_without_the_planners(framework, adapter, module):
    """What the framework imports before the OpenFlow ports open (the options, the adapter)
    imports no planner and none of numpy, scipy, networkx: they come after (``events``)."""
    pytest.importorskip(framework, reason=f"{framework} is not installed in this venv")
    code = (f"import sys, {adapter}; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'scipy', 'networkx') or m.startswith('controller.planners.') and "
            "m != 'controller.planners.registry' or m == 'controller.shell.core'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
