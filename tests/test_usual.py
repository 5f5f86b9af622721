"""What each sender usually reports (``measurement/usual.py``): one sFlow datagram or one
agent's report cannot freeze a job's learning (issue 74), and a sender whose rate, frames
or reporting really changed is believed soon."""
from types import SimpleNamespace

from controller.measurement.learner import MAX_SAMPLING_RATE, TrafficLearner
from controller.measurement.usual import BANK_S, JUMBO, LATE_S, ReportClock, UsualSampling


def sample(rate, frame=9000, agent="10.1.0.1", src="a", dst="b"):
    return SimpleNamespace(src=src, dst=dst, frame_length=frame, sampling_rate=rate,
                           agent=agent, sub_agent=0)


def test_one_datagram_at_the_highest_rate_counts_at_the_usual_rate():
    learner = TrafficLearner(1.0)
    for _ in range(3):
        learner.observe([sample(16)] * 5, now=0.1)
    learner.observe([sample(MAX_SAMPLING_RATE)], now=0.2)
    assert learner.window_pairs(1.1) == {("a", "b"): 16 * 9000 * 16}
    assert learner.clipped == 1 and learner.observed == 16


def test_a_rate_that_really_changed_is_believed_from_its_third_datagram():
    u, sw = UsualSampling(), ("10.1.0.1", 0)
    for _ in range(4):
        u.note(sw, 1024, 9000)
    believed = []
    for _ in range(4):
        believed.append(u.bound(sw)[0])
        u.note(sw, 8192, 9000)
    assert believed == [1024, 1024, 8192, 8192]
    u.note(sw, 256, 9000)  # a lower rate: its samples stand for less, believed at once
    assert u.bound(sw)[0] == 8192


def test_super_frames_are_believed_once_two_datagrams_showed_them():
    """Jumbo frames are believed of any sender; an emulated fabric's offloaded 64 KiB
    super-frames once two of the sender's last datagrams had them."""
    u, sw = UsualSampling(), ("10.1.0.1", 0)
    u.note(sw, 16, 1500)
    u.note(sw, 16, 1500)
    assert u.bound(sw) == (16, JUMBO)
    u.note(sw, 16, 65226)
    assert u.bound(sw) == (16, JUMBO)
    u.note(sw, 16, 65226)
    assert u.bound(sw) == (16, 65226)


def test_a_sender_heard_once_is_held_to_the_median_of_the_others():
    u = UsualSampling()
    assert u.bound(("first", 0)) == (1 << 20, 1 << 17)  # nothing known: at its word
    for rate, name in ((512, "a"), (1024, "b"), (4096, "c")):
        u.note((name, 0), rate, 9000)
        u.note((name, 0), rate, 9000)
        u.bound((name, 0))
    assert u.bound(("forged", 9)) == (1024, JUMBO)


def test_reports_cover_no_more_than_the_time_that_passed():
    """A host posting a report every 10 ms, each claiming a second, is believed for about
    the time that passed; one that reports every second, early or late, for its claims."""
    clock = ReportClock()
    total, now = 0.0, 0.0
    for _ in range(1000):
        covered = clock.believed("h", 1.0, now)
        clock.note("h", covered, now)
        total, now = total + covered, now + 0.01
    assert total <= 10.0 + BANK_S + LATE_S
    steady, now = ReportClock(), 0.0
    for gap in (1.0, 1.3, 0.7, 1.0, 1.45, 0.55, 1.0):
        now += gap
        assert steady.believed("h", 1.0, now) == 1.0
        steady.note("h", 1.0, now)
