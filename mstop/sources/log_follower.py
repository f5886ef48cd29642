"""The program mstop runs on a remote host for the log pane (``L``) over ssh: one read of a rank's log.

Sent over the ssh channel and run by the remote ``python3`` (3.6 or newer, standard library only), once
per read while the pane is open (nothing runs while it is closed). Its request, one JSON line on standard
input: ``{"paths": [...], "offset": n or null, "ident": [dev, ino] or null, "tail": bytes}``. It reads the
first of ``paths`` that is a regular file (never opening anything else: a FIFO would block), from
``offset`` when the file is still the one ``ident`` names and no shorter, else its last ``tail`` bytes,
and writes one JSON header line (``{"path", "ident", "offset", "reset", "n"}``, or ``{"error": ...}``)
and then ``n`` bytes of the file.
"""

import json
import os
import stat
import sys


def main():
    req = json.loads(sys.stdin.readline())
    out = sys.stdout.buffer
    tail = int(req.get("tail") or 1 << 20)
    why = "no such file"
    for path in req.get("paths") or []:
        try:
            st = os.stat(path)
        except OSError as e:
            why = f"cannot read {path}: {e.strerror or e}"
            continue
        if not stat.S_ISREG(st.st_mode):
            why = f"{path} is not a regular file"
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as e:
            why = f"cannot open {path}: {e.strerror or e}"
            continue
        try:
            st = os.fstat(fd)
            ident = [st.st_dev, st.st_ino]
            offset = req.get("offset")
            reset = offset is None or req.get("ident") != ident or st.st_size < offset
            if reset:
                offset = max(0, st.st_size - tail)
            os.lseek(fd, offset, 0)
            data = os.read(fd, min(max(0, st.st_size - offset), tail))
        finally:
            os.close(fd)
        head = {"path": path, "ident": ident, "offset": offset, "reset": reset, "n": len(data)}
        out.write((json.dumps(head) + "\n").encode("utf-8") + data)
        out.flush()
        return 0
    out.write((json.dumps({"error": why}) + "\n").encode("utf-8"))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
