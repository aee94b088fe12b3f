"""Optional parts of dmalab that need a package the base install leaves out (plots need
matplotlib, Parquet needs pyarrow): a clear error that names the extra to install when it is
missing, instead of an ImportError from deep inside."""

from __future__ import annotations

import importlib
from types import ModuleType

from dmalab import DmalabError


class MissingExtraError(DmalabError):
    """A feature needs a package that is not installed; the message names the pip extra."""


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` saying that ``purpose`` needs it
    and how to install it (``pip install 'dmalab[extra]'``)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"{purpose} needs the {module} package, which is not installed: "
            f"pip install 'dmalab[{extra}]' (or pip install {module})"
        ) from None
