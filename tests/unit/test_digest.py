"""The follower's digest mode (issue 41): a rank's rows merged on its host, one row an interval standing for
the rows it merged. Run here in-process: the follower's own passes over a real run directory, their frames fed
to a real RemoteSource, against the same files read locally."""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstop.engine import figures, goodput
from mstop.engine.figures import Options
from mstop.engine.folds import SUMMED
from mstop.engine.store import Store
from mstop.formats.parse import CsvParser
from mstop.sources import read_once
from mstop.sources.followers import follower
from mstop.sources.rankfiles import Round
from mstop.sources.remote import RemoteError, RemoteSource, Target
from mstop_writer.schema import COLUMNS, DEVICE_COLUMNS


@pytest.fixture(autouse=True)
def _follower_settings():
    """The follower keeps its mode in module globals (it runs alone on its host): put back after each test."""
    saved = follower.DIGEST, follower.RAW
    yield
    follower.DIGEST, follower.RAW = saved


def row_text(t: float, step: int, session: str, rng: random.Random, **cells: str) -> dict[str, str]:
    st_ = 0.5 + rng.random() * 0.2
    row = {"time": f"{t:.3f}", "step": str(step), "epoch": "0", "loss": f"{6 - step / 100:.5f}", "lr": "0.001",
           "grad_norm": f"{1 + rng.random():.4f}", "step_time": f"{st_:.4f}",
           "data_wait": f"{0.02 * rng.random():.4f}", "queue_depth": str(rng.randrange(5)), "tokens": "4096",
           "samples": "8", "tokens_per_s": f"{4096 / st_:.1f}", "mfu": f"{0.3 + 0.05 * rng.random():.4f}",
           "mem_used": str(10**9), "mem_peak": str(10**9 + rng.randrange(10**6)), "mem_total": str(8 * 10**9),
           "overflow": "0", "loss_scale": "1024", "session": session}
    row.update(cells)
    return row


def job(ranks: int, steps: int, seed: int) -> dict[int, bytes]:
    """Each rank's rank file: two sessions (a resume at 3/5 of the steps), a NaN loss, an overflow, a row
    with no data wait, an extra column; rows a step time apart, with a little time beyond it."""
    rng = random.Random(seed)
    out = {}
    for r in range(ranks):
        lines = [",".join((*COLUMNS, "experts_used"))]
        t = 1.75e9 + r * 0.01
        for s in range(1, steps + 1):
            resumed = s >= steps * 3 // 5
            row = row_text(t, s, "b" if resumed else "a", rng)
            # the row's time: when its step ended (its step time and the loop's own, from the row before)
            t += float(row["step_time"]) + 0.01 + 0.004 * rng.random() + (2.0 if s == steps // 5 else 0.0)
            row["time"] = f"{t:.3f}"
            if s == steps // 4:
                row["loss"] = "nan"
            if s == steps // 3:
                row["overflow"] = "1"
            if s == steps // 2:
                row["data_wait"] = ""
            lines.append(",".join([row[c] for c in COLUMNS] + [str(rng.randrange(8))]))
        out[r] = ("\n".join(lines) + "\n").encode()
    return out


class Host:
    """A host's follower state, run in this process: each pass's frame fed to a RemoteSource."""

    def __init__(self, path: Path, store: Store, digest: float, raw: set[int] = frozenset(),
                 batch: bool = False) -> None:
        self.path, self.digest, self.raw = str(path), digest, set(raw)
        self.src = RemoteSource(Target("h", self.path), store)
        if batch:  # as a node set's hosts are read: their lines parsed together (mstop.sources.fanout)
            self.src.batch = Round(store)
        self.states: dict = {}
        self.digests: dict = {}

    def reconnect(self) -> None:
        """A new follower from the viewer's own request: its offsets and signatures."""
        self.src.following, self.src.digest = True, self.digest
        request = json.loads(json.dumps(self.src.request()))  # as it goes over the wire
        self.states = follower.resumed(request["offsets"])
        self.digests = {}

    def one_pass(self, *, due: bool = False) -> None:
        """One pass of the follower (``due``: every row being merged sent now)."""
        follower.DIGEST, follower.RAW = (1e-9 if due else 3600.0) if self.digest else 0.0, self.raw
        renamed: list = []
        files, payload, _, _ = follower.read_dir(self.path, self.states, {}, self.digests, renamed)
        self.sent = [f[0] for f in files]
        data = b"".join(payload)
        z = zlib.compress(data, 1) if data else b""
        header = {"files": files, "n": len(z), "clock": 0.0, **({"renamed": renamed} if renamed else {})}
        line = (json.dumps(header) + "\n").encode()
        self.src.take(line, json.loads(line), len(z), z)
        if self.src.batch is not None:
            self.src.batch.flush()


def follow(tmp_path: Path, texts: dict[int, bytes], *, digest: float = 1.0, raw: set[int] = frozenset(),
           seed: int = 0, reconnect_at: float | None = None, batch: bool = False) -> Store:
    """The files written in random pieces, a follower pass after each round (its rows due at random), then
    one with everything due; ``reconnect_at``: a new follower from the viewer's request after that share."""
    rng = random.Random(seed)
    run = tmp_path / "run"
    run.mkdir()
    for r in texts:
        (run / f"rank{r}.csv").write_bytes(b"")
    store = Store()
    host = Host(run, store, digest, raw, batch)
    pos = dict.fromkeys(texts, 0)
    total = sum(len(t) for t in texts.values())
    while any(pos[r] < len(t) for r, t in texts.items()):
        for r, text in texts.items():
            n = rng.randrange(1, 600)
            with open(run / f"rank{r}.csv", "ab") as f:
                f.write(text[pos[r]:pos[r] + n])
            pos[r] += n
        if reconnect_at is not None and sum(pos.values()) >= reconnect_at * total:
            host.reconnect()
            reconnect_at = None
        host.one_pass(due=rng.random() < 0.2)
    host.one_pass(due=True)
    return store


def boundaries(d, lo: int, hi: int) -> tuple[float, float, float]:
    """Rows ``lo``..``hi - 1`` of a digested rank: their first step, their last, and the step before them."""
    step = d.col("step")
    return float(step[lo]), float(step[hi - 1]), float(step[lo - 1])


@pytest.mark.parametrize("batch", [False, True], ids=["one host", "hosts parsed together"])
def test_merged_rows_give_the_figures_of_the_rows_they_stand_for(tmp_path, batch):
    texts = job(4, 300, seed=1)
    dig = follow(tmp_path, texts, raw={3}, batch=batch).snapshot()
    for r, text in texts.items():
        (tmp_path / "local").mkdir(exist_ok=True)
        (tmp_path / "local" / f"rank{r}.csv").write_bytes(text)
    raw = read_once(str(tmp_path / "local")).snapshot()
    opts = Options()
    assert dig.rows_written == raw.rows == 1200 and dig.bad_rows == raw.bad_rows == 0
    assert dig.rows < 300 + 3 * 150  # merged: fewer rows held (rank 3 is raw: 300 of them)
    assert dig.ranks[3].rows == 300
    for r in range(4):
        a, b = dig.ranks[r], raw.ranks[r]
        assert a.last("step") == b.last("step") and a.last("loss") == pytest.approx(b.last("loss"))
        said = [[(float(d.col("step")[i]), c, repr(v)) for i, c, v in d.nonfinite] for d in (a, b)]
        assert said[0] == said[1] == [(75.0, "loss", "nan")]  # the NaN, at its own step
        assert int(np.nansum(a.col("overflow"))) == int(np.nansum(b.col("overflow"))) == 1
        assert dig.folds.tokens_of(r) == pytest.approx(raw.folds.tokens_of(r), rel=1e-6)
        assert len(a.segments) == len(b.segments) == 2
        # over the same steps, the window's figures are the same (sums over the rows merged)
        n = a.rows
        first, last, before = boundaries(a, n - 12, n)
        wa, wb = figures.step_window(dig, first, last), figures.step_window(raw, before + 1, last)
        i, j = wa.ranks.index(r), wb.ranks.index(r)
        for f in (figures.rank_tokens_per_s, figures.rank_samples_per_s, figures.rank_data_wait_frac):
            assert f(dig, wa)[i] == pytest.approx(f(raw, wb)[j], rel=1e-5), f.__name__
        assert figures.rank_mfu(dig, opts, wa)[i] == pytest.approx(figures.rank_mfu(raw, opts, wb)[j], rel=1e-5)
        # a step's time: the merged rows' mean steps, near the rows' median
        assert figures.rank_step_time(wa)[i] == pytest.approx(figures.rank_step_time(wb)[j], rel=0.1)
        peaks = [[(int(k), h, p, t) for k, h, p, t in zip(m.ranks, m.hosts, m.peaks.tolist(), m.totals.tolist())
                  if k == r] for m in (figures.rank_memory(w) for w in (wa, wb))]
        assert peaks[0] == peaks[1] and len(peaks[0]) == 1  # the largest peak over the steps, and the total
    ga, gb = goodput.ledger(dig, opts), goodput.ledger(raw, opts)
    assert abs(ga.goodput - gb.goodput) < 0.002, (ga.seconds, gb.seconds)  # 0.04 points on 5 seeds
    for k in ("input_wait", "down", "recomputed"):
        assert ga.seconds[k] == pytest.approx(gb.seconds[k], rel=1e-4, abs=1e-3), k
    assert ga.seconds["stalled"] == pytest.approx(gb.seconds["stalled"], abs=0.1)  # the slow gap's 2 s, each rank


def test_a_follower_started_again_from_the_viewers_offsets_loses_and_doubles_no_row(tmp_path):
    texts = job(2, 200, seed=2)
    store = follow(tmp_path, texts, reconnect_at=0.5, seed=3)
    assert store.rows_written == 400 and store.bad_rows == 0
    assert store.resets == 0  # it went on from the offsets (the first bytes it was told matched): nothing again
    for r in range(2):
        step = store.ranks[r].col("step")
        sess = store.ranks[r].col("session")
        for s in np.unique(sess):
            assert (np.diff(step[sess == s]) > 0).all()
        assert store.ranks[r].last("step") == 200


def test_rows_the_follower_cannot_vouch_for_go_as_written(tmp_path):
    """A quoted cell, a CR line end, a row of the wrong width, a step that is no number: each is sent raw
    (the reader counts or reads it as always), and the rows after it are merged again."""
    rng = random.Random(4)
    lines = [",".join(COLUMNS)]
    t = 1.75e9
    for s in range(1, 121):
        row = row_text(t, s, "a", rng)
        t += 0.6
        text = ",".join(row[c] for c in COLUMNS)
        if s == 30:
            text = text.replace(",a", ',"a"')
        elif s == 50:
            text += "\r"
        elif s == 70:
            text += ",9"
        elif s == 90:
            text = text.replace(f",{s},", ",ninety,", 1)
        lines.append(text)
    texts = {0: ("\n".join(lines) + "\n").encode()}
    store = follow(tmp_path, texts, seed=5)
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "rank0.csv").write_bytes(texts[0])
    raw = read_once(str(tmp_path / "local"))
    assert raw.bad_rows == store.bad_rows == 2  # the wrong width, the step that is no number
    assert store.rows_written == raw.rows == 118
    assert store.rows < 118


def test_ranks_asked_raw_and_events_come_as_written(tmp_path):
    texts = job(2, 60, seed=6)
    store = follow(tmp_path, texts, raw={0, 1})
    assert store.rows == store.rows_written == 120


def test_the_header_and_the_files_first_bytes_always_go_raw():
    d = follower.Digest()
    head = (",".join(COLUMNS) + "\n").encode()
    rng = random.Random(7)
    body = b"".join((",".join(row_text(1.75e9 + s, s, "a", rng)[c] for c in COLUMNS) + "\n").encode()
                    for s in range(1, 40))
    d.take(0, head + body)
    parts = d.emit()
    assert parts[0][0] == "raw" and parts[0][1] == 0
    raw_len = len(parts[0][2])
    assert raw_len >= follower.SIGNATURE and (head + body)[:raw_len].endswith(b"\n")


def hostile(entry5: dict, start: int | None = None) -> tuple[RemoteSource, str]:
    """A digest part with ``entry5`` as its meta fed after a real header: the source and the error's words."""
    store = Store()
    src = RemoteSource(Target("evil", "/r"), store)
    head = (",".join(COLUMNS) + "\n").encode()
    row = (",".join(row_text(1.75e9, 2, "a", random.Random(0))[c] for c in COLUMNS) + "\n").encode()
    frames = [([["rank0.csv", 0, len(head), False, 0.0]], head),
              ([["rank0.csv", len(head) if start is None else start, len(row), False, 0.0, entry5]], row)]
    for files, data in frames:
        z = zlib.compress(data)
        line = (json.dumps({"files": files, "n": len(z), "clock": 0.0}) + "\n").encode()
        try:
            src.take(line, json.loads(line), len(z), z)
        except RemoteError as e:
            return src, str(e)
    return src, ""


@pytest.mark.parametrize("meta, start, words", [
    ({"k": [0], "end": 10**6}, None, "does not follow what was read"),
    ({"k": ["5"], "end": 10**6}, None, "does not follow what was read"),
    ({"k": [2], "end": 10**6}, 7, "does not follow what was read"),
    ({"k": [2], "end": 3}, None, "does not follow what was read"),
    ({"k": [2, 2], "end": 10**6}, None, "whose lines are not its 2 rows"),
    ({"k": 2, "end": 10**6}, None, "does not follow what was read"),
])
def test_a_digest_part_that_does_not_follow_what_was_read_ends_the_connection(meta, start, words):
    src, said = hostile(meta, start)
    assert words in said and said.startswith("evil: a digest of rank0.csv")
    assert src.store.rows == 0  # nothing of it taken


def test_a_well_formed_digest_part_is_taken_with_its_weight():
    src, said = hostile({"k": [5], "end": 10**6})
    assert said == ""
    assert src.store.rows == 1 and src.store.rows_written == 5


def test_the_follower_sums_the_columns_the_store_shows_a_step_at_a_time():
    assert follower.SUMMED == SUMMED


def in_pieces(d: follower.Digest | follower.Beats, blob: bytes, cuts: list[int], dues: list[bool]) -> list:
    """``blob`` given to ``d`` in pieces of ``cuts`` bytes, its parts taken after the pieces ``dues`` says, and
    at the end: every part, in order."""
    at, parts, i = 0, [], 0
    while at < len(blob):
        n = cuts[i % len(cuts)]
        d.take(at, blob[at:at + n])
        if dues[i % len(dues)]:
            parts += d.emit()
        at += n
        i += 1
    return parts + d.emit()


LINE = st.one_of(
    st.just("ROW"), st.just("ROW"), st.just("ROW"), st.just("NAN"), st.just("OVERFLOW"), st.just("EMPTY"),
    st.just("TEXT"), st.just("QUOTE"), st.just("CR"), st.just("WIDE"), st.just("BACK"), st.just("SESSION"),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b))


def make_line(kind: object, s: int, session: str, rng: random.Random) -> bytes:
    if isinstance(kind, bytes):
        return kind
    row = row_text(1.75e9 + s, s, session, rng)
    if kind == "NAN":
        row["grad_norm"] = "inf"
    elif kind == "OVERFLOW":
        row["overflow"] = "1"
    elif kind == "EMPTY":
        row["tokens"] = ""
    elif kind == "TEXT":
        row["lr"] = "warmup"
    elif kind == "BACK":
        row["step"] = str(max(1, s - 5))
    text = ",".join(row[c] for c in COLUMNS)
    if kind == "QUOTE":
        text = text.replace(",0,", ',"0",', 1)
    elif kind == "CR":
        text += "\r"
    elif kind == "WIDE":
        text += ",1"
    return text.encode()


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(LINE, min_size=1, max_size=80), cuts=st.lists(st.integers(1, 300), min_size=1, max_size=30),
       dues=st.lists(st.booleans(), min_size=1, max_size=30), garbage_first=st.booleans())
def test_property_parts_tile_the_file_and_every_line_is_sent_once(kinds, cuts, dues, garbage_first):
    """Whatever the lines and however they arrive: the parts cover the bytes read with no gap or overlap, up to
    the incomplete line held back; each complete line is sent raw or stands in a digest line, once; the digest
    lines are each a row of the file's header, never a bad one."""
    rng = random.Random(0)
    session, lines = "a", [b"some words before the header"] if garbage_first else []
    lines.append(",".join(COLUMNS).encode())
    for s, kind in enumerate(kinds, 1):
        session = "b" if kind == "SESSION" else session
        lines.append(make_line(kind, s, session, rng))
    blob = b"\n".join(lines) + b"\n" + b"1.75e9,3"  # an incomplete last line
    parser = CsvParser()
    parts = in_pieces(follower.Digest(), blob, cuts, dues)
    pos, lines_sent = 0, 0
    for part in parts:
        if part[0] == "raw":
            assert part[1] == pos and part[3] is False
            pos += len(part[2])
            parser.parse(part[2][:part[2].rfind(b"\n") + 1]) if b"\n" in part[2] else None
            lines_sent += part[2].count(b"\n")
        else:
            _, start, end, text, ks = part
            assert start == pos and end > start
            pos = end
            assert parser.header is not None
            rows = parser.parse(text)
            assert len(rows) == len(ks) and rows.bad == 0 and all(k >= 1 for k in ks)
            lines_sent += sum(ks)
    complete = blob.rfind(b"\n") + 1
    assert pos == complete - 0 or pos == len(blob)  # up to the held line (or through it, when sent raw)
    assert lines_sent == blob[:complete].count(b"\n")


def test_digest_lines_that_are_not_rows_when_parsed_together_are_read_as_they_are_and_said():
    """Hosts' digests are parsed together after their frames were taken: a line there that is no row (a host
    that is not the follower) is read as any line is, its weight dropped, and said in the notes."""
    from mstop.sources.rankfiles import followed

    store = Store()
    round_ = Round(store)
    head = (",".join(COLUMNS) + "\n").encode()
    good = (",".join(row_text(1.75e9, 2, "a", random.Random(0))[c] for c in COLUMNS) + "\n").encode()
    files = []
    for r in (0, 1):
        f = followed(f"rank{r}.csv", f"rank{r}.csv", store, "h")
        f.parser.parse(head)
        files.append(f)
    round_.add_digest(files[0], good, [4])
    round_.add_digest(files[1], b"not,a,row\n", [3])
    round_.flush()
    assert store.rows_written == 4 + 0 and store.bad_rows == 1
    assert any("digest lines that are not each a row" in n for n in store.notes), store.notes


def test_a_file_of_a_few_columns_is_merged_as_well(tmp_path):
    """A rank file written by hand with only some columns (no step time, no tokens): merged, its rows all
    counted, its last loss and step the file's."""
    lines = ["time,step,loss,session"] + [f"{1.75e9 + s:.1f},{s},{3.0 / s!r},a" for s in range(1, 101)]
    store = follow(tmp_path, {0: ("\n".join(lines) + "\n").encode()}, seed=8)
    assert store.rows_written == 100 and store.rows < 100 and store.bad_rows == 0
    assert store.ranks[0].last("step") == 100 and store.ranks[0].last("loss") == pytest.approx(0.03)


def events_text(rank: int, beats: int, seed: int) -> bytes:
    """A rank's events: its start, a heartbeat every 5 s, a checkpoint among them, a line that is no JSON."""
    rng = random.Random(seed)
    lines = [json.dumps({"time": 1.75e9, "kind": "start", "session": "a", "rank": rank, "world_size": 2,
                         "heartbeat_interval": 5.0})]
    for i in range(beats):
        lines.append(json.dumps({"time": 1.75e9 + 5 * i + rng.random(), "kind": "heartbeat", "step": i}))
        if i == beats // 2:
            lines.append(json.dumps({"time": 1.75e9 + 5 * i + 1, "kind": "checkpoint", "step": i, "path": "/c"}))
            lines.append('{"kind": "heartbeat", not json')
    return ("\n".join(lines) + "\n").encode()


def test_heartbeats_are_thinned_and_every_other_event_comes_as_written(tmp_path):
    """In digest mode an events file sends, of each interval's heartbeats, the last; the start, the checkpoint
    and the bad line come as written: the rank's last heartbeat, its checkpoints and bad events are the
    file's, with far fewer lines sent."""
    texts = job(2, 120, seed=9)
    run = tmp_path / "run"
    run.mkdir()
    events = {r: events_text(r, 200, seed=r) for r in range(2)}
    rng = random.Random(10)
    store = Store()
    host = Host(run, store, 1.0, batch=True)
    pos = {r: 0 for r in range(2)}
    for r in range(2):
        (run / f"rank{r}.csv").write_bytes(texts[r])
    while any(pos[r] < len(events[r]) for r in range(2)):
        for r in range(2):
            n = rng.randrange(1, 2000)
            with open(run / f"rank{r}.events.jsonl", "ab") as f:
                f.write(events[r][pos[r]:pos[r] + n])
            pos[r] += n
        host.one_pass(due=rng.random() < 0.3)
    host.one_pass(due=True)
    local = tmp_path / "local"
    local.mkdir()
    for r in range(2):
        (local / f"rank{r}.csv").write_bytes(texts[r])
        (local / f"rank{r}.events.jsonl").write_bytes(events[r])
    raw = read_once(str(local))
    assert store.bad_events == raw.bad_events == 2
    for r in range(2):
        a, b = store.ranks[r], raw.ranks[r]
        assert a.last_heartbeat == b.last_heartbeat and a.checkpoints == b.checkpoints and a.starts == b.starts
        assert a.last_event_time == b.last_event_time
    assert host.src.bytes_received < sum(len(t) for t in events.values()) / 2  # most heartbeats not sent


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(["beat", "beat", "other", "bad"]), min_size=1, max_size=60),
       cuts=st.lists(st.integers(1, 200), min_size=1, max_size=20), dues=st.lists(st.booleans(), min_size=1))
def test_property_thinned_events_tile_the_file_and_keep_every_other_line(kinds, cuts, dues):
    lines = []
    for i, k in enumerate(kinds):  # an eval that names a heartbeat, and a line that is no JSON, are no heartbeat
        lines.append(json.dumps({"time": float(i), "kind": "heartbeat"}) if k == "beat" else
                     json.dumps({"time": float(i), "kind": "eval", "name": "heartbeat"}) if k == "other" else
                     f'garbage "heartbeat" {i}')
    beats = {line.encode() for line, k in zip(lines, kinds) if k == "beat"}
    blob = ("\n".join(lines) + "\n").encode() + b'{"time": 99, "kind": "heart'  # an incomplete last line
    parts = in_pieces(follower.Beats(), blob, cuts, dues)
    pos, sent = 0, []
    for kind, start, end, text, reset in parts:
        assert kind == "beats" and start == pos and end >= start + len(text) and not reset
        sent += text.split(b"\n")[:-1]
        pos = end
    complete = blob[:blob.rfind(b"\n") + 1]
    assert pos == len(complete)
    whole = complete.split(b"\n")[:-1]
    assert [x for x in sent if x not in beats] == [x for x in whole if x not in beats]
    if beats:  # the last heartbeat is always sent
        assert [x for x in whole if x in beats][-1] in sent


def devices_text(host: str, samples: int, seed: int) -> bytes:
    """A host's devices file: 4 NPUs sampled every 2 s, AICore wandering, one device unhealthy late."""
    rng = random.Random(seed)
    lines = [",".join(DEVICE_COLUMNS)]
    for i in range(samples):
        for npu in range(4):
            cells = {"time": f"{1.75e9 + 2 * i:.3f}", "host": host, "npu": str(npu), "chip": "0",
                     "device": str(npu), "aicore": f"{rng.random():.3f}", "hbm_used": str(rng.randrange(1 << 30)),
                     "hbm_total": str(1 << 30), "health": "Alarm" if npu == 2 and i > samples // 2 else "OK",
                     "pids": str(100 + npu)}
            lines.append(",".join(cells.get(c, "") for c in DEVICE_COLUMNS))
    return ("\n".join(lines) + "\n").encode()


def test_a_hosts_device_samples_come_in_the_intervals_frame_each_as_written(tmp_path):
    """In digest mode the devices file is held for the interval (a host sends one frame an interval, not one
    more each time its sampler writes), then sent whole: every sample kept is the file's, none lost or twice,
    and a pass before the interval is due sends none of it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.csv").write_bytes(job(1, 20, seed=3)[0])
    text = devices_text("h1", 60, seed=4)
    store = Store()
    host = Host(run, store, 1.0, batch=True)
    host.one_pass(due=True)
    rng = random.Random(5)
    pos, fresh, reconnects = 0, False, 0
    while pos < len(text):
        n = rng.randrange(1, 3000)
        with open(run / "host_h1.devices.csv", "ab") as f:
            f.write(text[pos:pos + n])
        pos += n
        due = rng.random() < 0.3
        host.one_pass(due=due)
        if not due and not fresh:  # (a new follower's first pass sends what it read)
            assert host.sent == [], "a devices file's bytes sent before the interval's frame"
        fresh = due and rng.random() < 0.3
        if fresh:
            host.reconnect()  # a new follower (a rank asked for as written): it reads on from the offsets
            reconnects += 1
    assert reconnects >= 2
    host.one_pass(due=True)
    local = tmp_path / "local"
    local.mkdir()
    (local / "host_h1.devices.csv").write_bytes(text)
    (local / "rank0.csv").write_bytes(job(1, 20, seed=3)[0])
    raw = read_once(str(local))
    assert set(store.devices) == set(raw.devices) == {("h1", n, 0) for n in range(4)}
    for k in raw.devices:
        assert store.devices[k] == raw.devices[k]
    assert store.bad_device_rows == raw.bad_device_rows == 0


def test_a_follower_in_digest_mode_sends_one_frame_an_interval_and_never_goes_quiet_past_the_deadline():
    """Its heartbeat frame comes every interval (a flush and a heartbeat are one frame), never less often than
    every HEARTBEAT seconds, and never so seldom that the viewer's deadline calls a live host silent."""
    from mstop.sources.remote import FRAME_DEADLINE

    for digest, quiet in ((0.0, follower.HEARTBEAT), (2.0, follower.HEARTBEAT), (10.0, 10.0),
                          (3600.0, follower.QUIET)):
        follower.DIGEST = digest
        assert follower.quiet() == quiet
    assert 2 * follower.QUIET <= FRAME_DEADLINE


@pytest.mark.parametrize("digest", [1.0, 0.0], ids=["digest", "as written"])
def test_a_rank_file_renamed_away_between_the_listing_and_the_look_loses_and_doubles_nothing(tmp_path, monkeypatch,
                                                                                              digest):
    """A rotation (``mv rank3.csv rank3.csv.1``, the writer going on into a new rank3.csv) between the
    follower's listing of the folder and its look at the file: the name then holds another file. Found again
    under its new name, the older part's rows come first and the new file's after, each once, no file read
    again (under load in CI the new file was read as a replacement and 20 of 60 rows went missing)."""
    import os as os_

    lines = job(1, 60, seed=9)[0].splitlines(keepends=True)
    head, rows = lines[0], lines[1:]
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank3.csv").write_bytes(head + b"".join(rows[:20]))
    store = Store()
    host = Host(run, store, digest)
    host.one_pass(due=True)
    real = os_.listdir

    def rotating(path):
        names = real(path)
        monkeypatch.setattr(os_, "listdir", real)  # once
        with open(run / "rank3.csv", "ab") as f:
            f.write(b"".join(rows[20:40]))
        os_.rename(run / "rank3.csv", run / "rank3.csv.1")
        (run / "rank3.csv").write_bytes(head + b"".join(rows[40:]))
        return names

    monkeypatch.setattr(os_, "listdir", rotating)
    for _ in range(3):
        host.one_pass(due=True)
    assert store.resets == 0 and store.rows_written == 60
    step = store.ranks[3].col("step")
    assert (np.diff(step) > 0).all() and step[-1] == 60
