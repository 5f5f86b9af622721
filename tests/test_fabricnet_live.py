"""``fabricnet.cleanup`` on real Open vSwitch (issue 59, item 12): it removes what a killed run
of the harness left (its marked bridge, a link named after it, a veth it recorded, a process
it started) and nothing of anyone else's emulation: an unmarked bridge, a veth and a ``ping``
running beside it stay. ``leftovers`` counts only the harness's, so this test passes while
someone else's Mininet runs or pings on the machine. The mocked machine of
``tests/test_owned.py`` checks the same without root."""
import json
import os
import signal
import subprocess

import pytest

from emulation.harness import fabricnet, owned
from tests.integration import require_root_and_ovs

pytestmark = pytest.mark.integration


def _bridges() -> set:
    return set(subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                              text=True, timeout=30).stdout.split())


def _links() -> set:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         timeout=30).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_cleanup_removes_a_killed_run_s_leftovers_and_nothing_else():
    require_root_and_ovs()
    fabricnet.cleanup()
    assert fabricnet.leftovers() == []
    gone = f"999999999-1-{owned.token_of(os.getpid()).split('-')[2]}"  # no such process
    record = os.path.join(owned.RECORDS, f"{gone}.json")
    theirs = {k: v for k, v in os.environ.items() if k != owned.ENV}
    foreign = subprocess.Popen(["ping", "-q", "-i", "0.5", "127.0.0.1"], env=theirs,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stale = subprocess.Popen(["sleep", "300"], env={**theirs, owned.ENV: gone})
    veths = [("mlrforeign-eth0", "mlrforeign-eth1"), ("mlrleft1-eth1", "mlrleft1-eth2"),
             ("mlrrec-eth0", "mlrrec-eth1")]
    try:
        subprocess.run(["ovs-vsctl", "add-br", "mlrforeign1"], check=True, timeout=30)
        subprocess.run(["ovs-vsctl", "add-br", "mlrleft1", "--", "set", "bridge", "mlrleft1",
                        f"external_ids:{owned.KEY}={gone}"], check=True, timeout=30)
        for a, b in veths:
            subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                           check=True, timeout=30)
        os.makedirs(owned.RECORDS, exist_ok=True)
        with open(record, "w") as fh:
            json.dump({"links": ["mlrrec-eth0"]}, fh)
        left = " ".join(fabricnet.leftovers())
        assert "mlrleft1" in left and "mlrrec-eth0" in left and str(stale.pid) in left, left
        assert "mlrforeign" not in left and str(foreign.pid) not in left, left
        fabricnet.cleanup()
        assert fabricnet.leftovers() == []
        assert "mlrforeign1" in _bridges() and "mlrleft1" not in _bridges()
        links = _links()
        assert "mlrforeign-eth0" in links and not links & {"mlrleft1-eth1", "mlrrec-eth0"}
        assert stale.wait(timeout=5) in (-signal.SIGTERM, -signal.SIGKILL)
        assert foreign.poll() is None and not os.path.exists(record)
    finally:
        for p in (foreign, stale):
            p.kill()
            p.wait(timeout=10)
        for br in ("mlrforeign1", "mlrleft1"):
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], timeout=30)
        for a, _ in veths:
            subprocess.run(["ip", "link", "del", a], capture_output=True, timeout=30)
        if os.path.exists(record):
            os.remove(record)
