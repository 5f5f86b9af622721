"""The switches' side of a start, from Open vSwitch's log (``benchmarks.ovs_connects``): lines
as ovs-vswitchd 3.1 writes them, read from where the log was when the start began."""
from __future__ import annotations

from benchmarks import ovs_connects

# a restart as Open vSwitch logged it (k = 16, issue 74): l0 came back at once, l1 was
# refused, backed off 2 s and came back, a0_0 timed out waiting for the HELLO; c0_0 is not
# one of the fabric's bridges, and the first line is from before the start
LOG = """\
2026-11-29T17:21:59.900Z|09001|rconn|INFO|l0<->tcp:127.0.0.1:6653: connection closed by peer
2026-11-29T17:22:01.550Z|09002|rconn|INFO|l0<->tcp:127.0.0.1:6653: connected
2026-11-29T17:22:00.400Z|09003|rconn|INFO|l1<->tcp:127.0.0.1:6653: connecting...
2026-11-29T17:22:00.400Z|09004|rconn|WARN|l1<->tcp:127.0.0.1:6653: connection failed (Connection refused)
2026-11-29T17:22:00.400Z|09005|rconn|INFO|l1<->tcp:127.0.0.1:6653: waiting 2 seconds before reconnect
2026-11-29T17:22:02.410Z|09006|rconn|INFO|l1<->tcp:127.0.0.1:6653: connected
2026-11-29T17:22:01.000Z|09007|rconn|INFO|a0_0<->tcp:127.0.0.1:6653: connecting...
2026-11-29T17:22:02.000Z|09008|rconn|ERR|a0_0<->tcp:127.0.0.1:6653: connection timed out
2026-11-29T17:22:02.000Z|09009|rconn|INFO|a0_0<->tcp:127.0.0.1:6653: waiting 4 seconds before reconnect
2026-11-29T17:22:01.000Z|09010|rconn|INFO|c0_0<->tcp:127.0.0.1:6653: connected
2026-11-29T17:22:01.000Z|09011|bridge|INFO|bridge l0: added interface l0-a0_0 on port 1
"""


def test_a_start_is_read_from_its_offset_and_summed_per_bridge(tmp_path):
    log = tmp_path / "ovs-vswitchd.log"
    log.write_text("2026-11-29T17:00:00.000Z|00001|rconn|INFO|l0<->tcp:x:1: connected\n")
    start = (ovs_connects.log_end(str(log)), ovs_connects._wall("2026-11-29T17:22:00.000"))
    with open(log, "a") as fh:
        fh.write(LOG)
    got = ovs_connects.since_start(start, ["l0", "l1", "a0_0"], str(log))
    assert got == {"bridges": 3, "connected": 2, "first_connected_s": 1.55,
                   "last_connected_s": 2.41, "tries_failed": 2, "longest_backoff_s": 4,
                   "bridges_backed_off_over_1s": 2}


def test_no_log_to_read_gives_none(tmp_path):
    missing = str(tmp_path / "none.log")
    assert ovs_connects.log_end(missing) is None
    assert ovs_connects.since_start((None, 0.0), ["l0"], missing) is None
