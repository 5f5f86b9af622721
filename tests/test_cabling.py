"""A fabric declared from a cabling table and a host table (``model.cabling``, ``mlroute
fabric --cabling --hosts``): the document the emulation's builder writes comes back from the
tables of its own cables, with no datapath id given; bad tables are refused naming the cable."""
import csv
import json

import pytest

from controller.cli import main as cli_main
from controller.errors import InputError
from controller.model.cabling import CABLE_COLUMNS, HOST_COLUMNS, document, read_table
from controller.model.clos import Clos
from controller.model.clos_wiring import wire


def tables(c: Clos, both_ends: bool = False) -> tuple[list[dict], list[dict]]:
    """The cabling and host tables of a wired fabric, interfaces named as the emulation
    names them (``SWITCH-eth<port>``, ``HOST-eth<plane>``)."""
    cables, hosts = [], []
    for lo, up in c.links():
        for a, b in zip(c.ports_to(lo, up), c.ports_to(up, lo)):
            cables.append(dict(switch=lo, interface=f"{lo}-eth{a}", peer=up,
                               peer_interface=f"{up}-eth{b}"))
            if both_ends:  # an LLDP list: each switch reports its neighbours
                cables.append(dict(switch=up, interface=f"{up}-eth{b}", peer=lo,
                                   peer_interface=f"{lo}-eth{a}"))
    for h, leaves in c.host_leaves.items():
        for q, leaf in enumerate(leaves):
            hosts.append(dict(host=h, address=c.ip_of(h, q), leaf=leaf,
                              interface=f"{leaf}-eth{c.ports[leaf][h]}",
                              host_interface=f"{h}-eth{q}"))
    return cables, hosts


FABRICS = {"leaf-spine": lambda: Clos.leaf_spine(2, 3, 2),
           "fat-tree": lambda: Clos.fat_tree(4),
           "bundles": lambda: Clos.leaf_spine(2, 2, 1, bundle=2),
           "planes": lambda: Clos.leaf_spine(2, 2, 2, planes=2)}


@pytest.mark.parametrize("name", FABRICS)
def test_the_tables_of_the_emulations_cables_give_its_document_back(name):
    c = FABRICS[name]()
    c = c.wire(wire(c))
    doc = document(*tables(c, both_ends=name == "fat-tree"))
    got = Clos.from_dict(doc)
    assert got.summary() == c.summary()
    for key in ("ports", "dpids", "host_ip", "host_mac"):
        assert doc[key] == c.to_dict()[key], key
    assert sorted(got.links()) == sorted(c.links())
    assert all(got.bundle(*link) == c.bundle(*link) for link in c.links())
    assert doc["interfaces"]["h0_0"] == {leaf: f"h0_0-eth{q}"
                                         for q, leaf in enumerate(c.host_leaves["h0_0"])}


def test_ports_follow_the_natural_order_of_the_names_and_keep_them():
    cables = [{"switch": "leaf1", "interface": f"Ethernet{4 * k}", "peer": f"spine{k}",
               "peer_interface": "Ethernet0"} for k in (0, 1, 2, 3, 10)]
    hosts = [{"host": "gpu1", "address": "192.168.7.1", "leaf": "leaf1",
              "interface": "Ethernet100", "mac": "0c:42:a1:00:00:01"}]
    doc = document(cables, hosts)
    assert doc["ports"]["leaf1"] == {"spine0": 1, "spine1": 2, "spine2": 3, "spine3": 4,
                                     "spine10": 5, "gpu1": 6}
    assert doc["interfaces"]["leaf1"]["spine10"] == "Ethernet40"
    assert doc["host_mac"] == {"gpu1": "0c:42:a1:00:00:01"}
    assert "gpu1" not in doc["interfaces"]  # no host_interface: its files use the default


@pytest.mark.parametrize("edit, words", [
    (lambda cab, hosts: cab.pop(0), "l0 has no cable to s0"),
    (lambda cab, hosts: cab.append(dict(cab[0], peer="s1", peer_interface="s1-eth9")),
     "l0 l0-eth1 is cabled to s0 s0-eth1 and to s1 s1-eth9"),
    (lambda cab, hosts: hosts[0].update(leaf="nowhere"), "leaf nowhere has no cable"),
    (lambda cab, hosts: hosts.append(dict(hosts[0])), "host h0_0 is listed twice on leaf l0"),
    (lambda cab, hosts: hosts[1].update(address=hosts[0]["address"]),
     "share the IPv4 address 10.0.0.1"),
    (lambda cab, hosts: cab.append(dict(switch="s0", interface="s0-eth7", peer="s1",
                                        peer_interface="s1-eth7")),
     "s0 is cabled to s1, another switch of its tier"),
    (lambda cab, hosts: cab.append(dict(switch="h0_0", interface="eth0", peer="l0",
                                        peer_interface="l0-eth9")),
     "host h0_0 eth0 is cabled to l0 l0-eth9, the host table says l0 l0-eth3"),
])
def test_a_bad_table_is_refused_naming_the_cable(edit, words):
    c = Clos.leaf_spine(2, 2, 2)
    cab, hosts = tables(c.wire(wire(c)))
    edit(cab, hosts)
    with pytest.raises(InputError) as e:
        document(cab, hosts)
    assert words in str(e.value)


def test_a_cable_to_a_host_gives_the_hosts_interface():
    c = Clos.leaf_spine(1, 1, 1)
    cab, hosts = tables(c.wire(wire(c)))
    del hosts[0]["host_interface"]
    cab.append(dict(switch="l0", interface="l0-eth2", peer="h0_0", peer_interface="ens1f0"))
    assert document(cab, hosts)["interfaces"]["h0_0"] == {"l0": "ens1f0"}


def _csv(path, rows, columns):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def test_mlroute_fabric_reads_csv_and_json_tables(tmp_path, capsys):
    c = Clos.fat_tree(4)
    cab, hosts = tables(c.wire(wire(c)))
    _csv(tmp_path / "cabling.csv", cab, CABLE_COLUMNS)
    (tmp_path / "hosts.json").write_text(json.dumps(hosts))
    assert cli_main(["fabric", "--cabling", str(tmp_path / "cabling.csv"), "--hosts",
                     str(tmp_path / "hosts.json"), "--gbps", "400",
                     "--out", str(tmp_path / "f.json")]) == 0
    assert "wired (ports, addresses and interface names)" in capsys.readouterr().out
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["ports"] == c.to_dict()["ports"] and doc["link_gbps"] == 400
    assert read_table(str(tmp_path / "cabling.csv"), CABLE_COLUMNS, "cabling") == cab
    (tmp_path / "bad.csv").write_text("host,address,leaf\nh,10.0.0.1,l0\n")
    assert cli_main(["fabric", "--cabling", str(tmp_path / "cabling.csv"), "--hosts",
                     str(tmp_path / "bad.csv")]) == 2
    assert "missing 'interface'" in capsys.readouterr().err
    assert cli_main(["fabric", "--cabling", str(tmp_path / "cabling.csv")]) == 2
    assert "--cabling and --hosts go together" in capsys.readouterr().err
    assert HOST_COLUMNS[-1] == "interface"


def test_mlroute_fabric_wired_is_the_emulations_document(tmp_path):
    from topologies.clos import clos_fabric
    assert cli_main(["fabric", "--spines", "2", "--leaves", "3", "--hosts-per-leaf", "2",
                     "--wired", "--out", str(tmp_path / "f.json")]) == 0
    assert json.loads((tmp_path / "f.json").read_text()) == clos_fabric(2, 3, 2).to_dict()
