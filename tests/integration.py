"""Shared fixture of the integration tests: real ryu-manager with mlroute and a Mininet fabric of
Open vSwitch switches (2 spines x 4 leaves x 2 hosts). Needs root and Open vSwitch, as in CI."""
from __future__ import annotations

import os
import shutil

import pytest

from emulation import fabricnet
from emulation.controller_proc import ControllerProcess
from topologies.clos import clos_fabric

SPINES, LEAVES, HOSTS = 2, 4, 2


def require_root_and_ovs():
    if os.geteuid() != 0:
        pytest.skip("integration tests need root")
    for tool in ("ovs-vsctl", "mnexec", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"integration tests need {tool} (make system)")


class Fabric:
    """The running emulation: controller process, Mininet net, fabric model."""

    def __init__(self, tmp, bw=0.0, mode="flow", state=False):
        self.fabric = clos_fabric(SPINES, LEAVES, HOSTS, bw)
        self.dir = str(tmp)
        path = os.path.join(self.dir, "fabric.json")
        with open(path, "w") as fh:
            import json
            json.dump(self.fabric.to_dict(), fh)
        self.state = os.path.join(self.dir, "state.db") if state else None
        self.ctl = self.controller(mode)
        self.bw = bw
        self.net = None

    def controller(self, mode="flow", log="controller.log") -> ControllerProcess:
        extra = ["--mlroute-state", self.state] if self.state else []
        return ControllerProcess(os.path.join(self.dir, "fabric.json"), os.path.join(self.dir, log),
                                 mode=mode, extra_args=extra)

    def wait_ready(self, timeout=60):
        fabricnet.wait_until(lambda: self.ctl.rest("GET", "/v1/fabric")[1].get("ready"), timeout,
                             what="every switch provisioned")

    def __enter__(self):
        fabricnet.ensure_ovs()
        fabricnet.cleanup()
        try:
            self.ctl.start()
            self.net = fabricnet.build(SPINES, LEAVES, HOSTS, self.bw)
            fabricnet.start(self.net, timeout=60)
            for h in self.net.hosts:
                h.cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0")
            self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.net is not None:
                self.net.stop()
        finally:
            self.ctl.stop()
            log = os.path.join(self.dir, "controller.log")
            if exc and exc[0] is not None and os.path.exists(log):
                print(open(log).read()[-4000:])
