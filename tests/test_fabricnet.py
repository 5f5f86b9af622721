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


class _Host:
    """A Mininet host's two calls that ``pingall`` uses, run by bash on this machine with a
    ``ping`` on PATH that answers every address but those in ``down``."""

    def __init__(self, ip: str, path: str):
        self.name, self.ip, self.path, self.proc = f"h{ip}", ip, path, None

    def IP(self) -> str:
        return self.ip

    def sendCmd(self, cmd: str) -> None:
        import subprocess
        self.proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, text=True,
                                     env={"PATH": self.path})

    def waitOutput(self) -> str:
        # Mininet's shell is interactive: job lines and a prompt come before the answers
        return "[1] 4242\r\nmininet> \r\n" + self.proc.communicate(timeout=30)[0]


def test_pings_are_counted_once_per_answered_pair(tmp_path):
    import os
    import shutil
    from types import SimpleNamespace

    from emulation.harness.fabricnet import ping_pairs, pingall
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("bash", "echo"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bin_ / tool)
    (bin_ / "ping").write_text('#!/bin/bash\necho "answered ${@: -1}"\n'
                               '[ "${@: -1}" != 10.0.0.3 ]\n')
    (bin_ / "ping").chmod(0o755)
    def net(hosts):
        return SimpleNamespace(hosts=hosts, get={h.name: h for h in hosts}.get)
    hosts = [_Host(f"10.0.0.{i}", str(bin_)) for i in (1, 2, 3)]
    # 6 ordered pairs; the two towards 10.0.0.3 go unanswered
    assert pingall(net(hosts)) == 100.0 * 2 / 6
    assert pingall(net(hosts[:2])) == 0.0
    assert pingall(net([])) == 0.0
    # a host's pings to any addresses (the second plane's, say), all at once
    assert ping_pairs(net(hosts), [(hosts[0].name, "10.1.0.2"), (hosts[0].name, "10.0.0.3"),
                                   (hosts[1].name, "10.1.0.1")]) == [("h10.0.0.1", "10.0.0.3")]
