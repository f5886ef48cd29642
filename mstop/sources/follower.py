"""The program mstop runs on a remote host: it follows a run directory and streams new bytes.

It is sent over the ssh channel and run by the remote ``python3`` (3.6 or
newer, standard library only; a test compiles it with 3.6's grammar). Its
request (the path and the offsets already received) arrives as one JSON line
on standard input, never on a command line. Nothing is written on the remote host.

Output: frames of one JSON header line, then ``n`` bytes of zlib-compressed
payload: ``{"clock": t, "files": [[name, offset, length, reset], ...], "n": n}``
where the payload holds the files' new bytes one after the other;
``{"error": "..."}`` when the directory is missing; ``{"caught_up": true, ...}``
after the first complete pass, so a one-shot reader knows when to stop.
"""

import json
import os
import re
import stat
import sys
import time
import zlib

# mstop_writer.schema's CSV_PATTERN and EVENTS_PATTERN: this program runs alone on the remote host, so it has
# its own copy (tests/test_remote.py checks that the two agree)
NAME = re.compile(r"^rank(0|[1-9][0-9]{0,6})\.(csv|events\.jsonl)$")
SIGNATURE = 256
CHUNK = 4 << 20
HEARTBEAT = 5.0


def send(out, header, payload=b""):
    data = zlib.compress(payload, 1) if payload else b""
    header["n"] = len(data)
    header["clock"] = time.time()
    out.write((json.dumps(header) + "\n").encode("utf-8") + data)
    out.flush()


def read_new(path, st, state):
    """New bytes of one file, with the same replacement rules as mstop's local reader."""
    offset, ident, sig = state
    reset = False
    # O_NONBLOCK: a FIFO swapped in after the stat must not block the follower
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return offset, b"", False
        here = (st.st_dev, st.st_ino)
        if ident is not None and (here != ident or st.st_size < offset):
            if not (sig and st.st_size >= offset and f.read(len(sig)) == sig):
                offset, sig, reset = 0, b"", True
        if ident is None and offset and sig:  # a reconnect: check that it is still the same file
            if f.read(len(sig)) != sig or st.st_size < offset:
                offset, sig, reset = 0, b"", True
        state[1] = here
        if st.st_size <= offset:
            state[0], state[2] = offset, sig
            return offset, b"", reset
        f.seek(offset)
        data = f.read(min(CHUNK, st.st_size - offset))
    if len(sig) < SIGNATURE and offset < SIGNATURE:
        sig = (sig + data[: SIGNATURE - offset])[:SIGNATURE]
    state[0], state[2] = offset + len(data), sig
    return offset, data, reset


def not_regular(mode):
    # mstop_writer.schema.file_kind's words: this program runs alone on the remote host, so it has its own copy
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name + ", not a regular file"
    return "a special file, not a regular file"


def read_file(path, name, states, refused):
    """New bytes of one rank file: (offset, data, reset, mtime), or None when there are none (or it is not
    a regular file: then ``refused`` says why; a FIFO would block open() forever)."""
    full = os.path.join(path, name)
    try:
        try:
            st = os.stat(full)
        except FileNotFoundError:
            if os.path.islink(full):
                refused[name] = "a dangling symbolic link"
            return None
        if not stat.S_ISREG(st.st_mode):
            refused[name] = not_regular(st.st_mode)
            return None
        refused.pop(name, None)
        state = states.setdefault(name, [0, None, b""])
        if state[1] == (st.st_dev, st.st_ino) and st.st_size == state[0]:
            return None
        offset, data, reset = read_new(full, st, state)
    except OSError:
        return None
    return (offset, data, reset, st.st_mtime) if data or reset else None


def read_dir(path, states, refused):
    """One pass over the directory: (files, payload, more, newest mtime); raises OSError when it cannot be
    listed."""
    files, payload, more, newest = [], [], False, 0.0
    for name in sorted(os.listdir(path)):
        if not NAME.match(name):
            continue
        got = read_file(path, name, states, refused)
        if got is not None:
            offset, data, reset, mtime = got
            newest = max(newest, mtime)
            files.append([name, offset, len(data), reset])
            payload.append(data)
            more = more or len(data) == CHUNK
    return files, payload, more, newest


def main():
    request = json.loads(sys.stdin.readline())
    out = sys.stdout.buffer
    path = request["path"]
    poll = max(0.05, float(request.get("poll") or 0.5))
    states = {}
    for name, (offset, sig) in request.get("offsets", {}).items():
        if NAME.match(name):
            states[name] = [int(offset), None, bytes.fromhex(sig)]
    if not os.path.isdir(path):
        send(out, {"error": "no such directory: " + path})
        return
    caught_up, last_sent = False, 0.0
    refused, told = {}, {}  # name -> why it is not followed (sent when it changes)
    while True:
        try:
            files, payload, more, newest = read_dir(path, states, refused)
        except OSError as e:
            send(out, {"error": "cannot list " + path + ": " + str(e)})
            return
        now = time.time()
        news = refused != told
        if files or news or now - last_sent >= HEARTBEAT or (not more and not caught_up):
            header = {"files": files}
            if newest:
                header["mtime"] = newest  # the newest modification time of a file sent (the remote clock)
            if news:
                header["refused"] = sorted(refused.items())
                told = dict(refused)
            if not more and not caught_up:
                header["caught_up"] = caught_up = True
            send(out, header, b"".join(payload))
            last_sent = now
        if not more:
            time.sleep(poll)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
