"""The program mstop runs on a rank's host for a fresh stack over ssh (the stacks view's ``d``).

Sent over the ssh channel and run by the remote ``python3`` (3.6 or newer, standard library only), once per
rank per press. Its request, one JSON line on standard input: the rank's start event's ``pid``, ``host``,
``boot_id``, ``pid_ns``, ``pid_start``. On that host it checks that the pid is still that process (the same
host name, boot, pid namespace as the remote shell's, and start time: mstop.sources.pyspy says why), runs
``py-spy dump --pid PID`` (from PATH or ``~/.local/bin``) and writes one JSON line: ``{"lines": [...]}`` or
``{"why": "..."}``.
"""

import json
import os
import shutil
import socket
import subprocess
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_ticks(pid):
    raw = read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def why_not(req):
    pid = req.get("pid")
    if not isinstance(pid, int):
        return "its start event gives no pid"
    if req.get("host") not in (None, socket.gethostname()):
        return f"it runs on {req.get('host')}, not on {socket.gethostname()}"
    if req.get("boot_id") is None or req.get("pid_start") is None:
        return "its writer recorded no process identity (boot id, start time): an older writer"
    if req["boot_id"] != read("/proc/sys/kernel/random/boot_id"):
        return "it ran in another boot of this host (or on another host of the same name)"
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = None
    if req.get("pid_ns") != ns:
        return "it runs in another pid namespace (another container) than the ssh session"
    ticks = start_ticks(pid)
    if ticks is None:
        return "the process has ended"
    if ticks != req["pid_start"]:
        return f"pid {pid} is another process now (the rank's process ended)"
    return None


def main():
    req = json.loads(sys.stdin.readline())
    why = why_not(req)
    if why is not None:
        print(json.dumps({"why": "the process is not visible from here: " + why}))
        return 0
    exe = shutil.which("py-spy") or os.path.expanduser("~/.local/bin/py-spy")
    if not os.access(exe, os.X_OK):
        print(json.dumps({"why": f"py-spy is not installed on {socket.gethostname()} (pip install py-spy there)"}))
        return 0
    try:
        out = subprocess.run([exe, "dump", "--pid", str(req["pid"])], stdout=subprocess.PIPE,  # noqa: UP022
                             stderr=subprocess.PIPE, timeout=15)  # (Python 3.6 has no capture_output)
    except subprocess.TimeoutExpired:
        print(json.dumps({"why": "py-spy did not answer in 15 s"}))
        return 0
    text = out.stdout.decode("utf-8", "replace")
    if out.returncode != 0:
        err = (out.stderr.decode("utf-8", "replace") or text).strip().splitlines()
        last = err[-1] if err else f"exit code {out.returncode}"
        if "ermission" in last or "ptrace" in last.lower():
            print(json.dumps({"why": f"ptrace not permitted ({last}): run mstop as the job's user, or allow ptrace"}))
        else:
            print(json.dumps({"why": "py-spy failed: " + last}))
        return 0
    print(json.dumps({"lines": text.splitlines()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
