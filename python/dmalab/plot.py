"""Plots dmalab writes on request (matplotlib is imported only here, when a plot is made)."""

from __future__ import annotations

from pathlib import Path

from dmalab import ScenarioError, _native


def crossover(platform: str, out: str | Path, max_len: int = 65536) -> Path:
    """Write the copy-time curve of `platform` (CPU and copy engine, local and remote) to `out`.

    The file type follows the suffix (``.png`` or ``.svg``). Returns the path written.
    """
    path = Path(out)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ScenarioError(f"--out {out}: the file must end in .png or .svg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = _native.copy_curve(platform, max_len)
    pts = data["points"]
    lengths = [p["len_bytes"] for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (
        ("cpu_local_ns", "CPU copy, memory local", "-"),
        ("cpu_remote_ns", "CPU copy, memory remote", "--"),
        ("engine_local_ns", "engine, in the core's node", "-"),
        ("engine_remote_ns", "engine, in the other node", "--"),
    ):
        ax.plot(lengths, [p[key] for p in pts], style, marker="o", markersize=3, label=label)
    crossovers = (
        (data["crossover_local_bytes"], "local"),
        (data["crossover_remote_bytes"], "remote"),
    )
    for x, label in crossovers:
        if x is not None:
            ax.axvline(x, color="grey", linewidth=0.8, linestyle=":")
            ax.annotate(
                f"{label} crossover {x} B",
                (x, ax.get_ylim()[1]),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("copy length, bytes")
    ax.set_ylabel("time per copy in a stream, ns")
    ax.set_title(f"CPU copy against copy engine: {data['platform']}")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
