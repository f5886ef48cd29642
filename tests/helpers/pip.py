"""pip as the packaging and README tests run it: in a subprocess, with its version check off, and a download
that arrives damaged (a hash that does not match what the index says, a connection dropped: seen here when two
pip processes shared one cache) tried again, up to twice. A resolution that fails fails at once."""

from __future__ import annotations

import os
import subprocess
import sys

#: pip's words for a download that went wrong on the way, not for a requirement that cannot be met
TRANSIENT = ("DO NOT MATCH THE HASHES", "Connection reset", "Read timed out", "ConnectionError",
             "IncompleteRead", "Temporary failure in name resolution")


def pip(*args: str, python: str = sys.executable, timeout: float = 900, cwd: str | None = None,
        retries: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for _ in range(retries + 1):
        got = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                             env=env, cwd=cwd)
        if got.returncode == 0 or not any(t in got.stderr for t in TRANSIENT):
            return got
    return got
