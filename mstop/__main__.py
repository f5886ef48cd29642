"""``python -m mstop``: the same as the ``mstop`` command."""

from .cli import run

run()
