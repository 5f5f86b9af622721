"""``emulation.harness.routers``' counters read without a fabric: a switch's uN SID is a
route per port (metrics 1, 2, ...), and ``sid_bytes`` counts them all."""
from types import SimpleNamespace

from emulation.harness.routers import RouterSession

SHOW = """fcbb:bbbb:1::/48  encap seg6local action End flavors next-csid dev s0-eth1 metric 1 pref medium
    Stats:
        packets 10 bytes 1500 errors 0
fcbb:bbbb:1::/48  encap seg6local action End flavors next-csid dev s0-eth2 metric 2 pref medium
    Stats:
        packets 3 bytes 420 errors 0
"""


def test_sid_bytes_sums_every_route_of_the_sid():
    node = SimpleNamespace(cmd=lambda c: SHOW if "fcbb:bbbb:1::/48" in c else "")
    fake = SimpleNamespace(net={"s0": node},
                           plan=SimpleNamespace(locator=lambda sw: "fcbb:bbbb:1::/48"))
    assert RouterSession.sid_bytes(fake, "s0") == 1920
    assert RouterSession.sid_bytes(fake, "s0", "fcbb:bbbb:9::/48") == 0
