"""``topologies/routers.py`` without root: which ports get a class per peer (``fair_tc``)."""
from topologies.routers import RoutersTopo, fat_tree


def test_only_hosts_shaped_ports_know_their_peers():
    """Every host's fabric port lists the other hosts of its plane; routers' ports and the
    management links none; an unshaped fabric none at all."""
    f = fat_tree(4)
    topo = RoutersTopo(fabric=f, link={"bw": 20.0, "queue_bytes": 500_000})
    hosts = set(f.host_leaves)
    for a, b in topo.links():
        info = topo.linkInfo(a, b)
        peers = info.get("params1", {}).get("fair_peers")
        if a in hosts and b == f.host_leaves[a][0]:
            assert sorted(peers) == sorted(f.ip_of(h) for h in hosts if h != a), a
            assert len(peers) == 15
        else:
            assert peers is None and "fair_peers" not in info.get("params2", {}), (a, b)
    plain = RoutersTopo(fabric=f)
    assert not any(plain.linkInfo(a, b).get("params1") for a, b in plain.links())
    assert not any(RoutersTopo(fabric=f, link={"bw": 20.0}, fair=False).linkInfo(a, b).get(
        "params1") for a, b in plain.links())
