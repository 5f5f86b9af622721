"""Reading switch counters (``emulation.harness.ovs``) without a switch: ``ovs-ofctl``'s
answers are replaced by entries whose counters the test moves."""
import pytest

from emulation.harness import ovs


def _fabric(lldp_bytes, job_bytes):
    """dump_flows of a leaf: LLDP to the controller (counting every read: discovery never
    stops) and a job's entry (counting until the traffic's last bytes are credited)."""
    reads = []

    def dump_flows(bridge, cookie=None):
        reads.append(bridge)
        n = len(reads)
        return [{"n_bytes": lldp_bytes * n, "actions": "CONTROLLER:65535"},
                {"n_bytes": job_bytes[min(n, len(job_bytes)) - 1], "actions": "output:3"}]
    return dump_flows, reads


def test_settling_waits_for_the_jobs_entries_not_for_discoverys_lldp(monkeypatch):
    monkeypatch.setattr(ovs, "flush_datapath_stats", lambda: False)
    slept, clock = [], iter(range(0, 1000))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setattr("time.sleep", slept.append)
    dump, reads = _fabric(680, [1000, 5000, 5000])
    monkeypatch.setattr(ovs, "dump_flows", dump)
    ovs.settle_counters(["l0"], timeout=60.0, interval=0.7)
    assert len(reads) == 3 and slept == [0.7, 0.7]  # moved once, then the same: settled


def test_counters_that_keep_moving_end_at_the_timeout(monkeypatch):
    monkeypatch.setattr(ovs, "flush_datapath_stats", lambda: False)
    clock = iter(range(0, 1000))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setattr("time.sleep", lambda s: None)
    dump, reads = _fabric(0, list(range(100, 100000, 100)))
    monkeypatch.setattr(ovs, "dump_flows", dump)
    ovs.settle_counters(["l0"], timeout=5.0)
    assert 3 <= len(reads) <= 7  # bounded by the timeout, not by the counters


class _Appctl:
    """``ovs-appctl``'s answers to ``revalidator/wait``, one per call."""

    def __init__(self, codes):
        self.codes, self.calls = list(codes), []

    def __call__(self, cmd, **kw):
        import subprocess
        self.calls.append(cmd)
        code = self.codes.pop(0)
        return subprocess.CompletedProcess(cmd, code, "", "" if code == 0 else
                                           "can't wait on multiple udpifs.")


def test_a_daemon_that_flushes_its_statistics_is_not_polled(monkeypatch):
    appctl = _Appctl([0, 0])
    monkeypatch.setattr(ovs.subprocess, "run", appctl)
    monkeypatch.setattr(ovs, "dump_flows", lambda *a, **k: pytest.fail("polled"))
    ovs.settle_counters(["l0"])
    assert appctl.calls == [["ovs-appctl", "revalidator/wait"]] * 2  # a whole cycle after


def test_a_daemon_that_cannot_flush_is_polled(monkeypatch):
    appctl = _Appctl([1])
    monkeypatch.setattr(ovs.subprocess, "run", appctl)
    monkeypatch.setattr("time.sleep", lambda s: None)
    dump, reads = _fabric(680, [1000, 5000, 5000])
    monkeypatch.setattr(ovs, "dump_flows", dump)
    ovs.settle_counters(["l0"], timeout=60.0)
    assert len(appctl.calls) == 1 and len(reads) == 3


def test_purging_the_datapath_asks_ovs_vswitchd_and_says_when_it_refused(monkeypatch):
    import subprocess
    calls, code = [], [0]

    def run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, code[0], "", "no such command")
    monkeypatch.setattr(ovs.subprocess, "run", run)
    ovs.purge_datapath_flows()
    assert calls == [["ovs-appctl", "revalidator/purge"]]
    code[0] = 2
    with pytest.raises(RuntimeError, match="revalidator/purge: no such command"):
        ovs.purge_datapath_flows()
