"""What one Ray Train run asks of a cluster, and whether that cluster can ever hold it.

Pure functions, shared by the adapter (embedded cluster: checked before anything starts) and the
driver (existing cluster: checked against ray.nodes() before fit). Ray itself would wait for
resources that never come; these checks turn that wait into one clear line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scalebench.spec.launch import LaunchSpec

MIB = 1024 * 1024
GIB = 1024 * MIB
OBJECT_STORE_MIN = 256 * MIB  # Ray refuses less than 75 MiB; runs move only specs and results
OBJECT_STORE_MAX = 2 * GIB
_EPS = 1e-9


def per_worker(launch: LaunchSpec) -> dict[str, float]:
    """One CPU per worker (threads are set separately), plus one GPU on CUDA runs."""
    request = {"CPU": 1.0}
    if launch.device == "cuda":
        request["GPU"] = 1.0
    return request


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def amount(name: str, value: float) -> str:
    """'1 CPU', '2 CPUs', '0.5 GPU'."""
    plural = "s" if value != 1 and name.isupper() else ""
    return f"{_count(value)} {name}{plural}"


def describe(request: Mapping[str, float]) -> str:
    return " + ".join(amount(name, value) for name, value in request.items())


def check_fits(nodes: Iterable[Mapping[str, float]], workers: int, request: Mapping[str, float],
               placement: str = "PACK") -> str | None:
    """None when `workers` bundles of `request` fit the nodes under `placement`, else the reason.

    Every bundle is the same, so per-node capacity (how many bundles a node holds) decides it
    exactly: PACK/SPREAD need the capacities to sum to `workers`, STRICT_PACK one node holding
    all, STRICT_SPREAD `workers` nodes holding one each.
    """
    nodes = list(nodes)
    head = f"{workers} worker{'s' if workers != 1 else ''} x {describe(request)} requested"
    totals = {name: sum(float(n.get(name, 0.0)) for n in nodes) for name in request}
    short = [name for name, need in request.items() if workers * need > totals[name] + _EPS]
    if short:
        return f"{head}, cluster has {', '.join(amount(n, totals[n]) for n in short)}"
    wanted = {name: need for name, need in request.items() if need > 0}
    capacity = [min((int(float(node.get(name, 0.0)) / need + _EPS) for name, need in wanted.items()),
                    default=workers)
                for node in nodes]
    if placement == "STRICT_PACK" and max(capacity, default=0) < workers:
        return (f"{head} on one node (STRICT_PACK), the largest node holds "
                f"{max(capacity, default=0)}")
    if placement == "STRICT_SPREAD":
        holding = sum(1 for c in capacity if c >= 1)
        if holding < workers:
            return f"{head} on separate nodes (STRICT_SPREAD), cluster has {holding} such nodes"
    if sum(capacity) < workers:
        return (f"{head}, the cluster's {len(nodes)} nodes hold only {sum(capacity)} "
                "(no node has room for a whole worker)")
    return None


def object_store_bytes(total_memory: int, shm_free: int | None) -> int:
    """Object store of the embedded cluster: small, runs move only a spec and a result.

    5% of RAM within 256 MiB..2 GiB, and at most half of what /dev/shm has free (Ray falls back
    to a slow /tmp store, with a warning, when /dev/shm is too small).
    """
    size = min(OBJECT_STORE_MAX, max(OBJECT_STORE_MIN, total_memory // 20))
    if shm_free:
        size = min(size, max(100 * MIB, shm_free // 2))
    return int(size)
