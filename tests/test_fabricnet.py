"""The emulation's machine settings (``emulation.harness.fabricnet``) that need no switch."""
from emulation.harness.fabricnet import ensure_switch_priority


def test_autogroup_scheduling_is_turned_off(tmp_path):
    switch = tmp_path / "sched_autogroup_enabled"
    switch.write_text("1\n")
    assert ensure_switch_priority(str(switch)) is True
    assert switch.read_text().strip() == "0"
    assert ensure_switch_priority(str(switch)) is False  # already off: left as it is
    assert switch.read_text().strip() == "0"


def test_a_kernel_without_autogroups_is_left_alone(tmp_path):
    assert ensure_switch_priority(str(tmp_path / "absent")) is False
    assert not (tmp_path / "absent").exists()
