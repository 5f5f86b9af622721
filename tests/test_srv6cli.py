"""``mlroute srv6-config`` as an operator runs it (``controller/srv6cli.py``): on what ``mlroute
fabric`` writes (wired here, deterministically, and the wired document written beside the
files), on a fabric declared from its cabling (the names as cabled), with a platform's
interface names or a mapping file, and the hosts' and sysctl files."""
import json
import os
import subprocess
import sys

import pytest

from controller.cli import main as cli_main
from controller.enforcement.ifnames import SCHEMES
from controller.enforcement.srv6_config import ROUTER_SYSCTLS, SYSCTLS
from controller.enforcement.srv6_hosts import HOST_SYSCTLS
from controller.model.cabling import document
from controller.model.clos import Clos
from controller.model.clos_wiring import wire
from tests.test_cabling import tables
from topologies.clos import clos_fabric


def _config(tmp_path, doc: dict, *extra: str) -> tuple:
    (tmp_path / "f.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    code = cli_main(["srv6-config", "--fabric", str(tmp_path / "f.json"), "--out", str(out),
                     *extra])
    return code, out


def test_an_unwired_document_is_wired_as_the_emulation_wires_it(tmp_path, capsys):
    assert cli_main(["fabric", "--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2",
                     "--out", str(tmp_path / "plain.json")]) == 0
    capsys.readouterr()
    code, out = _config(tmp_path, json.loads((tmp_path / "plain.json").read_text()))
    assert code == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    assert "wrote 14 files for 4 switches, 8 for 4 hosts" in said
    assert "give the controller" in said and str(out / "fabric.json") in said
    emulation = clos_fabric(2, 2, 2)
    assert json.loads((out / "fabric.json").read_text()) == emulation.to_dict()
    (tmp_path / "wired.json").write_text(json.dumps(emulation.to_dict()))
    assert cli_main(["srv6-config", "--fabric", str(tmp_path / "wired.json"), "--out",
                     str(tmp_path / "again")]) == 0
    assert "give the controller" not in capsys.readouterr().out
    for name in ("l0.batch", "l0.batch6", "s1.json", "hosts/h1_1.batch"):
        assert (out / name).read_text() == (tmp_path / "again" / name).read_text(), name


def test_a_cabled_fabric_names_its_interfaces_as_cabled(tmp_path):
    c = Clos.leaf_spine(2, 2, 1)
    cab, hosts = tables(c.wire(wire(c)))
    for row in cab:  # a Cumulus fabric cabled with gaps
        row["interface"] = f"swp{10 + int(row['interface'].rsplit('eth', 1)[1])}"
        row["peer_interface"] = f"swp{20 + int(row['peer_interface'].rsplit('eth', 1)[1])}"
    for row in hosts:
        row.update(interface="swp49", host_interface="ens1f0")
    code, out = _config(tmp_path, document(cab, hosts), "--interfaces", "sonic")
    assert code == 0
    batch = (out / "l0.batch").read_text()
    assert "dev swp11 nodad" in batch and "dev swp12 nodad" in batch
    assert "rule add pref 901 iif swp49 blackhole" in batch
    assert "dev swp21 nodad" in (out / "s0.batch").read_text()
    assert "swp49" in json.loads((out / "l0.json").read_text())["INTERFACE"]
    assert "dev ens1f0" in (out / "hosts" / "h0_0.batch").read_text()
    assert "Name=ens1f0" in (out / "hosts" / "h0_0.network").read_text()


@pytest.mark.parametrize("scheme, spine_port1", [("linux", "s0-eth1"), ("sonic", "Ethernet0"),
                                                 ("sonic8", "Ethernet0"), ("cumulus", "swp1")])
def test_a_platforms_names(tmp_path, scheme, spine_port1):
    code, out = _config(tmp_path, clos_fabric(2, 2, 1).to_dict(), "--interfaces", scheme)
    assert code == 0
    port2 = SCHEMES[scheme]("s0", 2)
    batch = (out / "s0.batch").read_text()
    assert f"dev {spine_port1} nodad" in batch and f"dev {port2} nodad" in batch
    assert spine_port1 in json.loads((out / "s0.json").read_text())["INTERFACE"]
    assert SCHEMES["sonic8"]("s0", 2) == "Ethernet8" and SCHEMES["sonic"]("s0", 2) == "Ethernet4"


def test_a_mapping_file_comes_first(tmp_path, capsys):
    (tmp_path / "names.json").write_text(json.dumps({"l0": {"1": "Ethernet64"},
                                                     "h0_0": {"0": "ens2"}}))
    code, out = _config(tmp_path, clos_fabric(2, 2, 1).to_dict(),
                        "--interfaces", str(tmp_path / "names.json"))
    assert code == 0
    batch = (out / "l0.batch").read_text()
    assert "dev Ethernet64 nodad" in batch and "dev l0-eth2 nodad" in batch
    assert "Ethernet64" in json.loads((out / "l0.json").read_text())["INTERFACE"]
    assert "Ethernet4" in json.loads((out / "l0.json").read_text())["INTERFACE"]
    assert "dev ens2" in (out / "hosts" / "h0_0.batch").read_text()
    (tmp_path / "names.json").write_text(json.dumps({"x9": {"1": "e"}}))
    assert _config(tmp_path, clos_fabric(2, 2, 1).to_dict(), "--interfaces",
                   str(tmp_path / "names.json"))[0] == 2
    assert "names 'x9', which is not in the fabric" in capsys.readouterr().err
    assert _config(tmp_path, clos_fabric(2, 2, 1).to_dict(), "--interfaces", "junos")[0] == 2


def test_every_host_gets_its_routes_link_address_and_networkd_file(tmp_path):
    code, out = _config(tmp_path, clos_fabric(2, 2, 2).to_dict())
    assert code == 0
    lines = (out / "hosts" / "h1_1.batch").read_text().splitlines()
    assert lines == ["addr replace 10.0.1.2/32 dev h1_1-eth0",
                     "addr replace fdfe:0:3::1/64 dev h1_1-eth0 nodad",
                     "route replace fcbb:bbbb::/32 via fdfe:0:3::2 dev h1_1-eth0",
                     "route replace 10.0.0.0/23 via inet6 fdfe:0:3::2 dev h1_1-eth0"]
    leaf = (out / "l1.batch").read_text()  # the leaf holds ::2 of that link, the host ::1
    assert "addr replace fdfe:0:3::2/64 dev l1-eth4 nodad" in leaf
    net = (out / "hosts" / "h1_1.network").read_text()
    for want in ("Name=h1_1-eth0", "Address=10.0.1.2/32", "Address=fdfe:0:3::1/64",
                 "Destination=fcbb:bbbb::/32\nGateway=fdfe:0:3::2",
                 "Destination=10.0.0.0/23\nGateway=fdfe:0:3::2"):
        assert want in net, want


def test_the_sysctl_files_hold_every_sysctl_the_code_sets(tmp_path):
    code, out = _config(tmp_path, clos_fabric(2, 2, 1).to_dict())
    assert code == 0
    router = (out / "sysctl.d" / "90-mlroute-router.conf").read_text()
    host = (out / "sysctl.d" / "90-mlroute-host.conf").read_text()
    settings = [line for line in router.splitlines() if not line.startswith("#")]
    assert [s.replace(" = ", "=") for s in settings] == list(SYSCTLS)
    for must in ("net.ipv6.conf.all.keep_addr_on_down = 1",
                 "net.ipv6.fib_multipath_hash_policy = 1",
                 "net.ipv4.fib_multipath_hash_policy = 3"):
        assert must in router, must
    assert "net.ipv6.conf.all.keep_addr_on_down = 1" in host
    assert len(ROUTER_SYSCTLS) == len(SYSCTLS) and all(why for *_, why in HOST_SYSCTLS)


def test_every_sysctl_of_the_files_is_one_this_kernel_has(tmp_path):
    """Each line is ``key = value`` and the key exists under /proc/sys (read only: nothing is
    set on the machine)."""
    code, out = _config(tmp_path, clos_fabric(2, 2, 1).to_dict())
    assert code == 0
    for name in ("90-mlroute-router.conf", "90-mlroute-host.conf"):
        for line in (out / "sysctl.d" / name).read_text().splitlines():
            if line.startswith("#"):
                continue
            key, eq, value = line.partition(" = ")
            assert eq and value, line
            assert os.path.exists("/proc/sys/" + key.replace(".", "/")), key


def test_the_agents_help_says_what_credential_it_needs():
    r = subprocess.run([sys.executable, "-m", "controller.agent.main", "--help"],
                       capture_output=True, text=True, timeout=60, env={"COLUMNS": "200"})
    text = " ".join(r.stdout.split())
    token = text[text.index("--token TOKEN "):]
    cred = text[text.index("--credential-file FILE "):text.index("--token TOKEN ")]
    assert "mlroute agent-credential HOST" in cred and "--mlroute-host-secret-file" in cred
    assert "admin token" in cred and "docs/howto/security.md" in cred
    assert "that credential itself" in token


def test_every_router_gets_the_probes_priority_class_on_each_fabric_port(tmp_path):
    """``SWITCH.tc`` (``tc -batch``): ``priority_tc`` for every port with a link address
    (fabric links and a leaf's host ports), under the names the batch uses; nothing else."""
    from controller.enforcement.srv6_config import PROBE_DSCP, priority_tc
    code, out = _config(tmp_path, clos_fabric(2, 2, 2).to_dict(), "--format", "iproute2")
    assert code == 0
    for sw, ports in (("s0", [1, 2]), ("l0", [1, 2, 3, 4])):
        lines = (out / f"{sw}.tc").read_text().splitlines()
        want = [x for p in ports for x in priority_tc(f"{sw}-eth{p}", PROBE_DSCP)]
        assert lines == want
        batch = (out / f"{sw}.batch").read_text()
        assert all(f"dev {sw}-eth{p} " in batch for p in ports)
    assert len(list(out.glob("*.tc"))) == 4
    (tmp_path / "sonic").mkdir()
    code, out = _config(tmp_path / "sonic", clos_fabric(2, 2, 2).to_dict(), "--format", "sonic")
    assert code == 0 and not list(out.glob("*.tc"))  # SONiC: its own QoS tables
