"""Zero configuration on a fat-tree before any host speaks, with real parts (issue 38):
ryu-manager with no fabric file in front of the emulated k = 4 fat-tree of
``topologies/clos.py``, its hosts silent. The controller must read three tiers without host
traffic and never adopt another shape on the way (main used to hold it as a leaf-spine of 8
spines and 12 leaves with its missing links marked down, and the first pingall lost 38% of its
pings); the first pingall, 5 s after the switches connected, loses nothing; once the hosts have
spoken the fabric is exactly the one built, with no ``fabric changed`` on the way. How fast
(k = 4 and k = 8) is measured by ``python -m benchmarks.zeroconfig``."""
import time

import pytest

from emulation.harness import zeroconfig as zc
from tests.integration import discovered, discovering
from topologies.clos import fattree_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

BW = 20  # Mbit/s
PINGALL_AFTER_S = 5.0


def test_a_silent_fat_tree_is_read_as_three_tiers_and_pingall_loses_nothing(tmp_path):
    truth = fattree_fabric(4, 2, BW)
    with discovering(str(tmp_path), truth, BW) as (ctl, net):
        connected = time.monotonic()
        seen = zc.watch(ctl, truth, PINGALL_AFTER_S)
        assert seen["right_after_s"] is not None, seen
        assert seen["wrong"] == [], seen
        assert [e for e in seen["events"] if not e.startswith("fabric discovered: 3 tiers")] \
            == [], seen
        time.sleep(max(0.0, connected + PINGALL_AFTER_S - time.monotonic()))
        assert zc.pingall_loss(net) == 0.0
        view = discovered(ctl, truth, "the fat-tree with its hosts")
        assert view["discovery"]["wiring_problems"] == []
        causes = [e["cause"] for e in view.get("events", [])]
        assert not [c for c in causes if c.startswith("fabric changed")], causes
