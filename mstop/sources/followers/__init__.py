"""The programs mstop sends over ssh and runs on another host: each is sent as its own text, runs there alone
with the standard library of whatever Python 3.6+ that host has, and imports nothing of mstop. What one needs
of mstop's rules (file names, the signature's length, the columns a merged row sums) it holds as its own copy;
``tests/unit/test_followers.py`` checks every such copy equals the rule it copies.

    follower.py       what remote.py and fanout.py run on a host: its rank files and logs, frame by frame
    runs_follower.py  what remote_runs.py runs on a host for each refresh of a directory of runs
    log_follower.py   what logs.py runs on a host for each read of the log pane (L) over ssh
    pyspy_follower.py what pyspy.py runs on a rank's host for a fresh stack dump over ssh
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def program(name: str) -> bytes:
    """The text of the program ``name`` (``follower``, ``runs_follower``, ...), as it is sent."""
    return (HERE / f"{name}.py").read_bytes()
