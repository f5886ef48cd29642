"""Prometheus text read back by ``prometheus_client``'s own parser, for the export's tests (issue 61)."""

from __future__ import annotations


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition by (name, its labels but ``run`` and ``host``, sorted)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("run", "host")))
            out[(s.name, labels)] = s.value
    return out
