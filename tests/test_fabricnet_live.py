"""``fabricnet.cleanup`` on real Open vSwitch: it skips Mininet's cleanup (and its second of
waiting, before every live test) only when ``leftovers`` finds nothing a run left, and a
bridge or a node's link left behind is found and removed."""
import subprocess

import pytest

from emulation.harness import fabricnet
from tests.integration import require_root_and_ovs

pytestmark = pytest.mark.integration


def test_cleanup_removes_what_leftovers_finds_and_leaves_nothing():
    require_root_and_ovs()
    fabricnet.cleanup()
    assert fabricnet.leftovers() == []
    try:
        subprocess.run(["ovs-vsctl", "add-br", "mlrleft1"], check=True, timeout=30)
        subprocess.run(["ip", "link", "add", "mlrleft-eth0", "type", "veth", "peer", "name",
                        "mlrleft-eth1"], check=True, timeout=30)
        left = fabricnet.leftovers()
        assert any("mlrleft1" in x for x in left) and any("mlrleft-eth0" in x for x in left)
        fabricnet.cleanup()
        assert fabricnet.leftovers() == []
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "mlrleft1"], timeout=30)
        subprocess.run(["ip", "link", "del", "mlrleft-eth0"], capture_output=True, timeout=30)
