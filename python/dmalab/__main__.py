"""``python -m dmalab``: the same as the ``dmalab`` command."""

from dmalab.cli import main

raise SystemExit(main())
