import pytest

from controller.errors import InputError
from controller.model.clos import Clos, load_fabric
from controller.model.fabric import spine_list
from controller.model.jobs import parse_job, parse_jobs
from tests.helpers import fabric


def test_generate_names_and_failed_spines():
    f = Clos.generate(4, 3, 2, failed_spines=1).as_leaf_spine()
    assert f.spines == ["s0", "s1", "s2", "s3"]
    assert f.hosts["h2_1"] == "l2"
    assert f.alive_spines() == [0, 1, 2]
    assert f.uniform()
    assert spine_list(f.usable_mask(0, 1)) == [0, 1, 2]


def test_round_trip_and_single_link_down():
    f = load_fabric({"spines": ["a", "b"], "leaves": ["x", "y"],
                     "hosts": {"h1": "x", "h2": "y"}, "down": [["b", "x"]]}).as_leaf_spine()
    assert f.down == {("x", "b")}  # either order accepted
    assert not f.uniform()
    assert spine_list(f.usable_mask(0, 1)) == [0]
    assert load_fabric(f.to_dict()).as_leaf_spine().down == f.down


@pytest.mark.parametrize("doc, message", [
    ({"leaves": ["l0"], "hosts": {}}, "missing field 'spines'"),
    ({"spines": [], "leaves": ["l0"], "hosts": {}}, "'spines' must be a non-empty list"),
    ({"spines": ["s0"], "leaves": ["l0"], "hosts": {"h": "l9"}}, "unknown leaf"),
    ({"spines": ["s0", "s0"], "leaves": ["l0"], "hosts": {}}, "duplicate name 's0' in 'spines'"),
    ({"spines": ["s0"], "leaves": ["l0"], "hosts": {}, "link_gbps": -1}, "positive"),
    ({"spines": ["s0"], "leaves": ["l0"], "hosts": {}, "down": [["l0", "s5"]]}, "not linked"),
    ([], "expected a JSON object"),
])
def test_bad_fabric(doc, message):
    with pytest.raises(InputError, match=message):
        load_fabric(doc)


def test_ring_job_flows_and_ideal():
    f = fabric()
    job = parse_job({"id": "g", "collective": "ring_allreduce",
                     "ranks": ["h0_0", "h1_0", "h2_0", "h3_0"], "bytes": 4e9}, f)
    flows = job.flows()
    assert [(x.src, x.dst) for x in flows] == [("h0_0", "h1_0"), ("h1_0", "h2_0"),
                                               ("h2_0", "h3_0"), ("h3_0", "h0_0")]
    assert all(x.bytes == 1e9 for x in flows)
    assert job.steps() == 6
    # 2(n-1) S/n / C = 6 * 1e9 B / 12.5e9 B/s
    assert job.ideal_allreduce_s(f.link_bps()) == pytest.approx(0.48)


def test_multi_ring_job():
    f = fabric()
    job = parse_job({"id": "m", "rings": [["h0_0", "h1_0"], ["h0_1", "h1_1", "h2_1"]],
                     "bytes": 6e6}, f)
    assert len(job.flows()) == 5
    assert job.steps() == 4


@pytest.mark.parametrize("job, message", [
    ({"id": "x", "ranks": ["h0_0", "nope"], "bytes": 1}, "unknown host 'nope'"),
    ({"id": "x", "ranks": [], "bytes": 1}, "ring 0 is empty"),
    ({"id": "x", "ranks": ["h0_0"], "bytes": 1}, "at least 2 ranks"),
    ({"id": "x", "ranks": ["h0_0", "h1_0"], "bytes": -5}, "must be positive"),
    ({"id": "x", "ranks": ["h0_0", "h1_0"]}, "bytes is missing"),
    ({"id": "x", "ranks": ["h0_0", "h0_0"], "bytes": 1}, "appears twice"),
    ({"id": "x", "flows": [{"src": "h0_0", "dst": "h0_0", "bytes": 1}]}, "same host"),
    ({"id": "x", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1, "sport": 70000}]}, "sport"),
    ({"id": "x", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1, "color": 1}]}, "unknown field"),
    ({"id": "x", "flows": [], "ranks": ["h0_0", "h1_0"]}, "exactly one of 'flows'"),
    ({"id": "", "flows": []}, "'id'"),
    ({"id": "x", "collective": "all_to_all", "ranks": ["h0_0", "h1_0"], "bytes": 1}, "unsupported"),
])
def test_bad_jobs(job, message):
    with pytest.raises(InputError, match=message):
        parse_job(job, fabric())


def test_duplicate_job_ids():
    doc = {"jobs": [{"id": "a", "ranks": ["h0_0", "h1_0"], "bytes": 1}] * 2}
    with pytest.raises(InputError, match="duplicate job id"):
        parse_jobs(doc, fabric())


def test_udp_five_tuple():
    job = parse_job({"id": "u", "flows": [{"src": "h0_0", "dst": "h1_0", "bytes": 1,
                                           "proto": "udp", "sport": 49152, "dport": 4791}]},
                    fabric())
    assert job.flows()[0].five_tuple() == ("h0_0", "h1_0", 17, 49152, 4791)
