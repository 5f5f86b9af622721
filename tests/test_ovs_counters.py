"""Reading switch counters (``emulation.harness.ovs``) without a switch: ``ovs-ofctl``'s
answers are replaced by entries whose counters the test moves."""
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
    slept, clock = [], iter(range(0, 1000))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setattr("time.sleep", slept.append)
    dump, reads = _fabric(680, [1000, 5000, 5000])
    monkeypatch.setattr(ovs, "dump_flows", dump)
    ovs.settle_counters(["l0"], timeout=60.0, interval=0.7)
    assert len(reads) == 3 and slept == [0.7, 0.7]  # moved once, then the same: settled


def test_counters_that_keep_moving_end_at_the_timeout(monkeypatch):
    clock = iter(range(0, 1000))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    monkeypatch.setattr("time.sleep", lambda s: None)
    dump, reads = _fabric(0, list(range(100, 100000, 100)))
    monkeypatch.setattr(ovs, "dump_flows", dump)
    ovs.settle_counters(["l0"], timeout=5.0)
    assert 3 <= len(reads) <= 7  # bounded by the timeout, not by the counters
