"""Issue 26, the job's side: whatever is planted at the names the writer reads or makes in its run directory
(``profile.request``, ``profile.plan``, the plan's temporary file, ``profile/``), a real training process
never blocks, finishes, writes every row, and changes nothing outside its run directory; the monitor's
``P`` never blocks nor writes through a link either."""

from __future__ import annotations


