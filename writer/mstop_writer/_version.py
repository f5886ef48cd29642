"""The writer's version, in one place: the package face re-exports it and the start event records it."""

__version__ = "0.1.0"
