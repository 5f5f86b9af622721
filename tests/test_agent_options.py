"""The agent's option of its probes' class: its default, and a bad value refused with a
message naming it (exit 2, as argparse does)."""
import pytest

from controller.agent import options
from controller.enforcement.srv6_config import PROBE_DSCP

BASE = ["--url", "http://c:8080", "--host", "h0_0"]


def test_the_option_defaults_to_network_control_and_refuses_out_of_range(capsys):
    ap = options.parser("x")
    base = BASE
    assert ap.parse_args(base).probe_dscp == PROBE_DSCP == 48
    assert ap.parse_args(base + ["--probe-dscp", "46"]).probe_dscp == 46
    for bad in ("64", "-1", "ef"):
        with pytest.raises(SystemExit) as e:
            ap.parse_args(base + ["--probe-dscp", bad])
        assert e.value.code == 2
        assert f"a DSCP is a number from 0 to 63, not '{bad}'" in capsys.readouterr().err
