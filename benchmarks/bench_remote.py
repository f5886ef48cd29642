"""Following over ssh (a real sshd on 127.0.0.1) beside following locally, in the same run.

    python benchmarks/bench_remote.py [--seconds 30]

Needs openssh-server (started here with throwaway keys, as the tests do).
- latency from a row's write to its arrival in the store: ssh vs local (target: under 300 ms more);
- bytes over the connection vs bytes appended (target: within 10 %);
- 1,024 rank files on one remote host at 1 row/s: CPU of this process and of the remote follower.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_follow import start_writer  # noqa: E402

from mstop.engine.store import Store  # noqa: E402
from mstop.sources.local import LocalSource  # noqa: E402
from mstop.sources.remote import RemoteSource, Target  # noqa: E402
from tests.helpers import sshd  # noqa: E402


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def follower_pids() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read()
            except OSError:
                continue
            if b"mstop-follower" in cmd and b"python3" in cmd:
                out.append(int(d))
    return out


def latencies(store: Store, seen: dict[int, int], into: list) -> None:
    now = time.time()
    with store.lock:
        for r, d in store.ranks.items():
            k, n = seen.get(r, 0), d.rows
            if n > k:
                into.append(now - d.col("time")[k:n])
                seen[r] = n


def run(server, ranks: int, rate: float, seconds: float, poll: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        w, ready = start_writer(tmp, ranks, rate, seconds)
        local, remote = Store(), Store()
        lat_l: list = []
        lat_r: list = []
        seen_l: dict = {}
        seen_r: dict = {}
        ls = LocalSource(tmp, local, on_update=lambda: latencies(local, seen_l, lat_l))
        rs = RemoteSource(Target(server.host, tmp), remote, poll=poll, connection=server.connection(),
                          on_update=lambda: latencies(remote, seen_r, lat_r))
        ls.follow()
        rs.follow()
        time.sleep(2)
        pids = follower_pids()
        f0 = sum(proc_cpu(p) for p in pids)
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        b0 = rs.bytes_received
        size0 = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        ready.set()
        w.join()
        time.sleep(poll + 1.5)
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        f1 = sum(proc_cpu(p) for p in pids)
        size1 = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        b1 = rs.bytes_received
        ls.stop()
        rs.stop()
        rows_equal = local.rows == remote.rows
    lat_l_a = np.concatenate(lat_l) if lat_l else np.array([np.nan])
    lat_r_a = np.concatenate(lat_r) if lat_r else np.array([np.nan])
    return {
        "local_p50": np.median(lat_l_a) * 1e3, "local_p95": np.percentile(lat_l_a, 95) * 1e3,
        "ssh_p50": np.median(lat_r_a) * 1e3, "ssh_p95": np.percentile(lat_r_a, 95) * 1e3,
        "bytes_ratio": (b1 - b0) / max(1, size1 - size0), "appended": size1 - size0,
        "cpu_local": 100 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / (t1 - t0),
        "cpu_follower": 100 * (f1 - f0) / (t1 - t0), "rows_equal": rows_equal,
    }


def start_server() -> sshd.Server | None:
    """A throwaway sshd on 127.0.0.1 (as the tests start one), or None, having said why, without openssh-server."""
    reason = sshd.missing_reason()
    if reason:
        print("skipped:", reason)
        return None
    return sshd.start(Path(tempfile.mkdtemp()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--poll", type=float, default=0.2, help="the remote follower's poll interval (default: 0.2)")
    a = ap.parse_args()
    server = start_server()
    if server is None:
        return 0
    try:
        print(f"machine: {os.cpu_count()} cores; sshd on 127.0.0.1; both sides on this machine; "
              f"follower poll {a.poll} s; {a.seconds:.0f} s per configuration")
        for ranks, rate in ((8, 5.0), (1024, 1.0)):
            res = run(server, ranks, rate, a.seconds, a.poll)
            print(f"  {ranks:5d} ranks x {rate:.0f} rows/s: latency local p50 {res['local_p50']:.0f} / p95 "
                  f"{res['local_p95']:.0f} ms, ssh p50 {res['ssh_p50']:.0f} / p95 {res['ssh_p95']:.0f} ms "
                  f"(+{res['ssh_p50'] - res['local_p50']:.0f} ms p50; target < +300); bytes over ssh / appended "
                  f"{res['bytes_ratio']:.2f} (target <= 1.10); CPU here {res['cpu_local']:.1f} %, remote "
                  f"follower {res['cpu_follower']:.1f} %; same rows both ways: {res['rows_equal']}")
    finally:
        sshd.stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
