"""``make demo-fattree`` (``python -m emulation.demo --fat-tree``) on a fresh emulated k = 4
fat-tree, in host mode (the mode with the most parts: source ports chosen by probes at two
tiers): it exits 0, writes its summary and picture, and under the plan every directed link of
both tiers carried what the plan put on it (port counters, within 5% of a flow)."""
import json
import os
import subprocess
import sys

import pytest

from tests.integration import require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.extended, pytest.mark.timeout(400)]


def test_the_three_tier_demo_runs_and_its_links_carry_the_plan(tmp_path):
    require_root_and_ovs()
    out = str(tmp_path / "demo")
    done = subprocess.run([sys.executable, "-m", "emulation.demo", "--fat-tree", "--mode", "host",
                           "--iterations", "1", "--out", out], capture_output=True, text=True,
                          timeout=360, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "ECMP (polarised)" in done.stdout
    assert os.path.getsize(os.path.join(out, "summary.png")) > 0
    with open(os.path.join(out, "summary.json")) as fh:
        s = json.load(fh)
    assert s["mode"] == "host" and s["flows"] == 16 and s["planned_max_link_load"] == 1.0
    assert s["targets"]["per_link_bytes_within_5pct_of_a_flow"], s["per_link_error_of_a_flow"]
    tiers = {v["tier"] for v in s["link_bytes"].values() if v["planned_flows"]}
    assert tiers == {"leaf", "core"}
