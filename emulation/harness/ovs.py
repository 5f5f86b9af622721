"""Read real switch state with ``ovs-ofctl``: flow entries with their counters, port counters.

Used to prove paths from counters (a planned flow's bytes on the ingress rule that sends it to
its spine, bytes per directed link) and to compare flow tables across runs.
"""
from __future__ import annotations

import os
import re
import subprocess

_FIELD = re.compile(r"(\w+)=([^,\s]+)")


def dump_flows(bridge: str, cookie: int | None = None) -> list[dict]:
    """Flow entries of a bridge: cookie, table, priority, match fields, actions, counters."""
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge]
    if cookie is not None:
        cmd.append(f"cookie={cookie:#x}/-1")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
    flows = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("cookie="):
            continue
        head, _, actions = line.partition(" actions=")
        fields = dict(_FIELD.findall(head))
        entry = {"cookie": int(fields.pop("cookie"), 16), "table": int(fields.pop("table", 0)),
                 "n_packets": int(fields.pop("n_packets", 0)),
                 "n_bytes": int(fields.pop("n_bytes", 0)),
                 "priority": int(fields.pop("priority", 32768)), "actions": actions}
        for k in ("duration", "idle_age", "hard_age", "reset_counts"):
            fields.pop(k, None)
        entry["match"] = fields
        entry["flags"] = [w for w in head.split(",") if "=" not in w and w.strip()]
        flows.append(entry)
    return flows


def flow_table(bridge: str) -> list[str]:
    """A bridge's flow table without counters or ages, sorted: equal lists = equal tables."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-stats", "dump-flows", bridge],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return sorted(l.strip() for l in out.splitlines() if "actions=" in l)


def port_bytes(bridge: str) -> dict[int, dict[str, int]]:
    """Per port number: rx and tx bytes and packets."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    ports: dict[int, dict[str, int]] = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"\s*port\s+(\w+):\s*rx pkts=(\d+), bytes=(\d+)", line)
        if m:
            current = int(m.group(1)) if m.group(1).isdigit() else None
            if current is not None:
                ports[current] = {"rx": int(m.group(3)), "rx_pkts": int(m.group(2)), "tx": 0,
                                  "tx_pkts": 0}
            continue
        m = re.match(r"\s*tx pkts=(\d+), bytes=(\d+)", line)
        if m and current is not None:
            ports[current]["tx"] = int(m.group(2))
            ports[current]["tx_pkts"] = int(m.group(1))
    return ports


def flush_datapath_stats(cycles: int = 2) -> bool:
    """Have ovs-vswitchd credit the datapath's packets to the OpenFlow entries now:
    ``ovs-appctl revalidator/wait`` returns when its revalidators finish a dump cycle, and the
    second call waits for a whole cycle that began after the traffic (about 0.5 s in all).
    False where it cannot say: the daemon serves several datapaths ("can't wait on multiple
    udpifs") or none, or ovs-appctl failed."""
    for _ in range(cycles):
        try:
            done = subprocess.run(["ovs-appctl", "revalidator/wait"], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
        if done.returncode != 0:
            return False
    return True


def purge_datapath_flows() -> None:
    """Drop every flow the datapath has cached (``ovs-appctl revalidator/purge``): the next
    packets are translated on the flow tables in force. Open vSwitch's userspace datapath can
    keep forwarding on a flow cached before a rule change (docs/explanation/
    environment-notes.md): a pair sent on the ECMP group while its job was learned went on
    doing so, past the entries its plan installed. The learning tests purge before they
    measure a plan, so that they measure the plan. Raises RuntimeError when ovs-appctl
    fails."""
    done = subprocess.run(["ovs-appctl", "revalidator/purge"], capture_output=True, text=True,
                          timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ovs-appctl revalidator/purge: {done.stderr.strip()}")


def save_state(bridges: list[str], logdir: str) -> None:
    """``bridges``' flow tables with their counters (``tables.txt``) and the datapath's cached
    flows (``datapath-flows.txt``) into ``logdir``: why a run went where it did (a planned
    entry that counted no packet, a cached flow that kept an old action)."""
    def text(cmd: list[str]) -> str:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    with open(os.path.join(logdir, "tables.txt"), "w") as fh:
        for b in bridges:
            fh.write(f"== {b}\n" + text(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", b]))
    with open(os.path.join(logdir, "datapath-flows.txt"), "w") as fh:
        fh.write(text(["ovs-appctl", "dpctl/dump-flows", "-m"]))


def settle_counters(bridges: list[str], timeout: float = 6.0, interval: float = 0.7) -> None:
    """Make the flow counters final for traffic that has been received: OVS credits datapath
    packets to OpenFlow rules lazily (its revalidators run about every half second), so a read
    right after the traffic misses the last bytes. ``flush_datapath_stats`` where the daemon
    allows it; else wait until the counters stop changing, leaving out entries that send to
    the controller: the LLDP of discovery reaches them every second and would keep the sum
    moving until the timeout. Bytes still queued in the fabric are not waited for."""
    import time

    if flush_datapath_stats():
        return

    def total():
        return sum(e["n_bytes"] for b in bridges for e in dump_flows(b)
                   if "CONTROLLER" not in e["actions"])
    deadline = time.monotonic() + timeout
    last = total()
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = total()
        if now == last:
            return
        last = now


def entry_ages(bridge: str) -> dict[str, tuple[float, int]]:
    """Per entry of a bridge (cookie, table, priority and match as ovs-ofctl prints them): its
    age in seconds and packet count. An entry re-added has a younger age; one left alone keeps
    ageing and counting, which is how tests prove that nothing touched a table."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    entries = {}
    for line in out.splitlines():
        if "actions=" not in line:
            continue
        head = line.split(" actions=")[0]
        duration = float(re.search(r"duration=([0-9.]+)s", head).group(1))
        packets = int(re.search(r"n_packets=(\d+)", head).group(1))
        key = re.sub(r"(duration|n_packets|n_bytes|idle_age|hard_age)=[^,]*,?\s*", "", head)
        entries[key.strip()] = (duration, packets)
    return entries
