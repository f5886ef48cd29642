"""A stand-in ``npu-smi`` for tests: a shell script put first on ``PATH`` that prints captured outputs of
the real tool (tests/data/npu-smi, sources in its SOURCES.md), and on demand is slow, fails, hangs, prints
nothing readable, or hangs past being killed (a child in its own session keeps the output open).

Its behaviour is read from files beside it at every call, so a test changes it while a writer samples:
``mode`` (ok, slow, fail, hang, garbage, stuck; flood: 1 GB of table lines; endless: table lines without
end), ``info`` (the file ``npu-smi info`` prints), ``usages``,
``health``; every call is appended to ``calls``.
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "npu-smi"

SCRIPT = r"""#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/calls"
mode=$(cat "$here/mode" 2>/dev/null || echo ok)
case "$mode" in
  slow) sleep 30 ;;
  hang) exec sleep 1000 ;;
  stuck) setsid sleep 1000 & wait ;;
  fail) echo "dcmi module initialize failed. ret is -8005" >&2; exit 8 ;;
  garbage) echo "Permission denied: run as root or a member of HwHiAiUser"; exit 0 ;;
  flood) yes "| 0     910B4    | OK    | 93.6   41   0    / 0   |" | head -c 1073741824; exit 0 ;;
  endless) exec yes "| 0     910B4    | OK    | 93.6   41   0    / 0   |" ;;
esac
case "$*" in
  "info") cat "$(cat "$here/info")" ;;
  "info -t usages -i "*) cat "$(cat "$here/usages")" ;;
  "info -t health -i "*) cat "$(cat "$here/health")" ;;
  *) echo "Usage: npu-smi info [-t type] [-i id]" >&2; exit 1 ;;
esac
"""


class ToolStandIn:
    """A stand-in tool's folder (put it first on PATH): the calls it was made, the environment that finds it."""

    folder: Path

    @property
    def calls(self) -> list[str]:
        p = self.folder / "calls"
        return p.read_text().splitlines() if p.exists() else []

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PATH": f"{self.folder}:{base.get('PATH', '')}"}


class StandIn(ToolStandIn):
    """The stand-in's folder (put it first on PATH) and its knobs."""

    def __init__(self, folder: Path, info: str = "info-910b3-x8-24.1.rc1.txt") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        exe = folder / "npu-smi"
        exe.write_text(SCRIPT)
        exe.chmod(0o755)
        self.set(mode="ok", info=info, usages="usages-i-atlas200ia2.txt", health="health-i-c-atlas200ia2.txt")

    def set(self, **knobs: str) -> None:
        for name, value in knobs.items():
            text = value if name == "mode" else str(value if Path(value).is_absolute() else DATA / value)
            (self.folder / name).write_text(text + "\n")
