"""``dmalab report``: one self-contained HTML page with the claims, a run and the platforms."""

from __future__ import annotations

import argparse

from dmalab import ScenarioError, sim
from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report``."""
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML page: claims, a run with charts, platform sources",
        description=(
            "Write one HTML file that opens anywhere with no network: the published claims "
            "(published beside modelled, fits marked), a run's inputs, metrics, breakdown and "
            "latency distribution as interactive charts, dmalab advise's answer (--advise), and "
            "every parameter of the platforms involved with its source. Needs the report "
            "extra: pip install 'dmalab[report]'."
        ),
    )
    p.add_argument(
        "--out",
        type=options.nonempty,
        default="dmalab-report.html",
        help="the HTML file (default dmalab-report.html), written whole (a temporary file, "
        "then renamed); a file there that is not an HTML page is refused unless --force",
    )
    options.add_force(p, "--out", "an HTML page")
    p.add_argument(
        "--run",
        type=options.nonempty,
        metavar="SCENARIO",
        default="p3-rbtree-deferred",
        help="the scenario whose run the page shows (default p3-rbtree-deferred; 'none' for none)",
    )
    options.add_set(p)
    p.add_argument(
        "--advise",
        nargs=2,
        metavar=("HOST", "WORKLOAD"),
        help="add dmalab advise's answer for HOST (a platform or HOST+DEVICE) and WORKLOAD "
        "(such as nvme:8x4K,qd32 or nic:100G,64B), with its defaults: throughput, any "
        "protection, 16 draws",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="add the validation against the shipped pcie-bench corpus: the summary by host "
        "and experiment (every directory, no intervals) and one chart per experiment of the "
        "four hosts' plain directories, measured over the modelled band (8 draws)",
    )
    p.add_argument(
        "--claims",
        nargs="*",
        metavar="ID",
        default=None,
        help="the claims to include (default every claim; --claims with no id: none)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run what the page shows and write it."""
    from dmalab import files, report
    from dmalab.extras import require

    if not str(args.out).endswith((".html", ".htm")):
        raise ScenarioError(f"--out {args.out}: the file must end in .html")
    options.output_file(args, "out", (files.HTML,), "an HTML page")
    if args.run == "none":
        options.refuse(args, ("set",), "changes the run's scenario; --run none runs none")
    require("plotly", "report", "dmalab report")
    err = options.console(stderr=True)
    claims = None
    if args.claims is None or args.claims:
        known = sim.claim_ids()
        bad = [i for i in args.claims or [] if i not in known]
        if bad:
            raise ScenarioError(f"unknown claim {', '.join(bad)}; known: {', '.join(known)}")
        with err.status("running the claims ..."):
            claims, _ = sim.reproduce(args.claims or None)
    result = None
    if args.run != "none":
        with err.status(f"running {args.run} ..."):
            result = sim.run(args.run, overrides=options.overrides(args.set))
    advice = None
    if args.advise:
        from dmalab import advise

        host, spec = args.advise
        workload = advise.parse_workload(spec)
        with err.status(f"advising {host}, {spec} ..."):
            advice = advise.advise(host, workload)
    validation = None
    if args.validate:
        from dmalab import validate

        dirs = validate.corpus_dirs()
        plain = [d for d in dirs if d.iommu == "off" and d.memory == "local"]
        with err.status("validating against the pcie-bench corpus ..."):
            validation = (validate.run(dirs), validate.run(plain, samples=8))
    path = report.write(args.out, claims, result, advice, validation)
    err.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, opens with no network)")
    return 0
