"""Files written whole or not at all: a reader in another process (the sweep polling a run's
folder, a concurrent sweep reading a cache) sees the old file or the new one, never half."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str) -> None:
    """Write to a hidden temp file beside `path` (named by this process, so concurrent writers
    never share one; never matching the real file's suffix, so globs skip it), then rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, data: Any, **dumps: Any) -> None:
    write_text(path, json.dumps(data, **dumps))
