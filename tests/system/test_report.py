"""``mstop report``: real PNGs and a report.md whose table is ``mstop compare --format markdown``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.common import ROOT
from tests.helpers.runs import start, steps, write_events, write_rank, written_at

mpl_image = pytest.importorskip("matplotlib.image", reason="no matplotlib (pip install ./writer '.[report]')")

PLOTS = ("loss", "lr", "grad_norm", "tokens_per_s", "mfu", "headroom", "data_wait")


def mstop(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mstop", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def make(run, *, step_time, grad=True, restart_at=None, nan_at=None):
    for r in range(2):
        write_events(run, r, [start("s1", t=999.0, run_name=run.name, world_size=2, flops_per_token=6e6,
                                    peak_flops=1e12),
                              {"time": 1000.0 + 100 * step_time, "kind": "checkpoint", "step": 100, "path": "c"}])
        last = restart_at + 20 if restart_at else 300
        write_rank(run, r, steps(1, last, t0=1000.0, dt=step_time, step_time=step_time, data_wait=0.01 * (r + 1),
                                 loss=lambda s: "nan" if s == nan_at else 5.0 / s ** 0.3, lr=1e-3,
                                 grad_norm=(lambda s: 1.0 + 1 / s) if grad else None, tokens=4096,
                                 mem_peak=30e9 + r * 1e9, mem_total=64e9))
        if restart_at:
            write_events(run, r, [start("s2", t=5000.0, run_name=run.name, world_size=2)])
            write_rank(run, r, steps(restart_at, 300, session="s2", t0=5000.0, dt=step_time, step_time=step_time,
                                     data_wait=0.01, loss=lambda s: 5.0 / s ** 0.3, lr=1e-3, tokens=4096,
                                     mem_peak=30e9, mem_total=64e9))
    # an old run: its files last written when its last rows say (written just now, it is a live job whose
    # clock reads 1970, whose goodput moves between two commands: mstop.engine.clocks)
    return written_at(run, 5000.0 + 300 * step_time if restart_at else 1000.0 + 300 * step_time)


def test_report_writes_pngs_and_the_compare_table(tmp_path):
    base = make(tmp_path / "base", step_time=0.1, nan_at=150)
    other = make(tmp_path / "other", step_time=0.08, grad=False, restart_at=200)
    out = tmp_path / "report"
    proc = mstop("report", base, other, "--out", out, "--loss-at", 250)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out / f"{p}.png") for p in PLOTS] + [str(out / "goodput.png"),
                                                                              str(out / "report.md")]
    for p in PLOTS:
        data = (out / f"{p}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        img = mpl_image.imread(out / f"{p}.png")
        assert img.shape[:2] == (450, 1000)
        colours = {tuple(px) for px in img.reshape(-1, img.shape[2])[::50].round(2).tolist()}
        assert len(colours) > 10, f"{p}.png looks blank"  # lines, labels, grid: a drawn plot
    md = (out / "report.md").read_text()
    table = mstop("compare", base, other, "--loss-at", 250, "--format", "markdown").stdout
    assert table in md  # the comparison, byte for byte
    assert "![loss (thin: raw, thick: smoothed)](loss.png)" in md
    assert "Not drawn: other: no grad norm data." in md  # one run has no grad_norm column
    assert "restart inside the window at step 200" in md
    # goodput: a bar per run and a table row per run whose figure is compare's (and summary's) goodput
    assert "![Where the time went](goodput.png)" in md
    comp = json.loads(mstop("compare", base, other, "--format", "json").stdout)
    for label, run in (("base", comp["runs"][0]), ("other", comp["runs"][1])):
        pct = f"{100 * run['figures']['goodput']['value']:.1f} %"
        assert any(line.startswith(f"| {label} |") and f"| {pct} |" in line for line in md.splitlines()), pct
    assert "nan_loss at step 150" in md  # the alert at the end of the files, with its step


def test_report_of_one_run_and_bad_sources(tmp_path):
    base = make(tmp_path / "base", step_time=0.1)
    proc = mstop("report", base, "--out", tmp_path / "one")
    assert proc.returncode == 0, proc.stderr
    assert "| base (baseline) |" in (tmp_path / "one" / "report.md").read_text()
    odd = make(tmp_path / "run $x_1 | *b*", step_time=0.1)  # mathtext, markdown table and emphasis characters
    proc = mstop("report", base, odd, "--out", tmp_path / "odd")
    assert proc.returncode == 0, proc.stderr
    assert "| run $x_1 \\| *b* |" in (tmp_path / "odd" / "report.md").read_text()
    proc = mstop("report", base, tmp_path / "missing", "--out", tmp_path / "two")
    assert proc.returncode == 2 and "no such directory" in proc.stderr and "Traceback" not in proc.stderr


def test_report_without_matplotlib_says_what_to_install(tmp_path):
    base = make(tmp_path / "base", step_time=0.1)
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # as if it were not installed
            "from mstop.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "report", str(base), "--out", str(tmp_path / "r")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "pip install matplotlib" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_a_plot_no_run_has_data_for_is_not_written_and_report_md_says_so(tmp_path):
    base = make(tmp_path / "base", step_time=0.1, grad=False)
    other = make(tmp_path / "other", step_time=0.08, grad=False)
    out = tmp_path / "report"
    proc = mstop("report", base, other, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert not (out / "grad_norm.png").exists() and str(out / "grad_norm.png") not in proc.stdout
    md = (out / "report.md").read_text()
    assert "Not drawn: no run has grad norm data." in md and "(grad_norm.png)" not in md
    assert (out / "mfu.png").exists()  # derived from tokens/s and the start event, as the table derives it


def test_host_memory_headroom_plot_agrees_with_the_table(tmp_path):
    """Two ranks on one host, host RAM: the plot's headroom is the host's (the ranks' peaks added up), the
    figure the compare table shows, not each rank's own share."""
    from mstop.commands.report import host_headroom
    from mstop.engine.store import Store
    from mstop.sources.local import LocalSource

    run = tmp_path / "host"
    for r in range(2):
        write_events(run, r, [start("s1", t=999.0, world_size=2, host="n0", memory_source="host")])
        write_rank(run, r, steps(1, 100, t0=1000.0, dt=0.1, step_time=0.1, loss=1.0, tokens=10,
                                 mem_peak=20e9 + r * 1e9, mem_total=64e9))
    store = Store()
    LocalSource(str(run), store).read_all()
    lines, n = host_headroom(store)
    assert n == 1 and lines[0][0] == "host n0 (2 ranks)"
    import json

    table = json.loads(mstop("compare", run, run, "--format", "json").stdout)
    head = table["runs"][0]["figures"]["mem_headroom"]["value"]
    assert min(lines[0][2]) == pytest.approx(head) == pytest.approx(1 - 41e9 / 64e9)


def test_report_replaces_links_planted_in_its_folder_never_writes_through_them(tmp_path):
    """Issue 58, item 11: links named as report's files (``loss.png``, ``report.md``) made it write into their
    targets (another user's file); each file is now made new and renamed over the link."""
    base = make(tmp_path / "base", step_time=0.1)
    out = tmp_path / "report"
    out.mkdir()
    victims = {name: tmp_path / f"victim-{name}" for name in ("loss.png", "report.md")}
    for name, victim in victims.items():
        victim.write_text("keep me\n")
        (out / name).symlink_to(victim)
    proc = mstop("report", base, "--out", out)
    assert proc.returncode == 0, proc.stderr
    for name, victim in victims.items():
        assert victim.read_text() == "keep me\n", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 100, name
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![loss" in (out / "report.md").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left behind
