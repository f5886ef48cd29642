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

One request may serve many hosts (ClusterShell sends one standard input to all the hosts of a worker): its
``"hosts"`` maps a host's name (the program's first argument) to that host's ``path`` and ``offsets``. The
second and third, the viewer's token and launch, name its followers on the host's command lines: a new one
ends the same viewer's older followers of that host (through a gateway those run on: :func:`superseded`).

Digest mode (``"digest": seconds`` in the request; issue 41): a rank file's complete rows are merged, one
row of its own columns a session and an interval standing for the rows it merged (``step_time``,
``data_wait``, ``tokens``, ``samples`` summed; ``mem_peak`` and ``overflow`` their largest; ``mfu`` and
``tokens_per_s`` over the summed step time; every other cell the last row's), sent as a part of the frame:
``[name, offset, length, false, mtime, {"k": [rows each line stands for], "end": offset after them}]``.
A session's first row, a step that goes back, a value that is not finite and an overflow end the merge and
go as they are (standing for 1); anything this program cannot vouch for as a row (a quote, a wrong width, a
CR, text where a number goes) ends it too and goes as raw bytes, with the rest of what was read. The file's
first bytes (its header, the reader's signature) always go raw, and so do the ranks named in ``"raw"``.
A rank's events file goes as written but for its heartbeats (an interval's last only), and a host's devices
file as written; both are held for the interval too, so a host sends one frame an interval: its heartbeat
frame is then sent every interval (at least every HEARTBEAT seconds, at most every QUIET).

Line mode (``"lines": true`` in the request, for readers that take a host's output a line at a time, as
ClusterShell's workers do): each frame is its header line alone, the compressed payload in it as base64
(``"z"``), ``n`` its length before base64; and each frame reads at most ``"chunk"`` bytes of a file.
"""

import base64
import json
import math
import os
import re
import stat
import sys
import time
import zlib

# mstop_writer.schema's CSV_PATTERN and EVENTS_PATTERN: this program runs alone on the remote host, so it has
# its own copy (tests/test_remote.py checks that the two agree)
NAME = re.compile(r"^rank(0|[1-9][0-9]{0,6})\.(csv|events\.jsonl)$")
# a rank file's older part, renamed away by a rotation (mstop.sources.rankfiles.rank_part's rule)
ROTATED = re.compile(r"^(rank(?:0|[1-9][0-9]{0,6})\.(?:csv|events\.jsonl))\.([1-9][0-9]{0,3})$")
# and DEVICES_PATTERN (a host's NPUs, written by one writer per host)
DEVICES = re.compile(r"^host_([A-Za-z0-9._-]{1,64})\.devices\.csv$")
# mstop.sources.mflog's names: a MindFormers job's rank folders and log files, and the stream name sent
MF_DIR = re.compile(r"^rank_(0|[1-9][0-9]{0,6})$")
MF_ROTATED = re.compile(r"^info\.log\.([1-9][0-9]{0,3})$")
MF_STREAM = re.compile(r"^(?:rank_(0|[1-9][0-9]{0,6})/info\.log|worker_(0|[1-9][0-9]{0,6})\.log|scheduler\.log)$")
MF_WORKER = re.compile(r"^worker_(0|[1-9][0-9]{0,6})\.log$")
SIGNATURE = 256
CHUNK = 4 << 20
LINES = False  # line mode: the payload inside the header line (base64), as the request asks
HEARTBEAT = 5.0
#: the longest a follower in digest mode stays quiet (the viewer calls a host silent after 20 s with no frame)
QUIET = 10.0
# mstop.sources.lifelocks: seconds an events file is idle before its life lock is looked at, the most looked at
# a look, and (the follower's own) seconds between looks
LIFE_SILENCE = 2.0
LIFE_PROBES = 256
LIFE_EVERY = 1.0
# the bytes of an events file's head looked at for its start event's boot id (after a reconnect)
HEAD = 64 << 10
PF_EXITING = 0x4  # /proc/PID/stat's flags: in the kernel's exit (mstop_writer.witness.PF_EXITING)
# a MindSpore log line's prefix ``ME(21888,7f3a...,python)``: the worker's pid (mstop.sources.procwatch's rule)
PID = re.compile(rb"\b[A-Z_]{2,16}\((\d{1,9}),[0-9a-fx]+,")
# a connection's own address in MindSpore's cluster warnings (mstop.sources.procwatch.SOURCE)
SOURCE = re.compile(rb"\bsource: (\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]{2,45}\]|[0-9A-Fa-f:.]{2,45})"
                    rb":\d{1,5}, destination")


def ran_here(head, pid):
    """Whether worker ``pid`` ran on this host by its log's first bytes ``head`` (mstop.sources.procwatch's
    rule): a line of its own gives its connection's address, and the address is one of this host's."""
    import ipaddress

    mine = f"({pid},".encode()
    for line in head.splitlines():
        m = SOURCE.search(line) if mine in line else None
        if m is None:
            continue
        try:
            ip = ipaddress.ip_address(m.group(1).decode("ascii").strip("[]"))
        except ValueError:
            return False
        return ip.is_loopback or ip in own_addresses()
    return False


def own_addresses():
    """This host's addresses, read from /proc/net (no socket)."""
    import ipaddress

    out = set()
    try:
        with open("/proc/net/fib_trie", encoding="ascii", errors="replace") as f:
            last = None
            for line in f:
                s = line.strip()
                if s.startswith("|--"):
                    last = s[3:].strip()
                elif s.startswith("/32 host LOCAL") and last is not None:
                    out.add(ipaddress.IPv4Address(last))
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii", errors="replace") as f:
            for line in f:
                out.add(ipaddress.IPv6Address(int(line.split()[0], 16)))
    except (OSError, ValueError, IndexError):
        pass
    return out


def send(out, header, payload=b""):
    data = zlib.compress(payload, 1) if payload else b""
    header["n"] = len(data)
    header["clock"] = time.time()
    if LINES:
        header["z"] = base64.b64encode(data).decode("ascii")
        data = b""
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
        # another file (replaced, or unknown after a reconnect), a shorter one, or a longer one that may have
        # been rewritten in place: the same start continues from the offset, any other is read again
        if offset and (here != ident or st.st_size != offset):
            if not (sig and st.st_size >= offset and f.read(len(sig)) == sig):
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
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name + ", not a regular file"
    return "a special file, not a regular file"


#: what read_file says of a rank file another file took the name of since it was listed (a rotation that
#: renamed it away between the listing and the look): the folder is listed again before it is read
REPLACED = "replaced"


def read_file(path, name, states, refused, replaced_ok=True):
    """New bytes of one rank file: (offset, data, reset, mtime), or None when there are none (or it is not
    a regular file: then ``refused`` says why; a FIFO would block open() forever). With ``replaced_ok``
    False, REPLACED for a file followed under this name that another file now holds (nothing read)."""
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
        if not replaced_ok and state[1] is not None and state[1] != (st.st_dev, st.st_ino):
            return REPLACED
        offset, data, reset = read_new(full, st, state)
    except OSError:
        return None
    return (offset, data, reset, st.st_mtime) if data or reset else None


def read_order(name):
    """A rank's older parts before its newer ones (rank0.csv.2, rank0.csv.1, rank0.csv): rows in written order."""
    m = ROTATED.match(name)
    return (m.group(1), -int(m.group(2))) if m else (name, 0)


def follow_renames(path, names, states, digests):
    """Files renamed by a rotation (rank0.csv -> rank0.csv.1, .1 -> .2) read on under their new names: found
    again by identity among their rank file's names (mstop.sources.local's rule). Returns [old, new] pairs,
    sent so the viewer renames its readers too."""
    rotated = [n for n in names if ROTATED.match(n)]
    bases = {ROTATED.match(n).group(1) for n in rotated + [n for n in states if ROTATED.match(n)]}
    renamed = []
    for base in sorted(bases):
        members = {base} | {n for n in rotated if ROTATED.match(n).group(1) == base}
        known = {tuple(st[1]): n for n, st in states.items() if st[1] is not None and (n == base or (
            ROTATED.match(n) and ROTATED.match(n).group(1) == base))}
        found = {}
        for n in sorted(members):
            try:
                st = os.stat(os.path.join(path, n))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in known:
                found[known[(st.st_dev, st.st_ino)]] = n
        moved = {old: (states.pop(old), (digests or {}).pop(old, None)) for old, n in found.items() if n != old}
        for old, (state, dig) in moved.items():
            states[found[old]] = state
            if digests is not None:
                digests.pop(found[old], None)
                if dig is not None:
                    digests[found[old]] = dig
            renamed.append([old, found[old]])
        for old in set(known.values()) - set(found) - members:  # deleted: its rows were sent
            states.pop(old, None)
            if digests is not None:
                digests.pop(old, None)
    return renamed


def read_listed(path, name, states, refused, digests, renamed):
    """read_file for a listed name; a rank file renamed away since the listing (a rotation between the
    listing and the look) is found again under its new name, and the new file under the name is read at the
    next pass, after the rest of the older part (read order); a file replaced, not renamed, is read again."""
    got = read_file(path, name, states, refused, replaced_ok=not NAME.match(name))
    if got != REPLACED:
        return got
    moves = follow_renames(path, os.listdir(path), states, digests)
    if renamed is not None:
        renamed += moves
    if any(old == name for old, _ in moves):
        return None
    return read_file(path, name, states, refused)


def read_dir(path, states, refused, digests=None, renamed=None, lives=None):
    """One pass over the directory: (files, payload, more, newest mtime); raises OSError when it cannot be
    listed. ``digests`` (digest mode): rank file name -> its Digest, for the files whose rows are merged, which
    are sent together once every DIGEST seconds (one frame a host an interval; its key None: when last).
    ``renamed``: the [old, new] names of files a rotation renamed are added to it."""
    files, payload, more, newest = [], [], False, 0.0
    now = time.time()
    flush = digests is not None and now - digests.get(None, 0.0) >= DIGEST
    names = os.listdir(path)
    moves = follow_renames(path, names, states, digests)
    if renamed is not None:
        renamed += moves
    for name in sorted(names, key=read_order):
        if not (NAME.match(name) or DEVICES.match(name) or ROTATED.match(name)):
            continue
        dig = digests.get(name) if digests is not None else None
        if dig is None and digests is not None and digested(name):
            dig = digests[name] = held(name)
            if states.get(name, [0])[0] > 0 and isinstance(dig, Digest):  # followed from an offset (a reconnect):
                dig.header(read_at(os.path.join(path, name), 0, 1 << 16))  # its header is read again
        got = read_listed(path, name, states, refused, digests, renamed)
        if got is None:
            continue
        offset, data, reset, mtime = got
        if lives is not None:
            lives.saw(path, name, offset, data, mtime)
        newest = max(newest, mtime)
        more = more or len(data) == CHUNK
        if dig is None:
            files.append([name, offset, len(data), reset, mtime])  # mtime: when it was last written
            payload.append(data)
            continue
        if reset:  # another file: what was kept of the one before goes (the reader drops its rows too)
            dig = digests[name] = held(name)
        dig.take(offset, data, reset)
        dig.mtime = mtime
        flush = flush or dig.kept > CHUNK
    if flush:
        digests[None] = now
        # in read order: a rank's older part's merged rows before its newer's (a rotation mid-interval)
        kept = [(n, d) for n, d in digests.items() if n is not None]
        for name, dig in sorted(kept, key=lambda nd: read_order(nd[0])):
            for part in dig.emit():
                if part[0] == "raw":
                    files.append([name, part[1], len(part[2]), part[3], dig.mtime])
                elif part[0] == "beats":
                    files.append([name, part[1], len(part[3]), part[4], dig.mtime, {"end": part[2]}])
                else:
                    files.append([name, part[1], len(part[3]), False, dig.mtime, {"k": part[4], "end": part[2]}])
                payload.append(part[2] if part[0] == "raw" else part[3])
    return files, payload, more, newest


def digested(name):
    """Whether a file is held for the interval in digest mode: a rank's CSV (its rows merged) or events (its
    heartbeats thinned), of a rank not asked for raw, and the host's devices file (its samples as written)."""
    m = NAME.match(name)
    return DIGEST > 0 and (DEVICES.match(name) is not None or (m is not None and int(m.group(1)) not in RAW))


def held(name):
    """What holds a file's bytes in digest mode until the interval's frame."""
    if NAME.match(name) and name.endswith(".csv"):
        return Digest()
    return Beats(thin=not DEVICES.match(name))


def quiet():
    """Seconds the follower may go without a frame: HEARTBEAT, or in digest mode its interval (one frame an
    interval, a heartbeat or not), at most QUIET."""
    return max(HEARTBEAT, min(DIGEST, QUIET))


class Beats:
    """A rank's events file in digest mode: of the heartbeats of an interval only the last goes (a heartbeat
    says only "alive at t": a later one says all an earlier one does; at 100,000 ranks beating every 5 s they
    are 20,000 lines a second); every other line, and the file's first bytes, as written. Sent as a part
    ``("beats", start, end, lines kept, reset)``: the lines are complete, ``end`` the offset after them.
    ``thin`` False (a host's devices file): every line goes, held for the interval's frame."""

    def __init__(self, reset=False, thin=True):
        self.thin = thin
        self.held = b""
        self.lines = []  # complete lines since the last part (None: a heartbeat a later one replaced)
        self.beat = None  # where the last heartbeat is among them
        self.start = None
        self.end = None
        self.reset = reset
        self.kept = 0
        self.mtime = 0.0

    def take(self, offset, data, reset=False):
        if reset:  # read again from its start: what was kept of the file before is not sent
            self.__init__(reset=True, thin=self.thin)
        pos, buf, self.held = offset - len(self.held), self.held + data, b""
        if self.start is None:
            self.start = pos
        cut = buf.rfind(b"\n") + 1
        self.held = buf[cut:]
        at = pos
        for line in buf[:cut].split(b"\n")[:-1]:
            if self.thin and at >= SIGNATURE and is_beat(line):
                if self.beat is not None:
                    self.kept -= len(self.lines[self.beat]) + 1
                    self.lines[self.beat] = None
                self.beat = len(self.lines)
            self.lines.append(line)
            self.kept += len(line) + 1
            at += len(line) + 1
        self.end = pos + cut

    def emit(self):
        """The lines kept since the last part, as one part (none when nothing came)."""
        if self.end is None or (self.end == self.start and not self.reset):
            return []
        text = b"".join(line + b"\n" for line in self.lines if line is not None)
        part = ("beats", self.start, self.end, text, self.reset)
        held = self.held
        self.__init__(thin=self.thin)
        self.held, self.start = held, part[2]  # an incomplete line goes with the next part
        return [part]


def is_beat(line):
    """Whether an events line is a heartbeat the writer wrote (a JSON object of that kind)."""
    if b'"heartbeat"' not in line:
        return False
    try:
        e = json.loads(line)
    except ValueError:
        return False
    return isinstance(e, dict) and e.get("kind") == "heartbeat"


#: digest mode: seconds a rank's rows are merged for (0: every row as written), and the ranks sent raw
DIGEST = 0.0
RAW = set()
#: the columns a merged row sums (mstop.engine.folds.SUMMED), and takes the largest of (the schema's names)
SUMMED = ("step_time", "data_wait", "tokens", "samples")
LARGEST = ("mem_peak",)
FLOAT32_MAX = 3.4028234663852886e38


class Digest:
    """One rank file's rows merged (digest mode, in the module's docstring): what is read is cut into raw
    parts and digest parts. State: the header's names, the row being merged, the lines merged and ready,
    an incomplete last line held back (its bytes go with the rest of the line)."""

    def __init__(self):
        self.cols = None  # the header's names; False: a header this program cannot vouch for (all raw)
        self.at = {}
        self.held = b""
        self.raw_line = True  # the next bytes up to a newline go raw (the file's first, a raw part's last)
        self.group = None  # the row being merged: [last cells, kinds, k, sums, largest, mfu x step time, end]
        self.ready = []  # (line, rows it stands for, offset after it)
        self.start = None  # offset of the first byte the ready lines and the group stand for
        self.session = None
        self.step = None
        self.out = []  # the parts to send, in order: ("raw", offset, bytes, reset), ("digest", start, end, ...)
        self.kept = 0  # their bytes
        self.mtime = 0.0

    def take(self, offset, data, reset=False):
        """New bytes of the file from ``offset`` (``reset``: the file was read again from its start): cut into
        the parts :meth:`emit` gives; the row being merged is kept."""
        pos, buf, self.held = offset - len(self.held), self.held + data, b""
        if self.raw_line or self.cols is None or pos < SIGNATURE or reset:
            cut = self.raw_cut(pos, buf)
            self.raw(pos, buf[:cut], reset)
            pos, buf = pos + cut, buf[cut:]
        i = 0
        while i < len(buf):
            nl = buf.find(b"\n", i)
            if nl < 0:
                self.held = buf[i:]
                break
            row = self.row(buf[i:nl])
            if row is None:  # not a row this program can vouch for: it and the rest go raw
                self.raw(pos + i, buf[i:])
                return
            self.add(row, buf[i:nl], pos + nl + 1)
            i = nl + 1

    def raw(self, offset, data, reset=False):
        """Bytes sent as they are, after the rows merged before them."""
        self.push()
        self.out.append(("raw", offset, data, reset))
        self.kept += len(data)
        self.header(data)
        self.raw_line = not data.endswith(b"\n")

    def emit(self):
        """Every part to send now, in order: the row being merged closed, the lines ready as one part."""
        self.push()
        out, self.out, self.kept = self.out, [], 0
        return out

    def push(self):
        """The row being merged closed, and the lines ready as one digest part."""
        self.close()
        if not self.ready:
            return
        ready, self.ready = self.ready, []
        text = b"".join(line + b"\n" for line, _, _ in ready)
        self.out.append(("digest", self.start, ready[-1][2], text, [k for _, k, _ in ready]))
        self.kept += len(text)
        self.start = None

    def raw_cut(self, pos, buf):
        """How much of ``buf`` (from file offset ``pos``) goes raw: up to the end of the line that holds the
        file's SIGNATURE-th byte, or the header, or the rest of a line a raw part began (all of it: none)."""
        at = max(0, SIGNATURE - pos - 1) if pos < SIGNATURE else 0
        while True:
            nl = buf.find(b"\n", at)
            if nl < 0:
                return len(buf)
            if self.cols is not None or self.header(buf[:nl + 1]) is not None:
                return nl + 1
            at = nl + 1

    def header(self, raw):
        """Read the header from raw bytes sent (the reader's rule: the first line with a ``time`` and a
        ``step`` cell); one that cannot be vouched for (a quote, a CR, a control code) leaves the file raw."""
        if self.cols is not None:
            return self.cols
        for line in raw.split(b"\n")[:-1]:
            if b"time" not in line or b"step" not in line:
                continue
            try:
                text = line.decode("utf-8").lstrip("\ufeff")
            except UnicodeDecodeError:
                text = None
            if text is None or '"' in text or any(c < " " for c in text):
                self.cols = False  # the reader may take it as its header: this program cannot follow it
                return self.cols
            cols = text.split(",")
            if "time" in cols and "step" in cols:
                self.cols = cols
                self.at = {c: j for j, c in enumerate(cols)}
                return cols
        return None

    def row(self, line):
        """A complete line as (cells, kinds, values, alone): kinds 0 empty, 1 a number, 2 text; ``alone``
        for a row that goes as it is (a value not finite or past float32, an overflow). None for a line this
        program cannot vouch for as a row."""
        if not self.cols or b'"' in line or b"\r" in line or b"\x00" in line:
            return None
        try:
            cells = line.decode("utf-8").split(",")
        except UnicodeDecodeError:
            return None
        if len(cells) != len(self.cols):
            return None
        kinds, vals, alone = [], [], False
        for c in cells:
            try:
                v = float(c) if c else None
            except ValueError:
                kinds.append(2)
                vals.append(0.0)
                continue
            if v is not None and not (math.isfinite(v) and abs(v) <= FLOAT32_MAX):
                alone = True
            kinds.append(0 if v is None else 1)
            vals.append(v or 0.0)
        t, s = self.at["time"], self.at["step"]
        if kinds[t] != 1 or kinds[s] != 1 or not (math.isfinite(vals[t]) and math.isfinite(vals[s])):
            return None  # the reader counts it bad: sent as written
        j = self.at.get("overflow")
        return cells, kinds, vals, alone or (j is not None and vals[j] != 0)

    def add(self, row, line, end):
        """Take one row (``line`` as written, ending at ``end``): merged into the row being merged when it
        continues it (same session, a later step, the same empty cells), else that row is closed."""
        if self.start is None:
            self.start = end - len(line) - 1
        cells, kinds, vals, alone = row
        j = self.at.get("session")
        session = cells[j] if j is not None else ""
        step = vals[self.at["step"]]
        g = self.group
        first = session != self.session or self.step is None or step <= self.step
        self.session, self.step = session, step
        if first or alone:  # a session's first row (its compilation), a step that went back, a NaN: as it is
            self.close()
            self.ready.append((line, 1, end))
            return
        if g is not None and g[1] == kinds:
            g[0], g[2] = cells, g[2] + 1
            for name, k in self.at.items():
                if kinds[k] == 1 and name in SUMMED:
                    g[3][name] += vals[k]
                elif kinds[k] == 1 and name in LARGEST:
                    g[4][name] = max(g[4][name], vals[k])
            g[5] += self.mfu_st(kinds, vals)
            g[6] = end
            return
        self.close()
        self.group = [cells, kinds, 1, {n: vals[k] for n, k in self.at.items() if n in SUMMED},
                      {n: vals[k] for n, k in self.at.items() if n in LARGEST}, self.mfu_st(kinds, vals), end]

    def mfu_st(self, kinds, vals):
        m, st = self.at.get("mfu"), self.at.get("step_time")
        return vals[m] * vals[st] if m is not None and st is not None and kinds[m] == kinds[st] == 1 else 0.0

    def close(self):
        """The row being merged becomes a line of its own columns, ready to go."""
        g, self.group = self.group, None
        if g is None:
            return
        cells, kinds, k, sums, largest, mfu_st, end = g
        cells = list(cells)
        at = self.at
        if k > 1:
            for name, v in list(sums.items()) + list(largest.items()):
                if kinds[at[name]] == 1:
                    cells[at[name]] = repr(v)
            st = sums.get("step_time") if "step_time" in at and kinds[at["step_time"]] == 1 else None
            if st:
                if "mfu" in at and kinds[at["mfu"]] == 1:
                    cells[at["mfu"]] = repr(mfu_st / st)
                if "tokens_per_s" in at and "tokens" in at and kinds[at["tokens_per_s"]] == kinds[at["tokens"]] == 1:
                    cells[at["tokens_per_s"]] = repr(sums["tokens"] / st)
        self.ready.append((",".join(cells).encode("utf-8"), k, end))


def has_log(folder):
    try:
        return any(n == "info.log" or MF_ROTATED.match(n) for n in os.listdir(folder))
    except OSError:
        return False


def rank_dirs(root):
    try:
        names = os.listdir(root)
    except OSError:
        return {}
    return {int(m.group(1)): os.path.join(root, n) for n, m in ((n, MF_DIR.match(n)) for n in names)
            if m is not None and os.path.isdir(os.path.join(root, n))}


def mf_root(path):
    """mstop.sources.mflog.log_root: (folder of rank_N folders, the one rank or None), or None."""
    path = os.path.abspath(path)
    m = MF_DIR.match(os.path.basename(path))
    if m is not None and has_log(path):
        return os.path.dirname(path), int(m.group(1))
    for root in (os.path.join(path, "log"), path):
        if any(has_log(d) for d in rank_dirs(root).values()):
            return root, None
    return None


def find_logs(path):
    """mstop.sources.mflog.find_logs: rank -> (folder, file name) of a MindFormers job's rank logs, else of
    msrun's worker logs (in ``path`` or its msrun_log/)."""
    found = mf_root(path)
    if found is not None:
        root, only = found
        return {r: (d, "info.log") for r, d in rank_dirs(root).items() if (only is None or r == only) and has_log(d)}
    path = os.path.abspath(path)
    for folder in (path, os.path.join(path, "msrun_log")):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        workers = {int(m.group(1)): n for n, m in ((n, MF_WORKER.match(n)) for n in names)
                   if m is not None and os.path.isfile(os.path.join(folder, n))}
        if workers:
            return {r: (folder, n) for r, n in workers.items()}
    return {}


def log_chain(folder, name="info.log"):
    """A rank's regular log files, oldest first: info.log.K ... info.log.1, info.log (or worker_N.log's)."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    rotated = re.compile("^" + re.escape(name) + r"\.([1-9][0-9]{0,3})$")
    for n in names:
        m = rotated.match(n)
        if m is not None or n == name:
            full = os.path.join(folder, n)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((-int(m.group(1)) if m else 0, full, st))
    return [(p, st) for _, p, st in sorted(found)]


def read_log(folder, state, name="info.log"):
    """New bytes of a rank's log stream (mstop.sources.mflog.LogStream's rules): the rest of the file being
    read (found by inode after a rotation), then the newer files. ``state``: [stream offset, ident, offset in
    that file]. Returns (data, more)."""
    files = log_chain(folder, name)
    if not files:
        return b"", False
    ident, phys, head = state[1], state[2], state[3]
    pos = 0
    if ident is not None:
        pos = next((i for i, (_, st) in enumerate(files) if (st.st_dev, st.st_ino) == ident), None)
        if pos is None:  # gone (deleted, or rotated past the last backup): the newest file; lines lost
            pos, phys, head = len(files) - 1, 0, b""
            state[4] += 1
    parts, budget, more = [], CHUNK, False
    while True:
        full, st = files[pos]
        if st.st_size < phys or (phys and st.st_size > phys and head and read_at(full, 0, len(head)) != head):
            # truncated in place (copytruncate), perhaps grown past the old size since: the lines since the
            # last read from its copy, then its new lines
            rest = log_copy(files, st, phys, head, budget, state)
            parts.append(rest)
            budget -= len(rest)
            phys, head = 0, b""
        data = read_at(full, phys, min(budget, st.st_size - phys))
        if phys < SIGNATURE:
            head = (head + data[:SIGNATURE - phys])[:SIGNATURE]
        ident, phys = (st.st_dev, st.st_ino), phys + len(data)
        parts.append(data)
        budget -= len(data)
        if budget <= 0:
            more = True
            break
        if pos + 1 >= len(files) or phys < st.st_size:
            break
        pos += 1
        if data and not data.endswith(b"\n"):
            parts.append(b"\n")
        ident, phys, head = (files[pos][1].st_dev, files[pos][1].st_ino), 0, b""
    data = b"".join(parts)
    state[0], state[1], state[2], state[3] = state[0] + len(data), ident, phys, head
    return data, more


def read_at(path, offset, n):
    """``n`` bytes of ``path`` from ``offset`` (fewer at its end; none when it cannot be read)."""
    if n <= 0:
        return b""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            f.seek(offset)
            return f.read(n)
    except OSError:
        return b""


def log_copy(files, truncated, phys, head, budget, state):
    """The lines a log gained before it was truncated in place, from its copy (another file of the chain
    that starts with the same bytes and is as long as what was read); none found: counted lost."""
    for full, st in files:
        if (st.st_dev, st.st_ino) == (truncated.st_dev, truncated.st_ino) or st.st_size < phys:
            continue
        if head and read_at(full, 0, len(head)) == head:
            data = read_at(full, phys, min(budget, st.st_size - phys))
            if phys + len(data) < st.st_size:
                state[4] += 1
            return data if not data or data.endswith(b"\n") else data + b"\n"
    state[4] += 1
    return b""


def read_logs(found, states):
    """One pass over a job's rank logs (find_logs), and msrun's scheduler.log beside worker logs (the job's
    state: workers that ended, or were lost): (files, payload, more, newest mtime)."""
    files, payload, more, newest = [], [], False, 0.0
    streams = [(f"rank_{r}/info.log" if n == "info.log" else n, folder, n) for r, (folder, n) in sorted(found.items())]
    workers = [folder for _, folder, n in streams if n != "info.log"]
    if workers and os.path.isfile(os.path.join(workers[0], "scheduler.log")):
        streams.append(("scheduler.log", workers[0], "scheduler.log"))
    for name, folder, file_name in streams:
        state = states.setdefault(name, [0, None, 0, b"", 0])
        start, lost = state[0], state[4]
        data, m = read_log(folder, state, file_name)
        if data or state[4] != lost:
            if file_name != "scheduler.log":  # its time is not a worker's life
                try:
                    newest = max(newest, os.stat(os.path.join(folder, file_name)).st_mtime)
                except OSError:
                    pass
            cursor = f"{state[1][0]}:{state[1][1]}:{state[2]}" if state[1] else ""
            files.append([name, start, len(data), False, cursor, state[4]])  # the last: times lines were lost
            payload.append(data)
            more = more or m
    return files, payload, more, newest


class Lives:
    """The life locks of this host's ranks (mstop.sources.lifelocks: a writer holds a flock on its events file
    while it lives): a rank of this kernel (its start event names this boot id) whose files have not grown for
    LIFE_SILENCE seconds, and twice its last gap between growths, is looked at, at most once every LIFE_EVERY
    seconds and LIFE_PROBES ranks a look; those whose lock nobody holds are sent (``unlocked``). Ranks of other
    hosts (a shared file system) cost nothing: a lock taken elsewhere does not reach here everywhere."""

    def __init__(self, boot):
        # its start event names it so, as JSON spaces it or not
        self.boot = [(f % boot).encode() for f in ('"boot_id":"%s"', '"boot_id": "%s"')] if boot else None
        self.local = {}  # rank -> its events file's name: ranks whose start event names this kernel
        self.checked = set()  # ranks whose events file's head was looked at
        self.grew = {}  # rank -> (time its files last grew, the gap before)
        self.seen = set()  # names of the files read since this follower started
        self.free = set()
        self.probed = {}  # rank -> when its lock was last looked at
        self.sent = None
        self.at = 0
        self.next = 0.0

    def saw(self, path, name, offset, data, mtime):
        """A rank file's bytes read (``offset``: where they begin in it; ``mtime``: when it was last written)."""
        m = NAME.match(name)
        if m is None or not data:
            return
        r = int(m.group(1))
        last = self.grew.get(r)
        if last is None or mtime > last[0]:
            # a gap is between two growths of one file seen here: not between the rank's two files' last writes
            # (a hung rank's heartbeats kept its events file growing seconds after its last row: as a gap it
            # kept its lock unlooked at for twice that, while its silence already read it dead)
            again = last is not None and name in self.seen
            self.grew[r] = (mtime, mtime - last[0] if again else (last[1] if last else 0.0))
        self.seen.add(name)
        self.free.discard(r)
        if self.boot and name.endswith(".jsonl") and (r not in self.checked or offset == 0):
            self.checked.add(r)  # once a file: at its first read, or its head after a reconnect
            head = data if offset == 0 else read_at(os.path.join(path, name), 0, HEAD)
            if any(b in head for b in self.boot):
                self.local[r] = name
            else:
                self.local.pop(r, None)

    def look(self, path):
        now = time.time()
        if now < self.next or not self.local:
            return
        self.next = now + LIFE_EVERY
        idle = [r for r in sorted(self.local) if r in self.grew and now - self.grew[r][0] > max(
            LIFE_SILENCE, 2 * self.grew[r][1]) and now - self.probed.get(r, 0.0) >= 5 * LIFE_EVERY]
        if not idle:
            return
        at = self.at % len(idle)
        self.at = at + LIFE_PROBES
        for r in (idle[at:] + idle[:at])[:LIFE_PROBES]:
            self.probed[r] = now
            got = lock_free(os.path.join(path, self.local[r]))
            if got is True:
                self.free.add(r)
            elif got is False:
                self.free.discard(r)

    def take(self):
        """The ranks whose lock is free, when that changed since the last frame (else None)."""
        now = sorted(self.free)
        if now == self.sent:
            return None
        self.sent = now
        return now


def lock_free(path):
    """mstop.sources.files.lock_free's rule: True when nobody holds a flock on path, None when unknown."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (ImportError, OSError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


class Workers:
    """A log-read job's worker processes on this host (mstop.sources.procwatch's rules, in this program's own
    copy): the pid in a worker log's MindSpore prefix, trusted only when that process writes that very log
    (its fd 1 or 2 is the file) and keeps its start time. Its ``exit`` and ``proc`` events go in the frame's
    header (``events``); the follower waits on the workers' pidfds, so an end is seen when it happens."""

    def __init__(self):
        self.watched = {}  # rank -> [pid, start ticks, pidfd or None, last state shown, last facts, done]
        self.tried = {}
        self.unseen = {}
        self.events = []
        self.ticks = float(os.sysconf("SC_CLK_TCK"))
        self.page = os.sysconf("SC_PAGE_SIZE")

    def facts(self, pid):
        fields = stat_fields(pid)
        if fields is None or len(fields) < 22:
            return None
        out = {"state": fields[0].decode("ascii", "replace"),
               "cpu_s": round((int(fields[11]) + int(fields[12])) / self.ticks, 3), "threads": int(fields[17]),
               "start_ticks": int(fields[19]), "rss": int(fields[21]) * self.page,
               "exiting": bool(int(fields[6]) & PF_EXITING)}
        if len(fields) >= 50 and out["state"] == "Z":
            out["exit_status"] = int(fields[49])
        return out

    def consider(self, rank, path):
        now = time.time()
        if rank in self.watched or rank in self.unseen or now - self.tried.get(rank, 0.0) < 1.0:
            return
        self.tried[rank] = now
        try:
            with open(path, "rb") as f:
                head = f.read(256 << 10)
            want = os.stat(path)
        except OSError:
            return
        m = PID.search(head)
        if m is None:
            return
        pid = int(m.group(1))
        mine = False
        for fd in (1, 2):
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            mine = mine or (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino)
        if not mine:
            now_facts = self.facts(pid)
            if (now_facts is None or now_facts["state"] in "ZX") and ran_here(head, pid):
                self.unseen[rank] = True  # ran here and ended: found ended, its time its log's last write
                self.events.append((rank, {"kind": "exit", "time": want.st_mtime, "pid": pid, "source": "follower",
                                           "host": HOST, "how": "unknown", "found_ended": True}))
                return
        facts = self.facts(pid) if mine else None
        if facts is None:
            self.unseen[rank] = True
            self.events.append((rank, {"kind": "writer_error", "reason": "procwatch", "source": "follower",
                                       "message": "the worker process is not visible from this host"}))
            return
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
        self.watched[rank] = [pid, facts["start_ticks"], pidfd, None, facts, False]
        self.proc(rank, facts, True)

    def proc(self, rank, facts, changed=False):
        w = self.watched[rank]
        shown = facts["state"] if facts["state"] in "TtDZ" else "ok"
        if changed or shown != w[3]:
            w[3] = shown
            self.events.append((rank, {"kind": "proc", "pid": w[0], "source": "follower", "host": HOST,
                                       "state": facts["state"], "cpu_s": facts["cpu_s"], "rss": facts["rss"],
                                       "threads": facts["threads"], "changed": True}))
        w[4] = facts

    def gone(self, w, facts):
        return facts is None or facts["start_ticks"] != w[1] or facts["state"] in "ZX"

    def running(self, w):
        """The worker runs now, not ending (no SIGKILL pending, not in the kernel's exit: PF_EXITING)."""
        f = self.facts(w[0])
        return not self.gone(w, f) and not f["exiting"] and not self.killed(w[0])

    def killed(self, pid):
        """A SIGKILL is pending for the process: it is ending (a whole job killed at once: no order seen)."""
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & 0x100:
                        return True
        except (OSError, ValueError, IndexError):
            return False
        return False

    def look(self):
        """Each watched worker's facts; an ``exit`` for each that ended (seen at one time, with the workers
        still running when looked at again after those ends: ``peers_alive``, they outlived them)."""
        active = {rank: w for rank, w in self.watched.items() if not w[5]}
        facts = {rank: self.facts(w[0]) for rank, w in active.items()}
        gone = [rank for rank, w in active.items() if self.gone(w, facts[rank])]
        seen = time.time()
        alive = [w[0] for rank, w in active.items() if gone and rank not in gone and self.running(w)]
        for rank, w in active.items():
            f = facts[rank]
            if rank not in gone:
                self.proc(rank, f)
                continue
            e = {"time": seen, "kind": "exit", "pid": w[0], "source": "follower", "host": HOST, "how": "unknown",
                 "last_state": w[4]["state"] if w[4] else None, "peers_alive": alive}
            if f is not None and f.get("start_ticks") == w[1] and "exit_status" in f:
                status = f["exit_status"]
                if status & 0x7F:
                    import signal

                    try:
                        name = signal.Signals(status & 0x7F).name
                    except ValueError:
                        name = f"signal {status & 0x7F}"
                    e.update(how="signal", signal=name, code=-(status & 0x7F))
                else:
                    e.update(how="exit", code=(status >> 8) & 0xFF)
            self.events.append((rank, e))
            w[5] = True
            if w[2] is not None:
                os.close(w[2])
                w[2] = None

    def wait(self, seconds):
        """Sleep ``seconds``, or less when a watched worker ends (its pidfd wakes the poll)."""
        fds = [w[2] for w in self.watched.values() if w[2] is not None]
        if not fds:
            time.sleep(seconds)
            return
        import select

        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.poll(seconds * 1000)

    def take(self):
        out, self.events = self.events, []
        now = time.time()
        return [[rank, dict(e, time=now if "time" not in e else e["time"], rank=rank)] for rank, e in out]


HOST = os.uname()[1]


def one_pass(path, states, refused, workers, digests=None, renamed=None, lives=None):
    """One pass over the run directory: the writer's files (``digests``: in digest mode, each merged file's
    Digest; ``renamed``: what a rotation renamed; ``lives``: their life locks looked at), else the job's own
    logs (and its workers' processes, watched on this host): (files, payload, more, newest mtime)."""
    files, payload, more, newest = read_dir(path, states, refused, digests, renamed, lives)
    if lives is not None:
        lives.look(path)
    if not files and not any(NAME.match(n) for n in states):
        found = find_logs(path)  # no writer files: a job's own logs (MindFormers', msrun's)
        if found:
            files, payload, more, newest = read_logs(found, states)
            for r, (folder, n) in found.items():
                if MF_WORKER.match(n):  # msrun's worker log: the worker's own standard output
                    workers.consider(r, os.path.join(folder, n))
    workers.look()
    return files, payload, more, newest


def resumed(offsets):
    """The files' states a reconnect's request gives back (name -> offset and signature, or a log stream's
    cursor: device, inode and offset of the file being read). Every file the viewer reads on from an offset:
    one left out was sent again from its start, which a digest part cannot be (the viewer refused it at every
    reconnect: a host's devices file stopped the host for good)."""
    states = {}
    for name, (offset, sig) in offsets.items():
        if NAME.match(name) or ROTATED.match(name) or DEVICES.match(name):
            states[name] = [int(offset), None, bytes.fromhex(sig)]
        elif MF_STREAM.match(name):
            dev, ino, phys = (int(x) for x in sig.split(":"))
            states[name] = [int(offset), (dev, ino), phys, b"", 0]  # its first bytes are not known again
    return states


def stat_fields(pid, proc="/proc"):
    """The fields of ``/proc/PID/stat`` after the command's name (field 3 first), None when it is gone."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].split()


def start_ticks(pid, proc="/proc"):
    """A process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), None when gone."""
    fields = stat_fields(pid, proc)
    return int(fields[19]) if fields is not None and len(fields) > 19 and fields[19].isdigit() else None


def superseded(name, token, gen, proc="/proc"):
    """The followers this one replaces, and whether a newer one runs: the same viewer's (``token``) for the same
    host (``name``), named so on their command line with the viewer's launch (``gen``). Through a gateway a
    host's old follower runs on after the viewer started another (ClusterShell ends a gateway's worker whole,
    not one host's ssh), and ClusterShell may start a lost gateway's hosts again in the old worker, whose output
    the viewer no longer reads: the latest launch wins, and of one launch the latest started."""
    me = os.getpid()
    mine = (gen, start_ticks(me, proc) or 0, me)
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit() and int(p) != me]
    except OSError:
        return [], False
    older, newer = [], False
    for pid in pids:
        try:
            with open(os.path.join(proc, str(pid), "cmdline"), "rb") as f:
                args = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        head = args[:-3]  # the bootstrap: ``python3 -u -c PROGRAM`` compiling what it reads as mstop-follower
        if len(args) < 4 or args[-3:-1] != [name.encode(), token.encode()] or not args[-1].isdigit() \
                or not os.path.basename(head[0]).startswith(b"python") or b"-c" not in head \
                or b"'mstop-follower'" not in head[-1]:
            continue
        other = (int(args[-1]), start_ticks(pid, proc), pid)
        if other[1] is None:
            continue
        if other < mine:
            older.append(pid)
        else:
            newer = True
    return older, newer


def end_superseded(name, token, gen):
    """End the followers this one replaces; False when a newer one runs (this one is then to end)."""
    older, newer = superseded(name, token, gen)
    if newer:
        return False
    for pid in older:
        try:
            os.kill(pid, 15)  # SIGTERM: its ssh ends with it, and the gateway's ssh for it
        except OSError:
            pass
    return True


def this_hosts(request):
    """One request for many hosts (sent to all alike): this host's part, by its name (the first argument), and
    the same viewer's older followers of this host ended (the second and third: the viewer's token and launch);
    None when there is no part for it (said), or a newer launch follows this host."""
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    mine = request["hosts"].get(name)
    if not isinstance(mine, dict):
        send(sys.stdout.buffer, {"error": "no request for host " + repr(name)[:80]})
        return None
    request.update(mine)
    if len(sys.argv) > 3 and re.match(r"^[0-9a-f]{16}$", sys.argv[2]) and sys.argv[3].isdigit() \
            and not end_superseded(name, sys.argv[2], int(sys.argv[3])):
        return None  # a newer launch of this viewer follows this host: this one was started again for nothing
    return request


def main():
    global CHUNK, LINES, DIGEST, RAW
    request = json.loads(sys.stdin.readline())
    if "hosts" in request and this_hosts(request) is None:
        return
    LINES = bool(request.get("lines"))
    CHUNK = max(1 << 16, min(CHUNK, int(request.get("chunk") or CHUNK)))
    out = sys.stdout.buffer
    path = request["path"]
    poll = max(0.05, float(request.get("poll") or 0.5))
    DIGEST = max(0.0, float(request.get("digest") or 0.0))
    RAW = set(int(r) for r in request.get("raw") or ())
    digests = {} if DIGEST > 0 else None
    states = resumed(request.get("offsets", {}))
    if not os.path.isdir(path):
        send(out, {"error": "no such directory: " + path})
        return
    caught_up, last_sent = False, 0.0
    workers = Workers()
    boot = boot_id()
    lives = Lives(boot)
    refused, told = {}, {}  # name -> why it is not followed (sent when it changes)
    while True:
        renamed = []
        try:
            files, payload, more, newest = one_pass(path, states, refused, workers, digests, renamed, lives)
        except OSError as e:
            send(out, {"error": "cannot list " + path + ": " + str(e)})
            return
        now = time.time()
        news = refused != told
        events = workers.take()
        unlocked = lives.take()
        if files or news or events or renamed or unlocked is not None or now - last_sent >= quiet() or (
                not more and not caught_up):
            header = {"files": files, "gmtoff": time.localtime().tm_gmtoff}
            if unlocked is not None:  # the ranks whose life lock nobody holds (its kernel's boot id beside)
                header["unlocked"] = unlocked
                header["boot"] = boot
            if renamed:
                header["renamed"] = renamed  # before its files' entries: they are under the new names
            if events:
                header["events"] = events
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
            workers.wait(poll)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
