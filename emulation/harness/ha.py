"""Redundant controllers for tests and benchmarks: a private etcd server (Debian's
``etcd-server``) on loopback ports with a temporary data directory, and an emulation with two or
three mlroute controllers sharing it, every switch pointed at all of them.

    with EtcdServer(workdir) as etcd, HaSession(2, 4, 2, 0, workdir, etcd.url, n=2) as s:
        s.master().rest("POST", "/v1/jobs", job)

Every process is started with its PID recorded and stopped by that PID in ``finally``.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from emulation.harness import fabricnet, owned
from emulation.harness.controller_proc import ControllerProcess, signals_held
from emulation.harness.ports import free_ports
from topologies.clos import clos_fabric

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
SFLOW_BASE = 16343  # controller i of a session collects sFlow on SFLOW_BASE + i


class EtcdServer:
    """One etcd member on loopback. ``stop``/``start`` keep the data directory (etcd lost and
    back, nothing lost); ``pause``/``resume`` freeze it (SIGSTOP) as an unreachable server."""

    def __init__(self, workdir: str, client_port: int | None = None, pki: dict | None = None):
        """``pki`` (``pki.make_pki``'s files, its server certificate for 127.0.0.1, and a
        client certificate for the client host ``controller``): etcd serves HTTPS and asks every client
        for a certificate its CA signed (``--client-cert-auth``)."""
        self.pki = pki
        self.dir = tempfile.mkdtemp(prefix="etcd-", dir=workdir)
        self.client_port, self.peer_port = (
            (client_port, next(p for p in free_ports(2) if p != client_port)) if client_port
            else free_ports(2))
        self.log_path = os.path.join(workdir, f"etcd-{self.client_port}.log")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.pki else 'http'}://127.0.0.1:{self.client_port}"

    def client(self, timeout: float = 2.0):
        """An ``Etcd`` client of this server (with the PKI's client certificate)."""
        from controller.service.etcd import Etcd
        if not self.pki:
            return Etcd(self.url, timeout=timeout)
        return Etcd(self.url, timeout=timeout, ca_file=self.pki["ca"],
                    cert_file=self.pki["controller_cert"],
                    key_file=self.pki["controller_key"])

    def start(self, timeout: float = 15.0) -> EtcdServer:
        if not os.path.exists(ETCD):
            raise FileNotFoundError("etcd is not installed (apt-get install etcd-server)")
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [ETCD, "--name", "mlroute", "--data-dir", os.path.join(self.dir, "data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"mlroute={peer}", "--logger", "zap",
                *(["--cert-file", self.pki["cert"], "--key-file", self.pki["key"],
                   "--client-cert-auth", "--trusted-ca-file", self.pki["ca"]]
                  if self.pki else [])]
        with open(self.log_path, "a") as log, signals_held():
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        from controller.service.etcd import EtcdError
        client = self.client(timeout=0.5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"etcd exited with {self.proc.returncode}; "
                                       f"see {self.log_path}")
                try:
                    client.status()
                    return self
                except EtcdError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"etcd did not answer within {timeout:g} s; "
                                           f"see {self.log_path}") from None
                    time.sleep(0.1)
        except BaseException:  # a timeout, or Ctrl-C / SIGTERM while it starts: not left running
            self.stop()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused etcd cannot act on SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL (a crash: no request in flight is answered); ``start`` brings it back with
        its data."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def __enter__(self) -> EtcdServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class HaSession:
    """An emulation with ``n`` controllers sharing ``etcd_url`` (ids c0, c1, ...; OpenFlow
    ports ``of_base`` + i, REST ``rest_base`` + i) and a Mininet leaf-spine whose switches
    connect to all of them (``ovs-vsctl set-controller`` with one target per controller)."""

    def __init__(self, spines: int, leaves: int, hosts_per_leaf: int, bw: float, outdir: str,
                 etcd_url: str, n: int = 2, of_base: int = 6663, rest_base: int = 8091,
                 extra_args: list[str] | None = None, fabric_file: bool = True, clos=None,
                 shared: bool = False):
        """``clos``: a wired ``model.clos.Clos`` emulated instead of the leaf-spine;
        ``shared``: the controllers share the switches out (``--mlroute-share-switches``)."""
        self.shape = (spines, leaves, hosts_per_leaf)
        self.bw = bw
        self.dir = outdir
        self.etcd_url = etcd_url
        self.clos = clos
        self.fabric = clos or clos_fabric(spines, leaves, hosts_per_leaf, bw)
        self.fabric_path = os.path.join(outdir, "fabric.json")
        self.fabric_file = fabric_file
        self.ids = [f"c{i}" for i in range(n)]
        self.of_ports = {cid: of_base + i for i, cid in enumerate(self.ids)}
        self.rest_ports = {cid: rest_base + i for i, cid in enumerate(self.ids)}
        self.sflow_ports = {cid: SFLOW_BASE + i for i, cid in enumerate(self.ids)}
        self.shared = shared
        self.extra_args = list(extra_args or []) + (["--mlroute-share-switches"] if shared
                                                    else [])
        self.ctls: dict[str, ControllerProcess | None] = {cid: None for cid in self.ids}
        self.starts: dict[str, int] = {cid: 0 for cid in self.ids}
        self.net = None
        self._building = False

    def controller(self, cid: str) -> ControllerProcess:
        self.starts[cid] += 1
        log = os.path.join(self.dir, f"controller-{cid}-{self.starts[cid]}.log")
        return ControllerProcess(
            self.fabric_path if self.fabric_file else None, log, algorithm="auto",
            rest_port=self.rest_ports[cid], of_port=self.of_ports[cid],
            extra_args=["--mlroute-etcd", self.etcd_url, "--mlroute-id", cid,
                        # one sFlow port each: controllers of one host cannot share 6343
                        "--mlroute-sflow-port", str(self.sflow_ports[cid])]
            + self.extra_args)

    def launch_controller(self, cid: str) -> ControllerProcess:
        """Controller ``cid`` started, not yet answering (``wait_answering``)."""
        ctl = self.ctls[cid] = self.controller(cid).launch()
        return ctl

    def start_controller(self, cid: str) -> ControllerProcess:
        return self.launch_controller(cid).wait_answering()

    def kill(self, cid: str) -> float:
        """SIGKILL controller ``cid`` (a crash: nothing of it runs any more); returns the
        wall-clock time of the kill."""
        ctl = self.ctls[cid]
        t = time.time()
        ctl.proc.kill()
        ctl.proc.wait(timeout=10)
        ctl.stop()  # closes its log
        self.ctls[cid] = None
        return t

    def cluster(self, cid: str, timeout: float = 5.0) -> dict:
        return self.ctls[cid].rest("GET", "/v1/cluster", timeout=timeout)[1]

    def master_id(self) -> str | None:
        for cid, ctl in self.ctls.items():
            if ctl is not None:
                try:
                    doc = self.cluster(cid, timeout=2)
                except OSError:
                    continue
                if doc.get("self", {}).get("role") == "master":
                    return cid
        return None

    def master(self) -> ControllerProcess:
        cid = fabricnet.wait_until(self.master_id, 20, 0.05, "a master")
        return self.ctls[cid]

    def standby(self) -> ControllerProcess:
        m = self.master()
        return next(c for c in self.ctls.values() if c is not None and c is not m)

    def wait_ready(self, timeout: float = 60) -> None:
        """A master that provisioned every switch, and every other controller's switches all
        connected in the slave role; with shared mastership, every switch connected to every
        controller and mastered by exactly one."""
        def ready():
            m = self.master_id()
            if m is None or self.ctls[m].rest("GET", "/v1/ready")[0] != 200:
                return False
            n, masters = len(self.fabric.dpids), 0
            for cid, ctl in self.ctls.items():
                if ctl is None:
                    continue
                sw = self.cluster(cid)["self"].get("switches", {})
                masters += sw.get("master", 0)
                if self.shared:  # each writes its share
                    if sw.get("master", 0) + sw.get("slave", 0) != n or \
                            ctl.rest("GET", "/v1/ready")[0] != 200:
                        return False
                elif sw.get("master" if cid == m else "slave", 0) != n:
                    return False
            return masters == n if self.shared else True
        fabricnet.wait_until(ready, timeout, 0.1, "a master with every switch, standbys slave")

    def __enter__(self) -> HaSession:
        fabricnet.prepare(self.dir, self.fabric_path, self.fabric)
        try:
            # the network first: Mininet checks each controller port with telnet and reads
            # what answers as UTF-8, which a listening controller's binary OpenFlow hello can
            # break (UnicodeDecodeError); nothing listens yet, and switches start below
            self._building = True
            self.net = build(*self.shape, self.bw, list(self.of_ports.values()),
                             [f"127.0.0.1:{p}" for p in self.sflow_ports.values()], self.clos)
            self._building = False
            for cid in self.ids:  # launched together: their start-ups overlap
                self.launch_controller(cid)
            for cid in self.ids:
                self.ctls[cid].wait_answering()
            fabricnet.start(self.net, timeout=60)
            max_backoff(1000)
            self.wait_ready()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, exc_type=None, exc=None, tb=None) -> None:
        with signals_held():
            dirty = self._building
            try:
                if self.net is not None:
                    net, self.net = self.net, None
                    try:
                        fabricnet.stop(net)
                    except Exception as e:  # noqa: BLE001 - half-started fabric: clean up below
                        print(f"warning: stopping the fabric: {e}", file=sys.stderr)
                        dirty = True
            finally:
                for cid, ctl in self.ctls.items():
                    if ctl is not None:
                        ctl.stop()
                        self.ctls[cid] = None
                if dirty:
                    fabricnet.cleanup()
                    self._building = False


def build(spines: int, leaves: int, hosts_per_leaf: int, bw: float, of_ports: list[int],
          sflow_targets: list[str] | None = None, clos=None):
    """The Mininet fabric of ``fabricnet.build`` with one remote controller per port: each
    switch gets every controller as a target (``ovs-vsctl set-controller br tcp:...:P1
    tcp:...:P2``) and keeps its tables while any of them is connected; it sends its sFlow
    samples to every collector of ``sflow_targets`` (each controller learns)."""
    net = fabricnet.build(spines, leaves, hosts_per_leaf, bw, of_ports[0],
                          sflow_collector=",".join(sflow_targets) if sflow_targets else None,
                          clos=clos)
    for i, port in enumerate(of_ports[1:], start=1):
        net.addController(fabricnet.remote_controller(f"c{i}", port))
    return net


def max_backoff(ms: int) -> None:
    """Switches retry a lost controller at most every ``ms`` (Open vSwitch waits up to 8 s
    by default), so a controller restarted in a test is reconnected quickly: only the
    switches this process made (``owned.max_backoff``), never another emulation's."""
    owned.max_backoff(ms)


def controller_roles(bridge: str) -> dict[str, str | None]:
    """target -> role of each controller of ``bridge`` as Open vSwitch reports it (``ovs-vsctl
    list controller``: "master", "slave", "other"), None while not connected."""
    import re
    mine = subprocess.run(["ovs-vsctl", "get", "bridge", bridge, "controller"],
                          capture_output=True, text=True, timeout=10, check=True).stdout
    uuids = set(re.findall(r"[0-9a-f-]{36}", mine))
    out = subprocess.run(["ovs-vsctl", "--format=json", "--columns=_uuid,target,role,is_connected",
                          "list", "controller"], capture_output=True, text=True, timeout=10,
                         check=True).stdout
    roles = {}
    for (_, uuid), target, role, connected in json.loads(out)["data"]:
        if uuid in uuids:
            roles[target] = role if connected and isinstance(role, str) else None
    return roles
