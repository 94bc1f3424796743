"""worker_io.load_modules: a worker's imports run with the cyclic collector paused, then frozen."""

from __future__ import annotations

import json
import subprocess
import sys

from scalebench.hardware.devices import DeviceInfo
from scalebench.spec import config
from scalebench.tasks import train
from tests.conftest import REPO
from tests.test_allreduce import spec as allreduce_job

# In a child: the frozen objects and the modules loaded are for the life of the process.
PROBE = """
import gc, json, sys
from scalebench.frameworks import worker_io
job = worker_io.parse_job(sys.stdin.read())
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and passes.append(info["generation"]))
worker_io.load_modules(job)
during = len(passes)
gc.collect()
print(json.dumps({"passes_during": during, "enabled": gc.isenabled(),
                  "frozen": gc.get_freeze_count(), "torch": "torch" in sys.modules,
                  "torchvision": "torchvision" in sys.modules}))
"""


def loaded(job_json: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE], input=job_json, capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_train_worker_imports_torch_and_torchvision_without_a_collection_then_freezes():
    sweep = config.build_spec({"frameworks": "ddp", "models": "resnet101", "workers": "2"})
    job = train.plan(sweep, DeviceInfo("cpu", "gloo", 0, 2))[0]
    found = loaded(job.to_json())
    assert found["passes_during"] == 0  # collections would have run hundreds of times
    assert found["enabled"] and found["frozen"] > 100_000, found
    assert found["torch"] and found["torchvision"]


def test_an_allreduce_worker_does_not_import_torchvision():
    found = loaded(allreduce_job().to_json())
    assert found["torch"] and not found["torchvision"] and found["enabled"], found
