"""Fixtures shared by several test modules."""
import os

import pytest

from emulation.harness.ha import ETCD, EtcdServer


@pytest.fixture(scope="module")
def etcd_server(tmp_path_factory):
    """A private etcd on loopback ports for one test module (skipped without the binary)."""
    if not os.path.exists(ETCD):
        pytest.skip("etcd is not installed (apt-get install etcd-server)")
    with EtcdServer(str(tmp_path_factory.mktemp("etcd"))) as s:
        yield s
