"""Reading samples off a replica's /metrics text, for tests and the stack alike."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample_total(text: str, sample_name: str, **labels: str) -> float:
    """``sample_name``'s value summed over the series that carry ``labels`` (0 when none does)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def samples_by(text: str, sample_name: str, label: str) -> dict[str, float]:
    """``sample_name``'s values by the value of ``label``, summed over its other labels."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == sample_name:
                key = sample.labels.get(label, "")
                out[key] = out.get(key, 0.0) + sample.value
    return out
