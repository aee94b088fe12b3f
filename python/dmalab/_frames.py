"""Records with lists of ``(part, value)`` pairs as flat DataFrame rows (pandas is imported
only when a frame is made)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def flatten(records: Iterable[Mapping[str, Any]], parts: Mapping[str, str]) -> pd.DataFrame:
    """One row per record: its other fields as they are, and each list field named in ``parts``
    (field -> column prefix) as one ``<prefix>:<part>`` column per pair, in order."""
    import pandas as pd

    rows = []
    for r in records:
        row: dict[str, Any] = {k: v for k, v in r.items() if k not in parts}
        for field, prefix in parts.items():
            row.update({f"{prefix}:{part}": value for part, value in r[field]})
        rows.append(row)
    return pd.DataFrame(rows)
