"""The program mstop runs on a remote host for a folder of runs (``mstop host:/path/runs``).

Run once per refresh over the host's shared ssh connection, by the remote ``python3`` (3.6 or newer,
standard library only, like follower.py). Its request is one JSON line on standard input:
``{"root": path, "max_depth": 3, "probe": bool, "single": bool, "tail": [job, rank, events],
"offsets": {"RUN/FILE": offset}}``. It answers one JSON line, then ``n`` bytes of zlib-compressed
payload:

``{"is_run": bool, "runs": [[RUN, kind], ...], "problems": [...], "files": [[RUN/FILE, start, head,
length, reset], ...], "clock": t, "n": n}``

where each file's bytes are ``head`` bytes of its first lines (a file not read before: its header, or its
first start event) then ``length - head`` bytes from offset ``start`` (near the end for a new file; the
offset asked for otherwise). ``probe`` answers only ``is_run`` and whether runs are below. Nothing is
written on the remote host.
"""

import json
import os
import re
import stat
import sys
import time
import zlib

# mstop_writer.schema's CSV_PATTERN and EVENTS_PATTERN (this program runs alone; tests check they agree)
NAME = re.compile(r"^rank(0|[1-9][0-9]{0,6})\.(csv|events\.jsonl)$")
MF_DIR = re.compile(r"^rank_(0|[1-9][0-9]{0,6})$")
WORKER = re.compile(r"^worker_(0|[1-9][0-9]{0,6})\.log$")  # msrun's per-rank log (mstop.sources.mflog)
HEAD = 64 << 10
CHUNK = 4 << 20
# a MindSpore log line's prefix ``ME(21888,7f3a...,python)``: the worker's pid (mstop.sources.procwatch.PID)
PID = re.compile(rb"\b[A-Z_]{2,16}\((\d{1,9}),[0-9a-fx]+,")
# files looked at to tell whose a log folder is (mstop.sources.runs.WHOSE_FILES)
WHOSE_FILES = 16


def has_log(folder):
    try:
        return os.path.isfile(os.path.join(folder, "info.log"))
    except OSError:
        return False


def kind_of(path, names):
    """"writer", "mflog" or None, as mstop.sources.runs decides it."""
    if any(NAME.match(n) for n in names):
        return "writer"
    for root in (os.path.join(path, "log"), path):
        try:
            subs = os.listdir(root)
        except OSError:
            continue
        if any(MF_DIR.match(n) and has_log(os.path.join(root, n)) for n in subs):
            return "mflog"
    if MF_DIR.match(os.path.basename(path)) and "info.log" in names:
        return "mflog"
    for folder in (path, os.path.join(path, "msrun_log")):  # msrun's worker logs (a plain job's only record)
        try:
            subs = names if folder == path else os.listdir(folder)
        except OSError:
            continue
        if any(WORKER.match(n) and os.path.isfile(os.path.join(folder, n)) for n in subs):
            return "mflog"
    return None


def find_runs(root, max_depth):
    """As mstop.sources.runs.find_runs: a folder reached by two paths once (its own name before a link's),
    and a line for folders deeper than max_depth."""
    runs, problems, level, seen = [], [], [root], {os.path.realpath(root)}
    for depth in range(max_depth):
        below = []
        for d in level:
            try:
                entries = sorted((os.path.islink(os.path.join(d, n)), os.path.join(d, n)) for n in os.listdir(d)
                                 if not n.startswith(".") and os.path.isdir(os.path.join(d, n)))
            except OSError as e:
                problems.append(d + ": cannot be read: " + (e.strerror or str(e)))
                continue
            for _, sub in entries:
                real = os.path.realpath(sub)
                if real in seen:
                    continue
                seen.add(real)
                try:
                    names = os.listdir(sub)
                except OSError as e:
                    problems.append(sub + ": cannot be read: " + (e.strerror or str(e)))
                    continue
                kind = kind_of(sub, names)
                if kind is not None:
                    runs.append([os.path.relpath(sub, root), kind])
                elif depth + 1 < max_depth:
                    below.append(sub)
                elif any(not n.startswith(".") and os.path.isdir(os.path.join(sub, n)) for n in names):
                    problems.append(sub + ": holds folders " + str(max_depth) + " levels below " + root
                                    + ", deeper than runs are looked for (--depth N)")
        level = below
    runs.sort()
    return without_job_logs(root, runs, problems), problems


def without_job_logs(root, runs, problems):
    """As mstop.sources.runs._without_job_logs: a log folder whose workers' pids its sibling writer run's start
    events name is that run's job's (msrun --log_dir beside it), not a run of its own; said in problems."""
    writers = {}
    for run, kind in runs:
        if kind == "writer":
            writers.setdefault(os.path.dirname(run), []).append(run)
    out = []
    for run, kind in runs:
        owner = None
        if kind == "mflog" and writers.get(os.path.dirname(run)):
            pids = worker_pids(os.path.join(root, run))
            owner = next((w for w in writers[os.path.dirname(run)] if pids & writer_pids(os.path.join(root, w))),
                         None)
        if owner is None:
            out.append([run, kind])
        else:
            problems.append(os.path.join(root, run) + ": the logs of " + os.path.basename(owner)
                            + "'s processes (msrun --log_dir): shown with that run, not as a run of its own")
    return out


def worker_pids(path):
    out = set()
    try:
        names = sorted(n for n in os.listdir(path) if WORKER.match(n))[:WHOSE_FILES]
    except OSError:
        return out
    for n in names:
        try:
            with open(os.path.join(path, n), "rb") as f:
                m = PID.search(f.read(HEAD))
        except OSError:
            continue
        if m is not None:
            out.add(int(m.group(1)))
    return out


def writer_pids(path):
    out = set()
    try:
        names = sorted(n for n in os.listdir(path) if NAME.match(n) and n.endswith(".jsonl"))[:WHOSE_FILES]
    except OSError:
        return out
    for n in names:
        try:
            with open(os.path.join(path, n), "rb") as f:
                first = json.loads(f.read(HEAD).split(b"\n", 1)[0].decode("utf-8", "replace"))
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and first.get("kind") == "start" and type(first.get("pid")) is int:
            out.add(first["pid"])
    return out


def read_file(path, offset, tail, head_lines):
    """(start, head bytes, data bytes, reset) for one file; None when it cannot be read now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        reset = offset is not None and size < offset
        if offset is not None and not reset:
            os.lseek(fd, offset, 0)
            return offset, b"", os.read(fd, min(CHUNK, size - offset)), False
        head = b""
        start = 0
        if size > tail + HEAD:
            first = os.read(fd, HEAD)
            cut = 0
            for _ in range(head_lines):
                nl = first.find(b"\n", cut)
                if nl < 0:
                    break
                cut = nl + 1
            os.lseek(fd, size - tail, 0)
            end = os.read(fd, tail)
            nl = end.find(b"\n")
            if cut and nl >= 0:
                return size - tail + nl + 1, first[:cut], end[nl + 1:], reset
            os.lseek(fd, 0, 0)
        return start, head, os.read(fd, min(CHUNK, size)), reset
    except OSError:
        return None
    finally:
        os.close(fd)


def main():
    request = json.loads(sys.stdin.readline())
    out = sys.stdout.buffer
    root = request["root"]
    header = {"is_run": False, "runs": [], "problems": [], "files": []}
    payload = []
    if not os.path.isdir(root):
        header["error"] = ("is a file, not a directory: " if os.path.isfile(root) else "no such directory: ") + root
        # a run directory the job is about to make: the monitor waits for it when its parent exists
        header["parent"] = os.path.isdir(os.path.dirname(os.path.abspath(root)))
    else:
        try:
            header["is_run"] = kind_of(root, os.listdir(root)) is not None
        except OSError as e:
            header["error"] = "cannot list " + root + ": " + str(e)
    if "error" not in header and request.get("single"):
        header["runs"] = [[".", kind_of(root, os.listdir(root)) or "writer"]]
    elif "error" not in header and not (request.get("probe") and header["is_run"]):
        header["runs"], header["problems"] = find_runs(root, int(request.get("max_depth", 3)))
    if request.get("probe") or "error" in header:
        header["has_runs"] = bool(header["runs"])
        header["runs"] = header["runs"][:1]
    else:
        job, rank, events = request.get("tail", [32 << 10, 4 << 10, 32 << 10])
        offsets = request.get("offsets", {})
        for run, kind in header["runs"]:
            if kind != "writer":
                continue
            folder = os.path.join(root, run)
            try:
                names = sorted(n for n in os.listdir(folder) if NAME.match(n))
            except OSError:
                continue
            ranks = [int(NAME.match(n).group(1)) for n in names if n.endswith(".csv")]
            lowest = min(ranks) if ranks else None
            for n in names:
                key = run + "/" + n
                m = NAME.match(n)
                if n.endswith(".csv"):
                    tail, lines = (job if int(m.group(1)) == lowest else rank), 1
                else:
                    tail, lines = events, 1
                got = read_file(os.path.join(folder, n), offsets.get(key), tail, lines)
                if got is None:
                    continue
                start, head, data, reset = got
                if head or data or reset:
                    header["files"].append([key, start, len(head), len(head) + len(data), reset])
                    payload.append(head + data)
    data = zlib.compress(b"".join(payload), 1) if payload else b""
    header["n"] = len(data)
    header["clock"] = time.time()
    out.write((json.dumps(header) + "\n").encode("utf-8") + data)
    out.flush()


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
