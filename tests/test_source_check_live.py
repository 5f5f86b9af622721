"""Forged sources with real parts (issue 59, item 8): ryu-manager in front of the Mininet 2 x 4 x 2
leaf-spine (declared), Open vSwitch sampling 1 packet in 16 towards the controller's sFlow
collector. A members-only job {h1_0, h2_0, h3_0} is learning. h0_1 (no member) sends UDP from
h2_0's address to h1_0 with scapy (emulation/harness/attacks.py), then from its own address:

* none of the forged datagrams arrives at h1_0, and h0_1's own do;
* the job hears no sample between its members: its learning saw 0 samples, it has no measured
  pair (h2_0, h1_0), /metrics attributes nothing to it;
* leaf l0 counted what it dropped (``mlroute_forged_packets_total{switch="l0"}``), and the
  switches' samples of it were counted apart (``mlroute_sflow_dropped_samples_total``: Open
  vSwitch samples on ingress, before its tables drop, and says the packet was dropped).

Fails before the source check (``enforcement.source_check``): the forged datagrams arrive and
their samples are the job's."""
import json
import re
import sys
import time
import urllib.request

import pytest

from emulation.harness import fabricnet
from emulation.harness.controller_proc import REPO
from tests.integration import default_session, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ATTACKER, VICTIM, FORGED_AS = "h0_1", "h1_0", "h2_0"
MEMBERS = ["h1_0", "h2_0", "h3_0"]
RATE, SECONDS = 200, 5  # datagrams a second, seconds: 1,000 forged datagrams


def metric(ctl, name: str, **labels) -> float:
    """One sample of /metrics (0 when absent)."""
    with urllib.request.urlopen(ctl.url + "/metrics", timeout=15) as r:
        page = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}(?:{{{re.escape(want)}}})? ([0-9.e+]+)$", page, re.M)
    return float(m.group(1)) if m else 0.0


def run(host, *args: str):
    return host.popen([sys.executable, "-m", "emulation.harness.attacks", *args], cwd=REPO)


def last_json(proc, timeout: float) -> dict:
    out = proc.communicate(timeout=timeout)[0]
    text = out.decode() if isinstance(out, bytes) else out
    return json.loads(text.strip().splitlines()[-1])


def test_a_forged_source_is_dropped_at_its_leaf_counted_and_never_learned(tmp_path):
    require_root_and_ovs()
    with default_session(tmp_path, stats_interval=0.5) as emu:
        ctl, net, f = emu.ctl, emu.net, emu.fabric
        status, doc = ctl.rest("POST", "/v1/jobs", {"id": "m", "members": MEMBERS})
        assert status == 201 and doc["matrix"] == "learning", doc
        attacker, victim = net.get(ATTACKER), net.get(VICTIM)
        iface = attacker.defaultIntf().name
        dropped_before = metric(ctl, "mlroute_forged_packets_total", switch="l0")
        listen = run(victim, "udp-count", "--port", "5999", "--duration", str(2 * SECONDS + 6))
        time.sleep(1.0)
        forged = last_json(run(attacker, "ipv4", "--iface", iface, "--src", f.host_ip[FORGED_AS],
                               "--dst", f.host_ip[VICTIM], "--dst-mac", victim.MAC(),
                               "--rate", str(RATE), "--duration", str(SECONDS)), 60)
        own = last_json(run(attacker, "ipv4", "--iface", iface, "--src", f.host_ip[ATTACKER],
                            "--dst", f.host_ip[VICTIM], "--dst-mac", victim.MAC(),
                            "--rate", str(RATE), "--duration", "2"), 60)
        received = last_json(listen, 4 * SECONDS + 30)["received"]
        assert forged["sent"] >= RATE * SECONDS * 0.8, forged
        # nothing forged arrives; the same host's own datagrams do
        assert received.get(f.host_ip[FORGED_AS], 0) == 0, received
        assert received.get(f.host_ip[ATTACKER], 0) >= own["sent"] * 0.9, (received, own)
        # the leaf counted its drops (its counter read every 0.5 s)
        fabricnet.wait_until(lambda: metric(ctl, "mlroute_forged_packets_total", switch="l0")
                             - dropped_before >= forged["sent"], 10,
                             what="leaf l0's drops of forged sources counted")
        assert metric(ctl, "mlroute_sflow_dropped_samples_total") > 0
        # windows of 2 s closed since: the job learned nothing of the forged pair
        time.sleep(5)
        job = ctl.rest("GET", "/v1/jobs/m")[1]
        assert job["learning"]["samples"] == 0, job["learning"]
        measured = {(m["src"], m["dst"]) for m in job.get("measured_flows") or []}
        assert (FORGED_AS, VICTIM) not in measured, measured
        assert metric(ctl, "mlroute_learning_samples_total", job="m") == 0
        assert metric(ctl, "mlroute_sflow_samples_total") > 0  # h0_1's own datagrams were heard
