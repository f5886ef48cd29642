"""``mstop compare`` on generated runs with known figures: exact changes, noise, the equal-step trap, bad input."""

from __future__ import annotations

import pytest

from tests.helpers.runs import start, steps, write_events, write_rank


def test_figures_are_the_same_computed_a_few_ranks_at_a_time(tmp_path, monkeypatch):
    """Long runs are reduced a chunk of ranks at a time (bounded memory): the figures must not change,
    also host memory, which adds up ranks of one host that land in different chunks."""
    from mstop.commands import compare as cmp
    from mstop.engine.store import Store
    from mstop.sources.local import LocalSource

    run = tmp_path / "hosts"
    for r in range(6):
        write_events(run, r, [start("s1", t=999.0, host=f"node{r // 3}", memory_source="host", world_size=6,
                                    flops_per_token=6e6, peak_flops=1e12)])
        write_rank(run, r, steps(1, 50 + 10 * r, t0=1000.0, dt=0.1, step_time=0.1 + 0.01 * r, tokens=4096,
                                 data_wait=0.001 * r, loss=1.0, mem_peak=5e9 + r * 1e8, mem_total=64e9))
    store = Store()
    LocalSource(str(run), store).read_all()
    runs = [cmp.Run("hosts", [cmp.Member(str(run), store)])]
    whole = cmp.to_json(cmp.compare(runs, steps=(1, 100)))["runs"][0]["figures"]
    monkeypatch.setattr(cmp, "CHUNK_CELLS", 120)  # two ranks a chunk: node0's ranks 0-2 split across chunks
    chunked = cmp.to_json(cmp.compare(runs, steps=(1, 100)))["runs"][0]["figures"]
    assert chunked == whole
    # host memory: node1's three ranks together, 1 - (5.3 + 5.4 + 5.5) GB / 64 GB
    assert whole["mem_headroom"]["value"] == pytest.approx(1 - 16.2e9 / 64e9, rel=1e-6)


@pytest.mark.parametrize("a, b, said", [
    (["t.py", "--bs", "8"], ["t.py", "--bs", "16"], "--bs 8 -> --bs 16"),
    (["t.py", "--fast"], ["t.py", "--fast", "x"], "(nothing) -> x"),  # added at the end
    (["t.py", "--a"], ["t.py"], "--a -> (nothing)"),
    ([], ["t.py"], "(nothing) -> t.py"),
    (["t.py", "--note", "delay"], ["t.py", "--note", "no delay"], "--note delay -> --note 'no delay'"),
])
def test_argv_differences(a, b, said):
    from mstop.commands.compare import argv_diff

    assert argv_diff(a, b) == said


