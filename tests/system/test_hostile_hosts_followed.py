"""Hosts that misbehave, followed live by the monitor (issue 40 item 11): a bad frame or a silent host is a
reconnect with backoff, said in the header with the host's name; the monitor stays up. The host is played by
a stand-in ``ssh`` (tests/helpers/fake_ssh.py), as in tests/unit/test_hostile_hosts.py."""

from __future__ import annotations

import os

import pytest

from tests.helpers.fake_ssh import FAKE_SSH


@pytest.mark.parametrize("mode, words", [("negative", "a frame announces -5 bytes"),
                                         ("stringclock", "its first frame has no clock"),
                                         ("silent", "no frame for")])
async def test_the_monitor_following_a_misbehaving_host_says_which_and_reconnects(tmp_path, monkeypatch, mode,
                                                                                  words):
    """Followed live (the monitor), a host's bad frame or its silence is a reconnect with backoff, said in the
    header with the host's name and the reason; the monitor stays up and answers its keys."""
    from mstop.app import MonitorApp
    from tests.helpers.app_common import screen_lines, settle

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "ssh").write_text(FAKE_SSH)
    (folder / "ssh").chmod(0o755)
    (folder / "mode").write_text(mode)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    app = MonitorApp("fakehost:/runs/a")
    async with app.run_test(size=(160, 40)) as pilot:
        def said() -> bool:
            screen = "\n".join(screen_lines(app))
            return "fakehost" in screen and words in screen and "reconnecting" in screen
        await settle(pilot, said, tries=3000 if mode == "silent" else 1000)
        await pilot.press("?")  # still answering its keys
        await pilot.pause(0.3)
        assert "help" in "\n".join(screen_lines(app)).lower()
