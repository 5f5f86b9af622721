"""``emulation/harness/step_diag.py`` without root: its ``/proc`` readers on this process and
its window summary on samples made up here (what a link carried, when its bytes were through,
how the cores were shared)."""
from __future__ import annotations

import os
import time

from emulation.harness import step_diag


def test_readers_see_this_machine_and_namespace():
    c = step_diag.cpu_times()
    assert c["total"] >= c["idle"] + c["user"] + c["system"] > 0
    rx, tx = step_diag.dev_bytes(os.getpid(), "lo")
    assert rx >= 0 and tx >= 0
    assert set(step_diag.group_ticks({step_diag.netns(os.getpid())})) == set(step_diag.GROUPS)


def _sample(t, busy, idle, soft, ranks, sent, received):
    cpu = {"user": busy, "system": 0, "idle": idle, "irq": 0, "softirq": soft,
           "total": busy + idle + soft}
    return (t, cpu, {"ranks": ranks, "agents": 0}, {"h": (received, sent)})


def test_summary_of_a_window():
    s = step_diag.Sampler({"h": (os.getpid(), "lo")})
    hz = 100 * (os.cpu_count() or 1)  # ticks a second, all cores
    line = 20e6 / 8  # bytes a second at 20 Mbit/s
    s.samples = [_sample(100.0, 0, 0, 0, 0, 0, 0),
                 _sample(101.0, hz // 2, hz // 4, hz // 4, 100, line, line / 2),
                 _sample(102.0, hz, hz // 2, hz // 2, 200, 1.5 * line, line)]
    d = s.summary(100.0, 102.0, bytes_each=line, bw_mbps=20)
    assert d["cpu_share"]["idle"] == 0.25 and d["cpu_share"]["softirq"] == 0.25
    assert d["cores"]["ranks"] == 1.0  # 100 ticks a second: one core
    assert d["links"]["h"]["tx_busy"] == 0.75 and d["links"]["h"]["rx_busy"] == 0.5
    assert d["links"]["h"]["sent_at_s"] == 1.0 and d["links"]["h"]["received_at_s"] == 2.0
    assert s.summary(103.0, 104.0, 1, 20) == {"samples": 0}


def test_sampler_stops_with_its_block():
    with step_diag.Sampler({"h": (os.getpid(), "lo")}, period=0.01) as s:
        time.sleep(0.1)
    n = len(s.samples)
    assert n >= 3 and not s._thread.is_alive()
    time.sleep(0.05)
    assert len(s.samples) == n
