"""Alert bookkeeping between frames, without any screen code: which alerts the user has not seen yet
(the a key marks them seen), which were already told (the bell, ``--on-alert``), and running the
``--on-alert`` command (a process: the live room's, never the frame's)."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def _key(a: Any) -> tuple:
    """One alert while it holds: its kind, rank and the step it began at (a spike at another step, or the
    same condition again after it cleared, is a new one)."""
    return (a.kind, a.rank, a.since_step if a.since_step is not None else a.step)


class Alerting:
    """What was seen and what was told, across frames (an alert is told once while it holds)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command  # --on-alert, split like a shell would (never run through one)
        self._seen: set[tuple] = set()
        self._told: set[tuple] = set()
        self._told_verdicts: set[tuple] = set()

    def update(self, alerts: list[Any]) -> tuple[int, list[Any]]:
        """Take this frame's alerts: how many the user has not seen, and the ones never told before (to
        ring for, and to send to ``--on-alert``), each told once."""
        keys = {_key(a) for a in alerts}
        fresh = [a for a in alerts if _key(a) not in self._told]
        self._told |= keys
        return len(keys - self._seen), fresh

    def verdicts(self, verdicts: list[Any]) -> list[Any]:
        """Of this frame's diagnosis (mstop.engine.diagnosis.Verdict), the verdicts never told before (a kind
        on its ranks since its step: told once while it holds); ``healthy`` is never told."""
        fresh = []
        for v in verdicts:
            key = (v.kind, tuple(v.ranks), (v.since or {}).get("step"))
            if v.kind != "healthy" and key not in self._told_verdicts:
                self._told_verdicts.add(key)
                fresh.append(v)
        return fresh

    def seen(self, alerts: list[Any]) -> None:
        """The user looked at these (the a key)."""
        self._seen |= {_key(a) for a in alerts}

    def run_command(self, alerts: list[dict[str, Any]], timeout: float = 60.0) -> list[str]:
        """Run the ``--on-alert`` command once per alert, the alert as JSON on its standard input; return
        what failed. Blocks: the app runs it on a worker thread."""
        errors = []
        for a in alerts if self.command else []:
            try:
                subprocess.run(self.command, input=json.dumps(a).encode(), timeout=timeout,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            except (OSError, subprocess.TimeoutExpired) as e:
                errors.append(f"--on-alert failed: {e}")
        return errors
