"""Start and stop the Mininet leaf-spine fabric the way these machines need it
(``docs/environment.md``): Open vSwitch userspace datapath, OpenFlow 1.3, secure
fail mode, tx offload off on every host interface, IPv6 off in hosts, shaped links, a remote
controller, bounded waits, and a cleanup of what the harness made, never of anything else.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

from controller.errors import InputError
from emulation.harness import owned

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"


def ovs_ctl(*args: str, timeout: float = 180) -> None:
    """Run ``ovs-ctl`` so that the daemons it starts outlive this run: without the run's mark
    in their environment (``owned.ENV``: the harness's cleanup stops every process that
    carries it, and stopped the Open vSwitch a benchmark had restarted), in a session of their
    own, no pipe of ours."""
    env = {k: v for k, v in os.environ.items() if k != owned.ENV}
    subprocess.run([OVS_CTL, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, start_new_session=True, timeout=timeout,
                   check=True, env=env)


def ensure_ovs() -> None:
    """Start Open vSwitch if it does not run (no systemd here), with switch queues as deep as
    their qdiscs (``ensure_switch_send_buffer``: otherwise links shared by two
    flows lose packets only because of the emulator) and the CPU before the emulated hosts'
    processes (``ensure_switch_priority``)."""
    if subprocess.run([OVS_CTL, "status"], capture_output=True).returncode != 0:
        ovs_ctl("--system-id=random", "start", timeout=60)
    ensure_switch_send_buffer()
    ensure_switch_priority()


AUTOGROUP = "/proc/sys/kernel/sched_autogroup_enabled"


def ensure_switch_priority(path: str = AUTOGROUP) -> bool:
    """Turn the kernel's autogroup scheduling off, so that the switches keep the CPU they
    need while the emulated hosts' processes load it. Returns whether it was on.

    ovs-vswitchd runs at nice -10 (ovs-ctl), but with autogroup scheduling (on in Debian's
    kernels) nice orders only the tasks of one session, and every Mininet host is a session
    of its own. When 16 Open MPI ranks started on a k = 4 fat-tree, the userspace datapath
    went up to 71 s with 21 ms of CPU ("Unreasonably long 71232ms poll interval", 261
    involuntary context switches): no packet forwarded, no ARP request answered, and Open MPI
    4.1 hung on the connect() that failed. 3 of 10 launches stalled that way, in each of two
    runs of 10; with autogroup off, 8 of 8 ran (``docs/howto/emulation.md``, "Switch CPU").
    A kernel without the switch (no ``path``) has no autogroups: nothing to do."""
    try:
        with open(path) as fh:
            on = fh.read().strip() != "0"
    except FileNotFoundError:
        return False
    if on:
        with open(path, "w") as fh:
            fh.write("0\n")
    return on


def prepare(outdir: str, fabric_path: str, fabric) -> None:
    """Before an emulation starts anything: root, the output folder with the fabric file, a
    running Open vSwitch, and no leftovers of a killed run of the harness (``cleanup``)."""
    if os.geteuid() != 0:
        raise InputError("the emulation needs root (Mininet, Open vSwitch)")
    os.makedirs(outdir, exist_ok=True)
    with open(fabric_path, "w") as fh:
        json.dump(fabric.to_dict(), fh)
    ensure_ovs()
    cleanup()


def leftovers() -> list[str]:
    """What runs of this harness left on the machine (``owned``: bridges, links and processes
    marked as the harness's, of a run that is gone or of this process), in words; never a
    bridge, link or process of anyone else. About 10-30 ms."""
    return owned.leftovers()


def cleanup() -> list[str]:
    """Remove what ``leftovers`` finds; returns it. Not Mininet's cleanup (``mn -c``), which
    kills every ``ping`` and controller by name, deletes every bridge and ``*-ethN`` link and
    ``/tmp/*.log``: it destroyed any other emulation on the machine (issue 59). This process's
    controllers are left to whoever started them, so it may run while one is up; its Mininet
    nodes and bridges are removed, so call it before building or after stopping a fabric."""
    return owned.cleanup()


def build(spines: int, leaves: int, hosts_per_leaf: int, bw: float, controller_port: int = 6653,
          sflow: int | None = None, sflow_collector: str | None = None, clos=None):
    """The Mininet leaf-spine with the topology's own node classes (topologies/clos.py:
    userspace OVS, OpenFlow 1.3, secure fail mode, tx offload off) and jumbo frames. Every
    switch samples 1 in ``sflow`` packets for the controller's sFlow collector (127.0.0.1:6343;
    None: the topology's default, 16, or MLROUTE_SFLOW_SAMPLING; 0: off; ``sflow_collector``:
    other collectors, comma-separated host:port). ``clos``: a wired ``model.clos.Clos`` (a
    fat-tree, a leaf-spine of several planes) to build instead of the leaf-spine."""
    from mininet.log import setLogLevel
    from mininet.net import Mininet

    from topologies.clos import ClosTopo, WiredClosTopo
    setLogLevel(os.environ.get("MLROUTE_MININET_LOG", "error"))
    common = {"bw": bw, "host_mtu": HOST_MTU, "switch_mtu": SWITCH_MTU, "sflow": sflow,
              "sflow_collector": sflow_collector, "queue_bytes": QUEUE_BYTES}
    topo = (WiredClosTopo(fabric=clos, **common) if clos is not None else
            ClosTopo(spines=spines, leaves=leaves, hosts_per_leaf=hosts_per_leaf, **common))
    owned.claim(owned.link_names(topo))  # recorded before Mininet makes them; bridges marked
    return Mininet(topo=topo, controller=lambda name: remote_controller(name, controller_port))


def remote_controller(name: str, port: int, ip: str = "127.0.0.1"):
    """Mininet's ``RemoteController`` without its start-up check
    (``topologies.clos.UncheckedRemoteController``: the check can raise UnicodeDecodeError)."""
    from topologies.clos import UncheckedRemoteController
    return UncheckedRemoteController(name, ip=ip, port=port)


# Jumbo frames, as training fabrics use: headers then cost 0.7% of a link, not 4.6%. Switch
# ports get more than hosts so that pushed MPLS labels still fit (environment.md: with equal
# MTUs, ping works but TCP inside MPLS gets nothing through).
HOST_MTU = 9000
SWITCH_MTU = HOST_MTU + 100  # room for the two MPLS labels of segment routing
# A byte FIFO under every shaped interface's HTB class (topologies.clos.ShapedIntf): 1 MB,
# 1.6 s at 5 Mbit/s. The default is txqueuelen (1000) packets, which with 9000-byte frames is
# 9 MB (14 s at 5 Mbit/s). Flows with clamped receive windows (agents.py) keep far less than
# 1 MB queued, so it drops nothing. netem's ``max_queue_size`` would do this but there is no
# netem here.
QUEUE_BYTES = 1_000_000


def start(net, timeout: float = 60.0) -> None:
    """Start the fabric, wait (bounded) for every switch to connect, and turn off TCP slow
    start after an idle period (ring steps idle between). The hosts' tx offload, MTU and IPv6
    are set by their class (ClosHost) when Mininet builds them."""
    net.start()
    if not net.waitConnected(timeout=timeout):
        raise TimeoutError(f"switches did not connect to the controller within {timeout:g} s")
    for h in net.hosts:
        h.cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0")


def stop(net) -> None:
    """Stop a fabric as ``net.stop()`` does, with its links' interfaces deleted in one
    ``ip -batch`` run first: Mininet deletes them one command at a time (two a link, 1.3 s for
    a 4 x 8 x 2 fabric). Deleting the end of a veth pair in the root namespace removes both
    ends; host ends go with their namespace anyway."""
    ends = []
    for link in net.links:
        end = next((i for i in (link.intf1, link.intf2) if not i.node.inNamespace), None)
        if end is not None:
            ends.append(end.name)
    if ends:
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join(
            f"link delete {name}\n" for name in ends), capture_output=True, text=True,
            timeout=60)
        net.links = []  # gone: nothing left for Mininet's one-by-one deletion
    net.stop()


def ping_pairs(net, pairs, timeout: int = 1) -> list[tuple[str, str]]:
    """One ping for each (host name, address) pair, every one sent at once, each waiting
    ``timeout`` s for its answer: the pairs not answered. Each host's pings run in a subshell,
    so its shell prints no job-control lines; a line ``answered <address>`` says one came."""
    targets: dict[str, list[str]] = {}
    for name, address in pairs:
        targets.setdefault(name, []).append(address)
    hosts = [net.get(name) for name in targets]
    for h in hosts:
        h.sendCmd(f"( for ip in {' '.join(targets[h.name])}; do {{ ping -c1 -W{int(timeout)} "
                  "-n -q $ip >/dev/null 2>&1 && echo answered $ip; } & done; wait )")
    answered = {(h.name, words[1]) for h in hosts
                for words in map(str.split, h.waitOutput().splitlines())
                if len(words) == 2 and words[0] == "answered"}
    return [p for p in pairs if tuple(p) not in answered]


def pingall(net, timeout: int = 1) -> float:
    """Mininet's pingall, every host to every other once with ``timeout`` s for the answer,
    with every ping sent at once (``ping_pairs``): percentage lost. Mininet sends one ping at
    a time (9.7 s for the 16 hosts of a 4 x 8 x 2 fabric); this takes about one round trip,
    and ``timeout`` at most."""
    pairs = [(h.name, o.IP()) for h in net.hosts for o in net.hosts if o is not h]
    return 100.0 * len(ping_pairs(net, pairs, timeout)) / len(pairs) if pairs else 0.0


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll ``predicate`` until it returns a true value; raise TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


SWITCH_SNDBUF = 16 << 20


def switch_send_buffer() -> int | None:
    """Send buffer (bytes) of the one AF_PACKET socket through which ovs-vswitchd's userspace
    datapath sends to every system port; None while it has not been created."""
    out = subprocess.run(["ss", "-0", "-a", "-m", "-p"], capture_output=True, text=True,
                         timeout=30).stdout
    for line in out.splitlines():
        if "ovs-vswitchd" in line and re.search(r"\s\[0\]:\*\s", line):
            m = re.search(r"\btb(\d+)", line)
            if m:
                return int(m.group(1))
    return None


def ensure_switch_send_buffer(size: int = SWITCH_SNDBUF, exact: bool = False) -> dict:
    """Give the switches queues as deep as their qdiscs.

    The userspace datapath sends to every port of every bridge through a single non-blocking
    AF_PACKET socket. A packet waiting in a port's qdisc (the HTB shaping and its FIFO) stays
    charged to that socket until the veth takes it, and a send that finds the buffer full is a
    drop. The buffer is net.core.wmem_default when the socket is made (212,992 bytes here),
    counted in allocated bytes (a 9,000-byte frame takes about 16 kB): about a dozen jumbo
    frames queued in the whole fabric, whatever the per-port FIFO says. Two flows sharing a
    link queue more than that, so shared links lost packets only because of the emulator.
    This sets net.core.wmem_default to ``size`` and restarts ovs-vswitchd when its socket is
    smaller (or, with ``exact``, different: to measure the old behaviour). Call it while no
    fabric runs. Returns the buffer before and after."""
    before = switch_send_buffer()
    if before is not None and (before == size or (before > size and not exact)):
        return {"before": before, "after": before}
    subprocess.run(["sysctl", "-qw", f"net.core.wmem_default={size}"], check=True, timeout=30)
    if before is not None:  # the socket exists: only a new ovs-vswitchd makes a new one
        ovs_ctl("--no-ovsdb-server", "--system-id=random", "restart", timeout=120)
    return {"before": before, "after": switch_send_buffer()}
