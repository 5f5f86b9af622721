"""Fixtures shared by several test modules."""
import os

import pytest

from emulation.harness.ha import ETCD, EtcdServer
from emulation.harness.session import install_interrupt_handler


def pytest_configure(config):
    """SIGTERM (``timeout``, a CI job cancelled, a script's kill) stops a run as Ctrl-C does, in
    every process of it (xdist's workers load this file too), so fixtures' teardowns run: the
    etcd servers, controllers and emulations they started are not left behind (they run in
    sessions of their own, which the signal does not reach)."""
    install_interrupt_handler()


@pytest.fixture(scope="module")
def etcd_server(tmp_path_factory):
    """A private etcd on loopback ports for one test module (skipped without the binary)."""
    if not os.path.exists(ETCD):
        pytest.skip("etcd is not installed (apt-get install etcd-server)")
    with EtcdServer(str(tmp_path_factory.mktemp("etcd"))) as s:
        yield s
