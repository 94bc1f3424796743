"""Expand a SweepSpec into RunSpecs, checking every run's input before anything launches."""

from __future__ import annotations

import dataclasses

from scalebench import devices, workloads
from scalebench.config import RunSpec, SweepSpec
from scalebench.errors import UserError


def default_workers(maximum: int, nnodes: int = 1) -> tuple[int, ...]:
    """1, 2, 4, ... up to the GPUs (or cores) of one node, times the node count."""
    counts, n = [], 1
    while n <= max(1, maximum):
        counts.append(n * nnodes)
        n *= 2
    return tuple(counts)


def framework_options(sweep: SweepSpec, framework: str) -> dict:
    return dataclasses.asdict(getattr(sweep, framework))


def expand(sweep: SweepSpec, device: devices.DeviceInfo) -> list[RunSpec]:
    from scalebench import frameworks

    for precision in sweep.precision:
        devices.check_precision(device, precision)
    workers = sweep.workers or default_workers(device.default_max_workers(), sweep.ddp.nnodes)
    runs: list[RunSpec] = []
    for model in sweep.models:
        info = workloads.get_info(model)
        image_size = sweep.image_size or info.native_image_size
        for framework in sweep.frameworks:
            adapter = frameworks.get(framework)
            for precision in sweep.precision:
                for world in workers:
                    if sweep.scaling == "strong":
                        if sweep.batch_size % world:
                            raise UserError(
                                f"batch_size: strong scaling splits the global batch "
                                f"{sweep.batch_size} over {world} workers; it must divide evenly"
                            )
                        per_worker = sweep.batch_size // world
                    else:
                        per_worker = sweep.batch_size
                    workloads.check_input(model, image_size, per_worker)
                    nodes = adapter.planned_nodes(sweep, world)
                    aux = workloads.uses_aux_logits(model, image_size)
                    runs.append(RunSpec(
                        run_id=f"{len(runs) + 1:03d}-{framework}-{model}-w{world}-{precision}",
                        framework=framework, model=model, world_size=world, nodes=nodes,
                        batch_size=per_worker, global_batch=per_worker * world,
                        image_size=image_size, aux_logits=aux, precision=precision,
                        device=device.device, backend=device.backend, scaling=sweep.scaling,
                        data=sweep.data, warmup=sweep.warmup, iters=sweep.iters,
                        trials=sweep.trials, timeout=sweep.timeout,
                        threads_per_worker=devices.threads_per_worker(
                            device, -(-world // nodes), sweep.threads_per_worker),
                        loader_workers=sweep.loader_workers,
                        params=info.param_count(aux),
                        options=framework_options(sweep, framework),
                    ))
    return runs
