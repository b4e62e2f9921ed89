"""serve.server.run_while: the cause of a client's failure when what it talks to went away."""

from __future__ import annotations

import sys

from trtsweep.serve import server

FAILS_AT_ONCE = [sys.executable, "-c", "import sys; sys.exit('connection reset by peer')"]


def test_a_client_failing_before_the_next_poll_is_asked_why_and_gets_the_servers_exit() -> None:
    watched = server.run_while(FAILS_AT_ONCE, lambda: "server killed by signal 9 (SIGKILL)", poll_s=30)
    assert watched.returncode == 1
    assert watched.server_gone == "server killed by signal 9 (SIGKILL)"


def test_a_client_failing_while_its_server_serves_keeps_its_own_error() -> None:
    watched = server.run_while(FAILS_AT_ONCE, lambda: None, poll_s=30)
    assert (watched.returncode, watched.server_gone) == (1, None)
    assert "connection reset by peer" in watched.stderr


def test_a_client_that_succeeds_is_not_asked() -> None:
    asked: list[int] = []
    watched = server.run_while([sys.executable, "-c", "pass"], lambda: asked.append(1) or "gone", poll_s=30)
    assert (watched.returncode, watched.server_gone, asked) == (0, None, [])
