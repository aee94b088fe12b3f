"""Shared test set-up: outputs carry their creation date in their provenance; fixing it
(``SOURCE_DATE_EPOCH``, as reproducible builds do) lets a test compare two outputs byte for
byte. Tests of the date itself unset it."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fixed_creation_date(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764115200")
