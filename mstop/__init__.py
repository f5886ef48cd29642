"""mstop: follow the files ``mstop_writer`` writes and show them (the viewer half)."""

__version__ = "0.1.0"
