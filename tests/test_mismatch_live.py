"""A declared fabric that disagrees with the emulated one speaks up, with real parts (issue
61): the controller is given the fabric file of 4 spines x 8 leaves x 2 hosts (``python -m
topologies.clos --spines 4 --leaves 8 --hosts-per-leaf 2``) while Mininet runs clos,2,4,2. Its
log says what disagrees, ``GET /v1/ready`` names it in its 503, and the POST that answered 201
while every ping failed is refused with a 409 naming the port. The same in process, on fake
switches: tests/test_mismatch.py."""
from __future__ import annotations

import re

import pytest

from emulation.harness import fabricnet
from emulation.harness.session import Session
from tests.integration import require_root_and_ovs
from topologies.clos import clos_fabric

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
BW = 5.0
HOST_MOVED = re.compile(r"host h0_0 \([0-9a-f:]+\) is declared on leaf l0 port 5, seen on leaf "
                        r"l0 port 3")


class Mismatched(Session):
    """Mininet's clos,2,4,2 behind a controller given the 4 x 8 x 2 fabric file: it never
    becomes ready, so the start waits for the disagreement instead: the 6 switches that exist
    connected, the hosts heard (one ping each way: their ARP reaches the controller) and the
    wiring check done."""

    def __init__(self, outdir: str):
        super().__init__(2, 4, 2, BW, outdir)  # what Mininet runs
        self.fabric = clos_fabric(4, 8, 2, BW)  # what the controller is told

    def wait_ready(self, timeout: float = 60) -> None:
        fabricnet.wait_until(lambda: self.ctl.rest("GET", "/v1/ready")[1].get("connected") == 6,
                             timeout, what="the 6 switches that exist connected")
        h0, h1 = self.net.get("h0_0"), self.net.get("h1_0")
        h0.cmd(f"ping -c1 -W1 {h1.IP()}")  # fails: the point is that both are heard
        h1.cmd(f"ping -c1 -W1 {h0.IP()}")

        def checked():
            doc = self.ctl.rest("GET", "/v1/ready")[1]
            return any(HOST_MOVED.search(x) for x in doc.get("disagrees", ()))
        fabricnet.wait_until(checked, 30, what="the wiring checked against the declaration")


def test_a_declared_fabric_that_disagrees_with_the_emulated_one_speaks_up(tmp_path):
    require_root_and_ovs()
    with Mismatched(str(tmp_path)) as s:
        code, ready = s.ctl.rest("GET", "/v1/ready")
        assert code == 503 and not ready["ready"], ready
        assert ready["error"].startswith("not ready: 6 of 12 switches connected"), ready
        assert "the declared fabric disagrees with what is seen" in ready["error"], ready
        assert HOST_MOVED.search(ready["error"]), ready  # a host on another port comes first
        assert ready["wiring_problems"] >= 8, ready  # 6 switches missing, 2 hosts or more
        # the POST of the issue, which answered 201 with routes while every ping failed
        code, doc = s.ctl.rest("POST", "/v1/jobs", {
            "id": "a", "collective": "ring_allreduce", "ranks": ["h0_0", "h1_0"],
            "bytes": 1_000_000})
        assert code == 409, doc
        assert "the declared fabric disagrees with what is seen" in doc["error"], doc
        assert HOST_MOVED.search(doc["error"]), doc
        assert s.ctl.rest("GET", "/v1/jobs")[1]["jobs"] == []
        with open(s.ctl_log) as fh:
            log = fh.read()
        said = [line[line.index("mlroute: "):] for line in log.splitlines()
                if "mlroute: the declared fabric disagrees with what is seen" in line]
        assert any(HOST_MOVED.search(line) for line in said), log[-3000:]
        assert len(said) == len(set(said)), said  # once per change, not every round
        assert re.search(r"mlroute: \d+ switch(es)? connected: ", log), log[-3000:]
        assert re.search(r"mlroute: job a refused \(409\): .*leaf l0 port 5", log), log[-3000:]
