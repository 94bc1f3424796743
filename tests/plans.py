"""Views of planned jobs for assertions (no launches)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace


def flat_runs(sweep, device) -> list[SimpleNamespace]:
    """The training plan of a sweep, each job flattened (launch and task fields side by side)."""
    from scalebench.tasks import train

    return [SimpleNamespace(run_id=j.run_id, **j.launch.to_dict(), **dataclasses.asdict(j.task))
            for j in train.plan(sweep, device)]
