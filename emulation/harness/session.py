"""One running emulation: the mlroute controller (real ryu-manager, a subprocess) in front of a
Mininet leaf-spine of Open vSwitch switches, every switch provisioned. Always torn down, also
when Ctrl-C (SIGINT) or SIGTERM arrives at any moment, during start-up or during teardown.

    with Session(4, 8, 2, bw=10, outdir="results/x") as s:
        s.ctl.rest("POST", "/v1/jobs", job); s.net.get("h0_0").cmd(...)

Why teardown needs care: the controller runs in its own session (a terminal's SIGINT does not
reach it) and Mininet's host shells detach too, so whatever this process fails to stop stays
behind: a ryu-manager holding the ports (the next controller would share them silently), bridges
and veths (the next run fails with "File exists"). Teardown therefore holds SIGINT and SIGTERM
until it is done, and a fabric whose build was interrupted is removed by the harness's cleanup
(``fabricnet.cleanup``: what this run made, nothing of another emulation on the machine).
"""
from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from emulation.harness import fabricnet
from emulation.harness.controller_proc import ControllerProcess, signals_held
from topologies.clos import clos_fabric, fattree_fabric, planes_fabric

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_on_signal(signum, _frame):
    """First Ctrl-C or SIGTERM: unwind through every ``finally``; later ones are ignored so
    that the cleanup they trigger can finish."""
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt


def install_interrupt_handler() -> None:
    """For command-line entry points that run an emulation (run, trace, demo): SIGTERM stops
    them as Ctrl-C does, and a second signal does not interrupt the cleanup of the first."""
    for s in _SIGNALS:
        signal.signal(s, _stop_on_signal)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Ports:
    """The controller's ports in a session: REST (and the web view), OpenFlow, sFlow."""
    rest: int = 8080
    openflow: int = 6653
    sflow: int = 6343

    def sflow_collector(self) -> str | None:
        """Where the switches send samples: None for the topology's default (127.0.0.1:6343
        or MLROUTE_SFLOW_TARGET), else this session's sFlow port."""
        return None if self.sflow == Ports.sflow else f"127.0.0.1:{self.sflow}"


class Session:
    def __init__(self, spines: int, leaves: int, hosts_per_leaf: int, bw: float, outdir: str,
                 mode: str = "flow", state: bool = False, extra_args: list[str] | None = None,
                 token: str | None = None, progress=None, clos=None,
                 ports: Ports | None = None):
        """``token``: the controller's --mlroute-token (sent by ``ctl.rest`` on writing
        requests); ``progress``: a function called with one line per start-up step (the
        command-line tools print them on stderr), None for silence. ``clos``: a wired
        ``model.clos.Clos`` emulated instead of the leaf-spine (``fat_tree``, ``planes``).
        ``ports``: the controller's REST, OpenFlow and sFlow ports (``Ports``: 8080, 6653,
        6343), the switches pointed at the last two."""
        self.shape = (spines, leaves, hosts_per_leaf)
        self.bw = bw
        self.dir = outdir
        self.mode = mode
        self.clos = clos
        self.fabric = clos or clos_fabric(spines, leaves, hosts_per_leaf, bw)
        self.fabric_path = os.path.join(outdir, "fabric.json")
        self.state = os.path.join(outdir, "state.db") if state else None
        self.extra_args = list(extra_args or [])
        self.token = token
        self.ports = ports or Ports()
        self.progress = progress or (lambda _msg: None)
        self.ctl: ControllerProcess | None = None
        self.net = None
        self._building = False  # a fabric build began and self.net does not hold it yet

    @classmethod
    def fat_tree(cls, k: int, hosts_per_leaf: int, bw: float, outdir: str, **options) -> Session:
        """The k-ary fat-tree of ``topologies.clos.FatTreeTopo`` behind the controller."""
        return cls(0, 0, 0, bw, outdir, clos=fattree_fabric(k, hosts_per_leaf, bw), **options)

    @classmethod
    def planes(cls, planes: int, spines: int, leaves: int, hosts_per_leaf: int, bw: float,
               outdir: str, **options) -> Session:
        """The leaf-spine of several planes of ``topologies.clos.PlanesTopo`` (hosts with one
        interface per plane) behind the controller."""
        return cls(0, 0, 0, bw, outdir, clos=planes_fabric(planes, spines, leaves,
                                                           hosts_per_leaf, bw), **options)

    def controller(self, log: str = "controller.log") -> ControllerProcess:
        extra = (["--mlroute-state", self.state] if self.state else []) + self.extra_args
        if self.ports.sflow != Ports.sflow:
            extra = ["--mlroute-sflow-port", str(self.ports.sflow)] + extra
        return ControllerProcess(self.fabric_path, os.path.join(self.dir, log), mode=self.mode,
                                 rest_port=self.ports.rest, of_port=self.ports.openflow,
                                 extra_args=extra, token=self.token)

    def wait_ready(self, timeout: float = 60) -> None:
        fabricnet.wait_until(lambda: self.ctl.rest("GET", "/v1/ready")[0] == 200, timeout,
                             what="every switch provisioned")

    def __enter__(self) -> Session:
        fabricnet.prepare(self.dir, self.fabric_path, self.fabric)
        try:
            s, l, h = self.shape
            self.progress(f"starting the controller (log {self.ctl_log})")
            self.ctl = self.controller()
            self.ctl.launch()  # its start-up overlaps the fabric's build
            self.progress("building the fabric: " + (self.clos.summary() if self.clos else
                                                     f"{s} spines x {l} leaves x {h} hosts"))
            self._building = True
            self.net = fabricnet.build(*self.shape, self.bw, self.ctl.of_port, clos=self.clos,
                                       sflow_collector=self.ports.sflow_collector())
            self._building = False
            self.ctl.wait_answering()
            fabricnet.start(self.net, timeout=60)
            self.progress("waiting for every switch to be provisioned")
            self.wait_ready()
            self.progress("fabric ready")
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def restart_controller(self, extra_args: list[str] | None = None,
                           log: str = "controller-again.log") -> None:
        """Stop the controller and start it again (with ``extra_args`` instead of the current
        ones when given); returns once it has read and repaired every switch."""
        self.ctl.stop()
        if extra_args is not None:
            self.extra_args = list(extra_args)
        self.ctl = self.controller(log=log).start()
        self.wait_ready(timeout=60)

    @property
    def ctl_log(self) -> str:
        return os.path.join(self.dir, "controller.log")

    def __exit__(self, exc_type=None, exc=None, tb=None) -> None:
        """Stop the fabric, then the controller, with SIGINT and SIGTERM held; a signal that
        arrived meanwhile is raised as KeyboardInterrupt afterwards unless an exception is
        already on its way. Idempotent: a teardown started again continues where it was."""
        interrupted = False
        while True:
            try:
                with signals_held() as got:
                    self._teardown()
                interrupted = interrupted or bool(got)
                break
            except KeyboardInterrupt:  # arrived before the handlers were in place: go on
                interrupted = True
        if interrupted and exc_type is None:
            raise KeyboardInterrupt

    def _teardown(self) -> None:
        dirty = self._building
        if self.net is not None or dirty:
            self.progress("stopping the fabric")
        try:
            if self.net is not None:
                net, self.net = self.net, None
                try:
                    fabricnet.stop(net)
                except Exception as e:  # noqa: BLE001 - half-started fabric: clean up below
                    _stderr(f"warning: stopping the fabric: {e}; cleaning up instead")
                    dirty = True
        finally:
            if self.ctl is not None:
                self.progress("stopping the controller")
                self.ctl.stop()
            if dirty:  # a half-built fabric: its bridges, links and node shells
                fabricnet.cleanup()
                self._building = False
