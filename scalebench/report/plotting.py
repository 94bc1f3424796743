"""What every report figure shares: the headless backend, a grid of panels, saving.

Matplotlib is imported when the first figure is drawn, not with this module: every command of
the CLI imports the report's modules, and pyplot alone took most of a second of each start."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

PANELS_PER_ROW = 3


def pyplot():
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panels(count: int, width: float, height: float, per_row: int = PANELS_PER_ROW):
    """A figure with `count` visible panels of width x height inches, `per_row` to a row."""
    cols = min(count, per_row)
    lines = math.ceil(count / cols)
    fig, axes = pyplot().subplots(lines, cols, figsize=(width * cols, height * lines), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[count:]:
        ax.set_visible(False)
    return fig, flat[:count]


def title(text: str, width: int = 45) -> str:
    return "\n".join(textwrap.wrap(text, width))


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes (for self-contained pages), closed afterwards."""
    import io

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    pyplot().close(fig)
    return buffer.getvalue()


def write_pages(out_dir: Path, stem: str, pngs: dict[str, bytes], markdown, html) -> list[Path]:
    """STEM.md with its figures beside it as STEM-NAME.png, and the self-contained STEM.html
    (figures inline): markdown(names: figure -> file name) and html(pngs) render the pages."""
    import re

    names = {}
    for name, png in pngs.items():
        path = out_dir / (f"{stem}-" + re.sub(r"[^A-Za-z0-9_.-]", "-", name) + ".png")
        path.write_bytes(png)
        names[name] = path.name
    md, page = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md.write_text(markdown(names))
    page.write_text(html(pngs))
    return [md, page, *(out_dir / n for n in names.values())]


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot().close(fig)
    return path
