"""The run's lease as its readers on the host judge it (trtsweep/common/lease.py): by the counter the heartbeat writes
into it, aged on the reader's monotonic clock; the file's modification time (an NTP step moves it) counts for nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.conftest import wait_for
from trtsweep.common.fileio import atomic_write_text
from trtsweep.common.lease import LeaseWatch

TTL_S = 1.0
HOUR_S = 3600.0


def beat(lease: Path, counter: int) -> None:
    """What the host's renew_loop does with a line of the heartbeat: the counter, written whole."""
    atomic_write_text(lease, f"{counter}\n")


def shift_mtime(lease: Path, seconds: float) -> None:
    stamp = time.time() + seconds
    os.utime(lease, (stamp, stamp))


def test_an_advancing_counter_holds_the_lease_whatever_its_mtime_says(tmp_path):
    lease = tmp_path / "run.lease"
    watch = LeaseWatch(lease, TTL_S)
    start = time.monotonic()
    counter = 0
    while time.monotonic() - start < 3 * TTL_S:  # an NTP step back by an hour after every beat
        counter += 1
        beat(lease, counter)
        shift_mtime(lease, -HOUR_S)
        assert watch.lapsed() is None
        time.sleep(TTL_S / 5)


def test_a_counter_that_stops_advancing_lapses_after_the_ttl_of_monotonic_time(tmp_path):
    lease = tmp_path / "run.lease"
    beat(lease, 7)
    watch = LeaseWatch(lease, TTL_S)
    assert watch.lapsed() is None
    # the heartbeat is dead; the file is rewritten with the same counter and its mtime stepped an hour ahead
    took = wait_for(lambda: beat(lease, 7) or shift_mtime(lease, HOUR_S) or watch.lapsed(), 5 * TTL_S)
    assert TTL_S <= took < TTL_S + 0.5
    assert watch.lapsed() == f"the run's lease {lease} was not renewed for 1 s"


def test_a_removed_lease_lapses_at_once_and_for_good(tmp_path):
    lease = tmp_path / "run.lease"
    beat(lease, 1)
    watch = LeaseWatch(lease, 60)
    assert watch.lapsed() is None
    lease.unlink()  # the heartbeat's `end`: the run is over
    assert watch.lapsed() == f"the run's lease {lease} was removed (the run ended or was stopped)"
    beat(lease, 2)
    assert watch.lapsed() is not None  # a lapse is final


def test_a_lease_not_written_yet_has_the_ttl_from_the_watchs_start(tmp_path):
    lease = tmp_path / "run.lease"
    watch = LeaseWatch(lease, TTL_S)
    assert watch.lapsed() is None
    took = wait_for(watch.lapsed, 5 * TTL_S)
    assert TTL_S <= took < TTL_S + 0.5
    assert watch.lapsed() == f"the run's lease {lease} did not appear within 1 s"
    late = LeaseWatch(lease, TTL_S)
    time.sleep(TTL_S / 2)
    beat(lease, 1)  # the first beat within the TTL: held, and aged from when it was seen
    assert late.lapsed() is None


def test_a_followed_watch_dates_a_change_when_it_happened_not_when_it_is_asked(tmp_path):
    """A lane asks only between points: the change it then sees may be minutes old."""
    lease = tmp_path / "run.lease"
    beat(lease, 1)
    watch = LeaseWatch(lease, TTL_S)
    with watch.followed(0.05):
        beat(lease, 2)
        time.sleep(TTL_S + 0.5)  # the last beat was seen by the watch's own looks, then nothing changed
        assert watch.lapsed() is not None
    unfollowed = LeaseWatch(lease, TTL_S)
    assert unfollowed.lapsed() is None  # first seen now: the whole TTL from here
