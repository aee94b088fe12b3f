"""Records with lists of ``(part, value)`` pairs as flat DataFrame rows (pandas is imported
only when a frame is made)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def flatten(records: Iterable[Mapping[str, Any]], parts: Mapping[str, str]) -> pd.DataFrame:
    """One row per record: its other fields as they are, and each list field named in ``parts``
    (field -> column template such as ``map_{}_us``) as one column per pair, in order, named by
    the template with the part made an identifier (``map: IOVA`` -> ``map_map_iova_us``), so
    that ``df.query`` takes every column."""
    import pandas as pd

    from dmalab.tidy import slug

    rows = []
    for r in records:
        row: dict[str, Any] = {k: v for k, v in r.items() if k not in parts}
        for field, template in parts.items():
            row.update({template.format(slug(part)): value for part, value in r[field]})
        rows.append(row)
    return pd.DataFrame(rows)
