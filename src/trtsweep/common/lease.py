"""The run's lease on a host as its readers judge it: by a counter, aged on the reader's own monotonic clock.

The controller's heartbeat for the host (fleet/heartbeat.py) writes a new counter into the lease file every few
seconds. The host's readers (each server's supervisor, the lane runner, each lane) never look at the file's
modification time, which an NTP step moves (a step forward past the TTL stopped servers mid-benchmark, a step back
kept a dead controller's lease fresh), nor at any other host's clock: a reader notes when it last saw the file's
content change, on its own monotonic clock. The lease has lapsed for a reader when

- its content did not change for the TTL (the heartbeat stopped writing: a dead controller, a cut link);
- it was there and is gone (the heartbeat's `end`: the run is over or was stopped): at once;
- it never appeared within the TTL from the reader's start (a reader that starts before the first beat reaches the
  host gets the whole TTL, not an immediate stop);
- it could not be read (a stale NFS handle, EIO) for the TTL since it last changed: a read that fails is no news,
  never a reader's crash.

A change is dated when the reader sees it, so a reader that asks rarely (a lane, between points) has the file looked
at in the background (`LeaseWatch.followed`). A lapse is final.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path


class LeaseWatch:
    """One reader's view of the lease file `path` with its TTL (`lapsed()`: why it no longer holds, or None)."""

    def __init__(self, path: Path, ttl_s: float) -> None:
        self.path, self.ttl_s = path, ttl_s
        self._content: bytes | None = None  # as last seen; None: never seen
        self._changed = time.monotonic()  # when it was last seen to change (first: the watch's start)
        self._lapsed: str | None = None
        self._lock = threading.Lock()

    def lapsed(self) -> str | None:
        """Why the run's lease no longer holds, in one line; None while it holds."""
        with self._lock:
            if self._lapsed is None:
                self._lapsed = self._look()
            return self._lapsed

    def _look(self) -> str | None:
        now = time.monotonic()
        try:
            content = self.path.read_bytes()
        except FileNotFoundError:
            if self._content is not None:
                return f"the run's lease {self.path} was removed (the run ended or was stopped)"
            if now - self._changed > self.ttl_s:
                return f"the run's lease {self.path} did not appear within {self.ttl_s:g} s"
            return None
        except OSError as exc:  # a stale NFS handle, EIO: no news; it lapses only if it stays unreadable for the TTL
            age = now - self._changed
            if age <= self.ttl_s:
                return None
            return f"the run's lease {self.path} could not be read for {age:.0f} s ({exc.strerror or exc})"
        if content != self._content:
            self._content, self._changed = content, now
            return None
        age = now - self._changed
        return f"the run's lease {self.path} was not renewed for {age:.0f} s" if age > self.ttl_s else None

    @contextlib.contextmanager
    def followed(self, every_s: float) -> Iterator[LeaseWatch]:
        """Look at the lease every `every_s` seconds in a thread of its own while the block runs."""
        done = threading.Event()

        def follow() -> None:
            while not done.wait(every_s):
                self.lapsed()

        thread = threading.Thread(target=follow, name="lease-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()
