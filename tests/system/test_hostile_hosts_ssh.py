"""Hosts that misbehave (issue 40 item 11), followed live by the monitor and read through a real OpenSSH: a
bad frame or a silent host is a reconnect with backoff, said in the header with the host's name; the monitor
stays up. The host's side is played by tests/helpers/fake_ssh.py: as a stand-in ``ssh`` on PATH, or behind a
real sshd on 127.0.0.1 as its ``ForceCommand`` (the real client, the real server, a hostile remote program)."""

from __future__ import annotations

import pytest

from tests.helpers.fake_ssh import FAKE_SSH, on_path


@pytest.mark.parametrize("mode, words", [("negative", "a frame announces -5 bytes"),
                                         ("stringclock", "its first frame has no clock"),
                                         ("silent", "no frame for")])
async def test_the_monitor_following_a_misbehaving_host_says_which_and_reconnects(tmp_path, monkeypatch, mode,
                                                                                  words):
    """Followed live (the monitor), a host's bad frame or its silence is a reconnect with backoff, said in the
    header with the host's name and the reason; the monitor stays up and answers its keys."""
    from mstop.app import MonitorApp
    from mstop.live import MonitorOptions
    from mstop.sources import Connection
    from tests.helpers.app_common import screen_lines, settle

    on_path(tmp_path, monkeypatch, mode)
    # a 1 s connect timeout (--connect-timeout 1): a silent host is given up after its frame deadline and that
    app = MonitorApp("fakehost:/runs/a", options=MonitorOptions(connection=Connection((), 1.0)))
    async with app.run_test(size=(160, 40)) as pilot:
        def said() -> bool:
            screen = "\n".join(screen_lines(app))
            return "fakehost" in screen and words in screen and "reconnecting" in screen
        await settle(pilot, said, tries=3000 if mode == "silent" else 1000)
        await pilot.press("?")  # still answering its keys
        await pilot.pause(0.3)
        assert "help" in "\n".join(screen_lines(app)).lower()


@pytest.fixture(scope="module")
def hostile_sshd(tmp_path_factory):
    """A real sshd whose every session runs the hostile host's program (its mode in a file beside it)."""
    import sys

    from tests.helpers import sshd

    if sshd.missing_reason():
        pytest.skip(sshd.missing_reason())
    tmp = tmp_path_factory.mktemp("hostile-sshd")
    (tmp / "host.py").write_text(FAKE_SSH)
    server = sshd.start(tmp / "sshd", force_command=f"{sys.executable} {tmp / 'host.py'}")
    yield server, tmp / "mode"
    sshd.stop(server)


@pytest.mark.parametrize("mode, words", [("negative", "a frame announces -5 bytes"),
                                         ("stringclock", "its first frame has no clock (got 'noon')"),
                                         ("probe-list", "an answer that does not read (not a JSON object)"),
                                         ("list", "unexpected output from the remote side")])
def test_a_misbehaving_host_behind_a_real_sshd_is_named_with_what(hostile_sshd, mode, words):
    """The one-shot read (``summary host:/path``) through the real ssh client and server: an exit code, the
    host's name and what was wrong, no traceback, within seconds."""
    import subprocess
    import sys
    import time

    from tests.helpers.common import ROOT

    server, mode_file = hostile_sshd
    mode_file.write_text(mode)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mstop", "summary", "testhost:/runs/a", "--json", "-F",
                           str(server.config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "testhost" in proc.stderr and words in proc.stderr, proc.stderr
    assert time.monotonic() - t0 < 30


async def test_the_monitor_following_a_host_behind_a_real_sshd_reconnects_and_says_so(hostile_sshd):
    from mstop.app import MonitorApp
    from mstop.live import MonitorOptions
    from tests.helpers.app_common import screen_lines, settle

    server, mode_file = hostile_sshd
    mode_file.write_text("negative")
    app = MonitorApp("testhost:/runs/a", options=MonitorOptions(connection=server.connection()))
    async with app.run_test(size=(160, 40)) as pilot:
        def said() -> bool:
            screen = "\n".join(screen_lines(app))
            return "testhost" in screen and "a frame announces -5 bytes" in screen and "reconnecting" in screen
        await settle(pilot, said, tries=1000)
