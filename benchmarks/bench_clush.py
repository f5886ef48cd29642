"""Many hosts followed from one viewer (issue 41): today's ssh fan-in beside ClusterShell, flat and through
gateways, on loopback.

    python benchmarks/bench_clush.py [--hosts 16,64,256] [--seconds 20] [--ranks 8]

Each "host" is an ssh alias of 127.0.0.1 (``lo1`` ... ``loN``, spread over several local sshd so none
refuses a burst of logins) with its own folder of ``--ranks`` rank files; one writer process appends a row
per rank per second to all of them. Each configuration runs in a fresh process of its own (its memory is
its own) and follows the hosts as ``mstop`` would:

* ``ssh``: one RemoteSource a host (``mstop lo1:/run lo2:/run ...``: a thread and a ControlMaster'd ssh each);
* ``clush``: the node set ``lo[1-N]:/.../%h/run``: one ClusterShell Task, one ssh a host (mstop.sources.fanout);
* ``gateways``: the same through two ClusterShell gateways (``gw1``, ``gw2``: aliases of 127.0.0.1 too);
* ``digest``, ``gateways-digest``: the same two with each host merging its ranks' rows over ``--digest``
  seconds (the follower's digest mode, a node set's default in the monitor); the others read every row.

Measured over ``--seconds`` once every rank has rows: the viewer's CPU (this process, all its threads), its
ssh clients' CPU, the gateways' CPU (their ClusterShell and their ssh clients), the remote followers' CPU
(summed), the viewer's resident memory, and the latency of a row (written to in the store, p50 and p95, over
a sample of 32 ranks polled every 50 ms). Every process here shares this machine's cores: the figures are
each side's own CPU time, not what a cluster's separate hosts would see.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fanin import cpu_of as cpu  # noqa: E402
from bench_fanin import writer  # noqa: E402

#: hosts per local sshd (its MaxStartups is 100: a burst of more logins would be refused, and retried)
PER_SERVER = 64


def classes() -> dict[str, list[int]]:
    """This machine's processes of interest: ssh clients (the viewer's, or the gateways'), gateways, followers."""
    out: dict[str, list[int]] = {"ssh": [], "gateway": [], "follower": []}
    gateways: set[int] = set()
    rows = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ")
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        rows.append((int(d), ppid, cmd))
        if b"-m ClusterShell.Gateway" in cmd and not cmd.startswith(b"ssh"):
            gateways.add(int(d))
    parent = {p: pp for p, pp, _ in rows}

    def under_gateway(pid: int) -> bool:
        while pid > 1:
            if pid in gateways:
                return True
            pid = parent.get(pid, 0)
        return False

    for pid, _, cmd in rows:
        if pid in gateways:
            out["gateway"].append(pid)
        elif cmd.startswith(b"ssh") or cmd.startswith(b"/bin/sh -c exec ssh"):
            out["gateway" if under_gateway(pid) else "ssh"].append(pid)
        elif b"mstop-follower" in cmd and b"python3 -u -c import sys" in cmd:
            out["follower"].append(pid)
    return out


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one(mode: str, hosts: int, ranks: int, seconds: float, config: str, topology: str,
        poll: float = 0.2, digest: float = 2.0, rate: float = 1.0, beats: float = 0.0,
        devices: float = 0.0) -> dict[str, float]:
    """One configuration, in this (fresh) process."""
    from mstop.engine.store import Store
    from mstop.sources import Connection, Sources
    from mstop.sources.remote import RemoteSource, Target

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        dirs = [os.path.join(tmp, f"lo{h}", "run") for h in range(1, hosts + 1)]
        for d in dirs:
            os.makedirs(d)
        ready = mp.Event()
        w = mp.Process(target=writer, args=(dirs, ranks, rate, seconds + 600, ready),
                       kwargs={"one_world": True, "beats": beats, "devices": devices})
        w.start()
        while sum(len(os.listdir(d)) for d in dirs) < hosts * (ranks * (2 if beats else 1) + (1 if devices else 0)):
            time.sleep(0.05)
        store = Store()
        conn = Connection(("-F", config), 10.0, topology if mode.startswith("gateways") else None)
        if mode == "ssh":
            srcs: list = [RemoteSource(Target(f"lo{h}", d), store, poll=poll, connection=conn)
                          for h, d in zip(range(1, hosts + 1), dirs)]
        else:
            srcs = [Sources([f"lo[1-{hosts}]:{tmp}/%h/run"], store, poll=poll, connection=conn,
                            digest=digest if mode.endswith("digest") else 0.0)]
        t_start = time.monotonic()
        for s in srcs:
            s.follow()
        ready.set()
        sample = list(range(0, hosts * ranks, max(1, hosts * ranks // 32)))[:32]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and (len(store.ranks) < hosts * ranks):
            time.sleep(0.2)
        connected = time.monotonic() - t_start
        time.sleep(3)
        lat: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            seen: dict[int, int] = {}
            while not stop.wait(0.05):
                now = time.time()
                for r in sample:
                    rk = store.ranks.get(r)
                    if rk is None:
                        continue
                    n = rk.rows if hasattr(rk, "rows") else len(rk.col("step"))
                    if n > seen.get(r, n):
                        lat.append(now - float(rk.col("time")[-1]))
                    seen[r] = n

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        c0 = {k: cpu(v) for k, v in classes().items()}
        r0, t0, rows0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), store.rows_written
        held0 = store.rows
        time.sleep(seconds)
        r1, t1, rows1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), store.rows_written
        held1 = store.rows
        procs = classes()
        c1 = {k: cpu(v) for k, v in procs.items()}
        stop.set()
        mem = rss_mb()
        npus = len(store.devices)
        for s in srcs:
            s.stop()
        w.terminate()
        w.join()
    dt = t1 - t0
    lat.sort()

    def pct(q: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    return {"viewer": 100 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / dt,
            "ssh": 100 * (c1["ssh"] - c0["ssh"]) / dt, "gateways": 100 * (c1["gateway"] - c0["gateway"]) / dt,
            "followers": 100 * (c1["follower"] - c0["follower"]) / dt, "rows_s": (rows1 - rows0) / dt,
            "held_s": (held1 - held0) / dt,
            "rss_mb": mem, "p50_ms": pct(0.5), "p95_ms": pct(0.95), "connected_s": connected,
            "ssh_procs": len(procs["ssh"]), "samples": len(lat), "npus": npus}


def servers(hosts: int, tmp: Path) -> tuple[list, Path, Path]:
    """Enough local sshd for ``hosts`` aliases, one client config (lo1..loN, gw1, gw2), a topology file."""
    from tests.helpers import sshd

    count = max(1, -(-hosts // PER_SERVER))
    started = [sshd.start(tmp / f"sshd{i}") for i in range(count)]
    blocks = []
    for i, srv in enumerate(started):
        names = " ".join(f"lo{h}" for h in range(1, hosts + 1) if (h - 1) // PER_SERVER == i)
        blocks.append(sshd.alias(srv, names + (" gw1 gw2" if i == 0 else "")))
    config = tmp / "ssh_config"
    config.write_text("".join(blocks))
    topo = tmp / "topology.conf"
    topo.write_text(f"[routes]\n{socket.gethostname().split('.')[0]}: gw[1-2]\ngw[1-2]: lo[1-{hosts}]\n")
    return started, config, topo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="16,64,256")
    ap.add_argument("--modes", default="ssh,clush,gateways,digest,gateways-digest")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--poll", type=float, default=0.2,
                    help="the followers' poll, seconds (mstop's default 0.2; 256 followers polling that often are "
                         "more than this machine's 2 cores can run beside the viewer)")
    ap.add_argument("--digest", type=float, default=2.0,
                    help="seconds a host merges its ranks' rows over in the digest modes (default: 2, mstop's)")
    ap.add_argument("--rate", type=float, default=1.0, help="rows a second each rank writes (default: 1)")
    ap.add_argument("--beats", type=float, default=0.0,
                    help="a heartbeat event every SEC a rank (the writer's default is 5; default here: none)")
    ap.add_argument("--devices", type=float, default=0.0,
                    help="each host's NPUs sampled every SEC into its devices file (the writer's default is 10; "
                         "default here: none)")
    ap.add_argument("--one", nargs=5, metavar=("MODE", "HOSTS", "RANKS", "CONFIG", "TOPOLOGY"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        mode, hosts, ranks, config, topo = a.one
        print(json.dumps(one(mode, int(hosts), int(ranks), a.seconds, config, topo, a.poll, a.digest, a.rate,
                             a.beats, a.devices)))
        return 0
    from tests.helpers import sshd

    counts = [int(x) for x in a.hosts.split(",")]
    env = {**os.environ, "CLUSTERSHELL_GW_PYTHON_EXECUTABLE": sys.executable}
    print(f"machine: {os.cpu_count()} cores; {a.ranks} ranks a host, {a.rate:g} rows/s a rank"
          f"{f', a heartbeat every {a.beats:g} s' if a.beats else ''}"
          f"{f', {a.ranks} NPUs a host sampled every {a.devices:g} s' if a.devices else ''}; {a.seconds:.0f} s each; "
          f"followers poll every {a.poll:g} s; hosts spread over local sshd, {PER_SERVER} each")
    print("| hosts | transport | rows/s (held) | viewer CPU | its ssh | gateways | followers (sum) | viewer RSS "
          "| latency p50 / p95 | viewer CPU a host | all connected after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        started, config, topo = servers(max(counts), Path(tmp))
        try:
            for n in counts:
                for mode in a.modes.split(","):
                    out = subprocess.run([sys.executable, __file__, "--seconds", str(a.seconds), "--poll", str(a.poll),
                                          "--digest", str(a.digest), "--rate", str(a.rate), "--beats", str(a.beats),
                                          "--devices", str(a.devices),
                                          "--one", mode,
                                          str(n), str(a.ranks), str(config), str(topo)],
                                         capture_output=True, text=True, env=env, cwd=ROOT)
                    if out.returncode != 0:
                        print(f"| {n} | {mode} | failed: {out.stderr.strip().splitlines()[-1:]} |", flush=True)
                        continue
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    print(f"| {n} | {mode} | {r['rows_s']:,.0f} ({r['held_s']:,.0f}) | {r['viewer']:.1f} % "
                          f"| {r['ssh']:.1f} % "
                          f"| {r['gateways']:.1f} % | {r['followers']:.1f} % | {r['rss_mb']:.0f} MB "
                          f"| {r['p50_ms']:.0f} / {r['p95_ms']:.0f} ms | {r['viewer'] / n:.3f} % "
                          f"| {r['connected_s']:.0f} s |" + (f" {r['npus']:,} NPUs seen |" if a.devices else ""),
                          flush=True)
        finally:
            for srv in started:
                sshd.stop(srv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
