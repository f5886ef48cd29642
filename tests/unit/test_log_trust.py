"""A rank's log is read only when the job could have written it (issue 40 item 9).

A start event's ``logs`` is a name in a file anyone with write access to the run dir could have written: it
must not make mstop show, name or read another user's file (a private key, ``/etc/shadow``), here or over
ssh. A file named as a log is read only when it is a regular file, not a link, inside the run's folder (or
the logs folder the user gave), or owned by the owner of the events file that named it; else the pane, the
header and ``summary --json`` say why, and nothing of the file is read.
"""

from __future__ import annotations

import json
import os

import pytest

from mstop.live import MonitorOptions
from mstop.live.session import MonitorSession
from mstop.sources.logs import find_rank_log
from tests.helpers.cli import mstop
from tests.helpers.log_trust import SECRET, T0, forged_run, private_file


def _summary(run) -> dict:
    out = mstop("summary", "--json", run)
    assert out.returncode in (0, 1, 2, 3), out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root (CI runs as root)")
def test_a_start_event_naming_another_users_file_shows_nothing_of_it(tmp_path):
    secret = private_file(tmp_path / "id_rsa")
    run = forged_run(tmp_path, [secret])
    path, why = find_rank_log(_session(run).store, [str(run)], 0)
    assert path is None and "belongs to another user" in why and "rank0.events.jsonl" in why
    js = _summary(run)
    assert js["status"] == "failed" and js["log_path"] is None
    assert js["error_line"] == "ValueError: the job's own abort"  # the abort's, not the named file's
    assert "belongs to another user" in js["log_refused"] and SECRET not in json.dumps(js)
    session = _session(run)
    pane = session.log_pane(0)
    assert pane.lines == [] and pane.problem.startswith("rank 0's log is not shown: ") and SECRET not in pane.problem
    assert not any(SECRET in line for line in session.culprit_error("failed"))
    session.source.stop()


def test_a_link_or_a_folder_named_as_a_log_is_never_read(tmp_path):
    """A link (to a file the viewer can read) is refused, whoever owns it; a directory or FIFO is not opened."""
    target = tmp_path / "readable.txt"
    target.write_text(SECRET + "\n")
    os.symlink(target, tmp_path / "train.log")
    os.mkfifo(tmp_path / "fifo.log")
    run = forged_run(tmp_path, [str(tmp_path / "train.log"), str(tmp_path / "fifo.log"), str(tmp_path)])
    path, why = find_rank_log(_session(run).store, [str(run)], 0)
    assert path is None and "symbolic link" in why
    js = _summary(run)
    assert js["log_path"] is None and "symbolic link" in js["log_refused"] and SECRET not in json.dumps(js)


def test_the_jobs_own_output_file_outside_the_run_dir_is_read(tmp_path):
    """What the writer records (its standard output: `> train.log`, nohup.out), owned by the job's user like
    its events file: read as before, wherever it is."""
    log = tmp_path / "elsewhere" / "train.log"
    log.parent.mkdir()
    log.write_text("step 1 done\nRuntimeError: the job's own last error\n")
    run = forged_run(tmp_path, [str(log)])
    js = _summary(run)
    assert js["log_path"] == str(log) and js["log_refused"] is None
    assert js["error_line"] == "RuntimeError: the job's own last error"


def test_a_log_inside_the_run_dir_through_a_linked_folder_outside_is_refused(tmp_path):
    """The run's folder holds a link to a folder elsewhere: a log named under it is outside the run once the
    link is resolved, and is read only if its owner is the job's."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "worker_0.log").write_text(SECRET + "\n")
    run = forged_run(tmp_path, [], failed=False)
    os.symlink(other, run / "logs")
    logs_dir = str(run / "logs")
    log, why = find_rank_log(_session(run).store, [str(run)], 0, logs_dir)
    assert log is not None and log.path == os.path.join(logs_dir, "worker_0.log")  # --logs DIR: the user's word
    from mstop.sources.followers.log_follower import refusal

    assert "outside" in refusal(os.path.join(logs_dir, "worker_0.log"), within=str(run))


def test_a_folder_link_swapped_after_the_log_was_judged_shows_nothing_of_the_file_it_brings(tmp_path):
    """Issue 58, item 11: the rule was applied to a path, then the path opened; a folder link swapped between
    the two (run/out -> run/real, then -> another user's folder) showed the viewer the other file. The rule is
    applied again to the file opened, by its descriptor."""
    from mstop.sources.followers.log_follower import refusal
    from mstop.sources.logs import LogTail, candidates

    run = forged_run(tmp_path, [], failed=False)
    (run / "real").mkdir()
    (run / "real" / "worker_0.log").write_text("step 1\nRuntimeError: the job's own\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "worker_0.log").write_text(SECRET + "\n")
    os.symlink(run / "real", run / "out")
    (log,) = [c for c in candidates(_session(run).store, [str(run)], 0, str(run / "out"))
              if c.path.startswith(str(run / "out"))][:1]
    log = type(log)(log.path, within=str(run))  # judged against the run's folder, as a run's own log is
    assert refusal(log.path, log.within) is None  # judged: inside the run
    (run / "out").unlink()
    os.symlink(tmp_path / "elsewhere", run / "out")  # swapped before the open
    tail = LogTail(log.path, log)
    assert tail.read() == [] and tail.lines == []
    assert "outside" in tail.error and SECRET not in tail.error
    (run / "out").unlink()
    os.symlink(run / "real", run / "out")  # back: read again, as the rule allows
    tail = LogTail(log.path, log)
    assert tail.read()[-1] == "RuntimeError: the job's own" and tail.error is None


def _session(run) -> MonitorSession:
    session = MonitorSession([str(run)], MonitorOptions(clock=lambda: T0 + 40))
    session.source.read_all()
    session.first_read_done()
    return session




def test_a_file_of_the_jobs_user_not_written_since_the_job_started_is_refused(tmp_path):
    """A forged start event written by the viewer's own user (root's /etc/shadow, one's own private key):
    the job's output is written while the job runs, a key or a system file is not (``/etc/shadow`` itself,
    as root, is refused the same way when it was not written in the last hour before the start)."""
    key = tmp_path / "id_ed25519"
    key.write_text(SECRET + "\n")
    os.utime(key, (T0 - 86_400, T0 - 86_400))
    names = [str(key)] + (["/etc/shadow"] if os.path.exists("/etc/shadow") and
                          os.stat("/etc/shadow").st_mtime < T0 - 7200 else [])
    run = forged_run(tmp_path, names)
    js = _summary(run)
    assert js["log_path"] is None and "last written before the job started" in js["log_refused"]
    assert js["error_line"] == "ValueError: the job's own abort" and SECRET not in json.dumps(js)
