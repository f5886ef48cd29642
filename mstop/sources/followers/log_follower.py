"""The program mstop runs on a remote host for the log pane (``L``) over ssh: one read of a rank's log.

Sent over the ssh channel and run by the remote ``python3`` (3.6 or newer, standard library only), once
per read while the pane is open (nothing runs while it is closed). Its request, one JSON line on standard
input: ``{"paths": [...], "checks": [...], "offset": n or null, "ident": [dev, ino] or null, "tail":
bytes}``. It reads the first of ``paths`` that is a log the job could have written (:func:`refusal`, with
the path's entry of ``checks``), from ``offset`` when the file is still the one ``ident`` names and no
shorter, else its last ``tail`` bytes, and writes one JSON header line (``{"path", "ident", "offset",
"reset", "n"}``, or ``{"error": ...}``) and then ``n`` bytes of the file.

:func:`refusal` is also what mstop applies to a log on its own machine (mstop.sources.logs): one rule.
"""

import json
import os
import stat
import sys

#: how long before the job's start event its output file may have been written last (clocks of two hosts)
SLACK_S = 3600.0


def refusal(path, within=None, vouch=None, since=None):
    """Why the file at ``path`` is not shown as a rank's log (None: it is), never opening it. A log is shown
    only when it is a regular file (not a link: a link is never followed) that the job could have written:
    inside the folder ``within`` (the run's folder, or the logs folder the user named) once every link on
    the way is resolved, or owned by the owner of ``vouch`` (the rank's events file, whose start event named
    the file: a name in a file anyone could have written must not make mstop show another user's file) and
    written to since ``since`` (the start event's time, less SLACK_S): the job's output is written while it
    runs, a key or a system file named by a forged event was not. A path that does not exist gives
    ``"missing: ..."``."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"missing: cannot read {path}: {e.strerror or e}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link: a log is never read through a link"
    return _judge(st, os.path.realpath(path), path, within, vouch, since)


def opened_refusal(fd, path, within=None, vouch=None, since=None):
    """:func:`refusal`'s rule applied to the file open at ``fd`` (opened from ``path`` after refusal said
    yes): its real place read from the descriptor (``/proc/self/fd``), its owner and time by ``fstat``. A
    folder link swapped between the look and the open cannot bring another file in: what is read is what
    was judged."""
    st = os.fstat(fd)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the path as it resolves now, if it is still this very file
        real = os.path.realpath(path)
        try:
            now = os.stat(real)
        except OSError:
            return f"{path} changed while it was opened"
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return f"{path} changed while it was opened"
    return _judge(st, real, path, within, vouch, since)


def _judge(st, real, path, within, vouch, since):
    """The rule of :func:`refusal` for a file of status ``st`` whose real place is ``real``."""
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if within is not None:
        base = os.path.realpath(within)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return None
        if vouch is None:
            return f"{path} is outside {within}"
    if vouch is not None:
        try:
            vst = os.lstat(vouch)
        except OSError as e:
            return f"{path} is named by {vouch}, which cannot be read ({e.strerror or e}): not shown"
        if not stat.S_ISREG(vst.st_mode):
            return f"{path} is named by {vouch}, which is not a regular file: not shown"
        if st.st_uid != vst.st_uid:
            return (f"{path} is named by {vouch} but belongs to another user (uid {st.st_uid}; the job's files: "
                    f"uid {vst.st_uid}): a log is shown only when the job could have written it")
        if isinstance(since, (int, float)) and st.st_mtime < since - SLACK_S:
            return (f"{path} is named by {vouch} but was last written before the job started: a log is shown "
                    "only when the job could have written it")
    return None


def main():
    req = json.loads(sys.stdin.readline())
    out = sys.stdout.buffer
    tail = int(req.get("tail") or 1 << 20)
    why = refused = missing = None
    paths = req.get("paths") or []
    checks = req.get("checks") or [{}] * len(paths)
    for path, check in zip(paths, checks):
        bad = refusal(path, check.get("within"), check.get("vouch"), check.get("since"))
        if bad is not None:  # the first file refused says why, else the first missing
            if bad.startswith("missing: "):
                missing = missing or bad[len("missing: "):]
            else:
                refused = refused or bad
            continue
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError as e:
            why = f"cannot open {path}: {e.strerror or e}"
            continue
        try:
            bad = opened_refusal(fd, path, check.get("within"), check.get("vouch"), check.get("since"))
            if bad is not None:  # swapped since it was looked at: what was opened is judged
                refused = refused or bad
                continue
            st = os.fstat(fd)
            ident = [st.st_dev, st.st_ino]
            offset = req.get("offset")
            reset = offset is None or req.get("ident") != ident or st.st_size < offset
            skipped = 0
            if reset:
                offset = max(0, st.st_size - tail)
            elif st.st_size - offset > tail:  # more than a tail since the last read (a burst, a hole): its end
                skipped, offset = st.st_size - offset - tail, st.st_size - tail
            os.lseek(fd, offset, 0)
            data = os.read(fd, min(max(0, st.st_size - offset), tail))
        finally:
            os.close(fd)
        head = {"path": path, "ident": ident, "offset": offset, "reset": reset, "n": len(data), "skipped": skipped}
        out.write((json.dumps(head) + "\n").encode("utf-8") + data)
        out.flush()
        return 0
    out.write((json.dumps({"error": refused or why or missing or "no such file"}) + "\n").encode("utf-8"))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
