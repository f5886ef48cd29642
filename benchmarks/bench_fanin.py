"""The ssh fan-in, simulated on loopback: many hosts' followers feeding one viewer.

    python benchmarks/bench_fanin.py [--seconds 15]

Needs openssh-server (started here with throwaway keys, as the tests do). Each simulated host is a folder of
rank files and one ssh connection to 127.0.0.1 running mstop's remote follower over it (one RemoteSource,
as ``mstop host1:/run host2:/run ...`` opens); one writer process appends a row per rank per second to every
folder. Per configuration (hosts x ranks per host) it measures, over ``--seconds``: the viewer's CPU (this
process: every RemoteSource's reading thread and the store), its ssh clients' CPU (decryption, their
ControlMaster processes included), the remote followers' CPU (summed over hosts), bytes received per second
and per row. A least-squares fit of the viewer's CPU (with its ssh clients) to ``a + b x connections + c x
rows/s`` then says what 100,000 ranks on 3,000 hosts would cost one viewer, from these figures alone.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
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

from bench_remote import follower_pids, proc_cpu, start_server  # noqa: E402

from mstop.engine.store import Store  # noqa: E402
from mstop.sources.remote import RemoteSource, Target  # noqa: E402
from mstop_writer import COLUMNS  # noqa: E402
from mstop_writer.schema import DEVICE_COLUMNS  # noqa: E402
from tests.helpers import sshd  # noqa: E402


def writer(dirs: list[str], ranks: int, rate: float, seconds: float, ready: mp.Event, *,
           one_world: bool = False, beats: float = 0.0, devices: float = 0.0) -> None:
    """Append a row to every rank file of every folder ``rate`` times a second, spread over the interval;
    ``one_world``: folder h holds ranks h x ranks ... (h + 1) x ranks - 1 (one job over all of them), else
    each folder ranks 0 ... ranks - 1; ``beats``: a heartbeat event every that many seconds a rank (0: none);
    ``devices``: a sample of each of the folder's ``ranks`` NPUs every that many seconds, in its host's
    devices file (``host_lo<h + 1>.devices.csv``, as mstop_writer.devices writes it; 0: none)."""
    fds, events, samplers = [], [], []
    for h, d in enumerate(dirs):
        if devices:
            fd = os.open(os.path.join(d, f"host_lo{h + 1}.devices.csv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                         0o644)
            os.write(fd, (",".join(DEVICE_COLUMNS) + "\n").encode())
            samplers.append((f"lo{h + 1}", fd))
        for r in range(h * ranks, (h + 1) * ranks) if one_world else range(ranks):
            fd = os.open(os.path.join(d, f"rank{r}.csv"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, (",".join(COLUMNS) + "\n").encode())
            fds.append(fd)
            if beats:
                events.append(os.open(os.path.join(d, f"rank{r}.events.jsonl"),
                                      os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    ready.wait()
    t0, step = time.time(), 0
    next_beat = next_sample = t0
    while time.time() - t0 < seconds:
        if samplers and time.time() >= next_sample:
            next_sample += devices
            for host, fd in samplers:
                os.write(fd, "".join(device_row(host, n) for n in range(ranks)).encode())
        if events and time.time() >= next_beat:
            next_beat += beats
            for fd in events:
                os.write(fd, f'{{"time": {time.time()!r}, "kind": "heartbeat", "step": {step}}}\n'.encode())
        step += 1
        for i, fd in enumerate(fds):
            pause = t0 + (step - 1 + i / len(fds)) / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            os.write(fd, f"{time.time()!r},{step},1,{2.0 / step!r},0.0003,,1.0,0.001,,4096,8,,,1,1,2,,,s\n".encode())
    for fd in fds + events + [fd for _, fd in samplers]:
        os.close(fd)


def device_row(host: str, npu: int) -> str:
    """One NPU's sample as the writer's sampler writes it: busy, healthy, half its HBM used."""
    cells = {"time": repr(time.time()), "host": host, "npu": str(npu), "chip": "0", "device": str(npu),
             "name": "910B", "health": "OK", "aicore": "0.87", "hbm_used": str(32 << 30), "hbm_total": str(64 << 30),
             "temperature": "55", "power": "300", "pids": str(10000 + npu)}
    return ",".join(cells.get(c, "") for c in DEVICE_COLUMNS) + "\n"


def ssh_clients() -> list[int]:
    """The ssh client processes on this machine (the viewer's: ControlMaster detaches them from it)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() == "ssh":
                        out.append(int(d))
            except OSError:
                continue
    return out


def cpu_of(pids: list[int]) -> float:
    """CPU seconds of the processes still alive."""
    total = 0.0
    for p in pids:
        try:
            total += proc_cpu(p)
        except OSError:
            continue
    return total


def run(server, hosts: int, ranks: int, rate: float, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [os.path.join(tmp, f"host{h}") for h in range(hosts)]
        for d in dirs:
            os.makedirs(d)
        ready = mp.Event()
        w = mp.Process(target=writer, args=(dirs, ranks, rate, seconds + 4, ready))
        w.start()
        while sum(len(os.listdir(d)) for d in dirs) < hosts * ranks:
            time.sleep(0.05)
        stores = [Store() for _ in dirs]
        sources = [RemoteSource(Target(server.host, d), s, poll=0.2, connection=server.connection())
                   for d, s in zip(dirs, stores)]
        for s in sources:
            s.follow()
        ready.set()
        time.sleep(3)
        followers, clients = follower_pids(), ssh_clients()
        f0, c0 = cpu_of(followers), cpu_of(clients)
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        b0, rows0 = sum(s.bytes_received for s in sources), sum(s.rows for s in stores)
        time.sleep(seconds)
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        b1, rows1 = sum(s.bytes_received for s in sources), sum(s.rows for s in stores)
        f1, c1 = cpu_of(followers), cpu_of(clients)
        for s in sources:
            s.stop()
        w.terminate()
        w.join()
    dt = t1 - t0
    rows = (rows1 - rows0) / dt
    return {"viewer": 100 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / dt,
            "ssh": 100 * (c1 - c0) / dt, "followers": 100 * (f1 - f0) / dt, "rows_s": rows,
            "bytes_s": (b1 - b0) / dt, "bytes_row": (b1 - b0) / max(1.0, rows1 - rows0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--configs", default="1x256,8x32,32x8,8x128",
                    help="HOSTSxRANKS,... (default: 1x256,8x32,32x8,8x128)")
    a = ap.parse_args()
    server = start_server()
    if server is None:
        return 0
    results = []
    try:
        print(f"machine: {os.cpu_count()} cores; sshd on 127.0.0.1; 1 row/s per rank; {a.seconds:.0f} s each")
        print("| hosts (connections) | ranks | rows/s | viewer CPU | its ssh clients | remote followers (sum) "
              "| bytes/s | bytes/row |")
        print("|---|---|---|---|---|---|---|---|")
        for spec in a.configs.split(","):
            hosts, ranks = (int(x) for x in spec.split("x"))
            res = run(server, hosts, ranks, 1.0, a.seconds)
            results.append((hosts, res))
            print(f"| {hosts} | {hosts * ranks:,} | {res['rows_s']:.0f} | {res['viewer']:.1f} % | {res['ssh']:.1f} % "
                  f"| {res['followers']:.1f} % | {res['bytes_s'] / 1e3:.1f} kB/s | {res['bytes_row']:.0f} |",
                  flush=True)
    finally:
        sshd.stop(server)
    # viewer + its ssh clients = a + b * connections + c * rows/s (least squares over the configurations)
    x = np.array([[1.0, h, r["rows_s"]] for h, r in results])
    y = np.array([r["viewer"] + r["ssh"] for _, r in results])
    (a0, b, c), *_ = np.linalg.lstsq(x, y, rcond=None)
    per_row = float(np.median([r["bytes_row"] for _, r in results]))
    for hosts, rate in ((3000, 1.0), (3000, 0.2)):
        rows = 100_000 * rate
        cpu = a0 + b * hosts + c * rows
        print(f"fit: viewer + ssh CPU = {a0:.2f} + {b:.3f} x connections + {c:.4f} x rows/s (% of a core); "
              f"100,000 ranks on {hosts:,} hosts at {rate:g} rows/s per rank: {cpu:.0f} % of a core, "
              f"{hosts:,} connections, {rows * per_row / 1e6:.1f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
