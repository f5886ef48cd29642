"""A stand-in ``nvidia-smi`` for tests: a shell script put first on ``PATH`` that prints the outputs in
tests/data/nvidia-smi (written in the form nvidia-smi documents: SOURCES.md there) for the two queries the
writer makes (mstop_writer.gpus), and appends every call to ``calls``."""

from __future__ import annotations

from pathlib import Path

from .npu_smi import ToolStandIn

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"

SCRIPT = r"""#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/calls"
case "$1" in
  --query-gpu=*) cat "$(cat "$here/gpus")" ;;
  --query-compute-apps=*) cat "$(cat "$here/apps")" ;;
  *) echo "unknown option" >&2; exit 1 ;;
esac
"""


class StandIn(ToolStandIn):
    """The stand-in's folder (put it first on PATH)."""

    def __init__(self, folder: Path, gpus: str = "query-gpu-a100x4.csv", apps: str = "query-apps-a100x4.csv") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        exe = folder / "nvidia-smi"
        exe.write_text(SCRIPT)
        exe.chmod(0o755)
        (folder / "gpus").write_text(str(DATA / gpus) + "\n")
        (folder / "apps").write_text(str(DATA / apps) + "\n")
