"""The one-shot commands for scripts: ``mstop summary``, ``mstop compare``, ``mstop report``."""
