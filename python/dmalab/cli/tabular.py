"""Records as CSV rows: nested fields flattened to ``outer_inner`` columns, ``(part, value)``
lists to one column per part, and the provenance of each row (see :mod:`dmalab.provenance`)."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from typing import IO, Any

from dmalab.provenance import platform_part, platform_sha256, provenance
from dmalab.tidy import slug


def _is_pairs(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(p, list | tuple) and len(p) == 2 and isinstance(p[0], str) for p in value
        )
    )


def flatten(record: Any, prefix: str = "") -> dict[str, Any]:  # noqa: ANN401 - any JSON value
    """One flat row of ``record``: a nested mapping's keys joined by ``_``, a list of ``(part,
    value)`` pairs as one column per part, any other list as its JSON text; keys made
    identifiers (:func:`dmalab.tidy.slug`). A value that is not a mapping is the column
    ``value`` (or ``prefix``)."""
    if not isinstance(record, Mapping):
        return {prefix or "value": record}
    row: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}_{slug(str(key))}" if prefix else slug(str(key))
        if isinstance(value, Mapping):
            row.update(flatten(value, name))
        elif _is_pairs(value):
            row.update({f"{name}_{slug(part)}": v for part, v in value})
        elif isinstance(value, list):
            row[name] = json.dumps(value)
        else:
            row[name] = value
    return row


class Stamps:
    """The provenance a command's records carry, computed once; a record naming its own
    platform (and choices) is hashed on that one."""

    def __init__(
        self,
        platform: str | None,
        choices: Mapping[str, str] | None,
        command: list[str] | None = None,
    ) -> None:
        self.platform = platform
        self.choices = dict(choices or {})
        self.base = provenance(command=["dmalab", *(command or [])] if command else None)

    def _platform(self, record: Any) -> tuple[str | None, dict[str, str]]:  # noqa: ANN401
        if isinstance(record, Mapping) and isinstance(record.get("platform"), str):
            picks = record.get("choices")
            return record["platform"], dict(picks) if isinstance(picks, Mapping) else {}
        return self.platform, self.choices

    def full(self, record: Any) -> dict[str, Any]:  # noqa: ANN401 - any JSON value
        """The provenance object a JSON record carries."""
        name, picks = self._platform(record)
        return dict(self.base) if name is None else self.base | platform_part(name, picks)

    def columns(self, record: Any) -> dict[str, Any]:  # noqa: ANN401 - any JSON value
        """The provenance columns a CSV row ends with."""
        name, picks = self._platform(record)
        return {
            "dmalab_version": self.base["dmalab_version"],
            "created_utc": self.base["created_utc"],
            "platform_sha256": None if name is None else platform_sha256(name, picks),
        }


PROVENANCE_COLUMNS = ("dmalab_version", "created_utc", "platform_sha256")
"""The columns :meth:`Stamps.columns` adds, which a CSV keeps last."""


def _columns(rows: list[dict[str, Any]], last: tuple[str, ...]) -> list[str]:
    """Every column any row has, in the order first seen, but those of ``last`` at the end."""
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(k for k in r if k not in last))
    columns.update(dict.fromkeys(k for k in last if any(k in r for r in rows)))
    return list(columns)


def write_parquet(rows: list[dict[str, Any]], out: IO[bytes], last: tuple[str, ...] = ()) -> None:
    """``rows`` as one Parquet table (the columns of :func:`write_csv`), written to ``out``,
    which must not be a terminal. Needs pyarrow (``pip install 'dmalab[parquet]'``)."""
    import pandas as pd

    from dmalab import ScenarioError
    from dmalab.extras import require

    require("pyarrow", "parquet", "--format parquet")
    if out.isatty():
        raise ScenarioError("--format parquet writes binary: send it to a file (> FILE.parquet)")
    frame = pd.DataFrame(rows, columns=_columns(rows, last))
    for col in frame.columns:
        kinds = {type(v) for v in frame[col] if v is not None and v == v}
        if len(kinds) > 1 and not kinds <= {int, float}:
            # A column of several kinds (a parameter's value: a number or a name) as text,
            # which is what Parquet's one type per column asks.
            frame[col] = [None if v is None else str(v) for v in frame[col]]
    frame.to_parquet(out, index=False)


def write_csv(rows: list[dict[str, Any]], out: IO[str], last: tuple[str, ...] = ()) -> None:
    """``rows`` as CSV with a header: every column any row has, in the order first seen but
    those of ``last`` at the end; a missing value is empty, None is empty, a bool is
    ``true``/``false``."""
    columns = _columns(rows, last)
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])


def _cell(v: object) -> object:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v
