"""Shared by the integration tests: skip without root or Open vSwitch, and the running emulation
(real ryu-manager with mlroute, Mininet fabric of Open vSwitch switches, 2 spines x 4 leaves x 2
hosts by default)."""
from __future__ import annotations

import os
import shutil

import pytest

from emulation.session import Session

SPINES, LEAVES, HOSTS = 2, 4, 2


def require_root_and_ovs():
    if os.geteuid() != 0:
        pytest.skip("integration tests need root")
    for tool in ("ovs-vsctl", "mnexec", "ovs-ofctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"integration tests need {tool} (make system)")


def default_session(tmp, bw=0.0, mode="flow", state=False,
                    stats_interval=0.2) -> Session:
    """The default emulation of the integration tests, in ``tmp``. Statistics are polled often
    so that their replies race with rule installation, as they would under load."""
    return Session(SPINES, LEAVES, HOSTS, bw, str(tmp), mode=mode, state=state,
                   extra_args=["--mlroute-stats-interval", str(stats_interval)])
