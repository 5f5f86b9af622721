"""One running emulation: the mlroute controller (real ryu-manager, a subprocess) in front of a
Mininet leaf-spine of Open vSwitch switches, every switch provisioned. Always torn down.

    with Session(4, 8, 2, bw=10, outdir="results/x") as s:
        s.ctl.rest("POST", "/v1/jobs", job); s.net.get("h0_0").cmd(...)
"""
from __future__ import annotations

import json
import os

from controller.errors import InputError
from emulation import fabricnet
from emulation.controller_proc import ControllerProcess
from topologies.clos import clos_fabric


class Session:
    def __init__(self, spines: int, leaves: int, hosts_per_leaf: int, bw: float, outdir: str,
                 mode: str = "flow", state: bool = False, extra_args: list[str] | None = None):
        self.shape = (spines, leaves, hosts_per_leaf)
        self.bw = bw
        self.dir = outdir
        self.mode = mode
        self.fabric = clos_fabric(spines, leaves, hosts_per_leaf, bw)
        self.fabric_path = os.path.join(outdir, "fabric.json")
        self.state = os.path.join(outdir, "state.db") if state else None
        self.extra_args = list(extra_args or [])
        self.ctl: ControllerProcess | None = None
        self.net = None

    def controller(self, log: str = "controller.log") -> ControllerProcess:
        extra = (["--mlroute-state", self.state] if self.state else []) + self.extra_args
        return ControllerProcess(self.fabric_path, os.path.join(self.dir, log), mode=self.mode,
                                 extra_args=extra)

    def wait_ready(self, timeout: float = 60) -> None:
        fabricnet.wait_until(lambda: self.ctl.rest("GET", "/v1/fabric")[1].get("ready"), timeout,
                             what="every switch provisioned")

    def __enter__(self) -> "Session":
        if os.geteuid() != 0:
            raise InputError("the emulation needs root (Mininet, Open vSwitch)")
        os.makedirs(self.dir, exist_ok=True)
        with open(self.fabric_path, "w") as fh:
            json.dump(self.fabric.to_dict(), fh)
        fabricnet.ensure_ovs()
        fabricnet.cleanup()  # leftovers of a killed run; no controller of ours runs yet
        try:
            self.ctl = self.controller().start()
            self.net = fabricnet.build(*self.shape, self.bw, self.ctl.of_port)
            fabricnet.start(self.net, timeout=60)
            self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.net is not None:
                self.net.stop()
                self.net = None
        finally:
            if self.ctl is not None:
                self.ctl.stop()
