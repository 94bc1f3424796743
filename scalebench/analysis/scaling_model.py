"""Compute/communication scaling model: bounds on efficiency at N workers and a verdict.

One data-parallel step at N workers = the one-worker compute + a ring allreduce of the
gradients. Two bounds (docs/scaling-model.md):

    no overlap     step = compute + allreduce
    full overlap   step = forward + max(backward, allreduce)

    compute        the one-worker step time (batch / one-worker images/s); per-worker work is the
                   same at N under weak scaling. For a device not measured (FromFlops):
                   batch x counted FLOPs per image / (peak FLOP/s x MFU)
    forward        compute / (1 + r), backward = compute x r / (1 + r), r = backward:forward = 2
                   (backward computes gradients for activations and for weights, about twice
                   the forward's work); the optimizer update is counted in the forward part
    allreduce      messages x 2(N-1) x step_latency + 2(N-1)/N x gradient bytes / bandwidth
                   (ring: 2(N-1) steps, each moving 1/N of the message over every link);
                   bandwidth is the bus bandwidth of nccl-tests (link speed, bytes/s);
                   messages = ceil(gradient bytes / fusion buffer or bucket)
    efficiency     compute / step (= throughput(N) / (N x throughput(1)))

Everything here is pure: no launches, no I/O. UserError for bad user input (exit code 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scalebench import frameworks
from scalebench.analysis import aggregate
from scalebench.analysis.stats import noisy_text
from scalebench.models import workloads
from scalebench.spec.errors import UserError
from scalebench.spec.units import format_bandwidth

BACKWARD_TO_FORWARD = 2.0
DEFAULT_STEP_LATENCY = 5e-6  # seconds per ring step; NCCL's own tuning model uses ~3-10 us
FP32_BYTES, FP16_BYTES = 4, 2
MIB = 2**20
# Measured rows take their message size from the framework and the run's options
# (frameworks.bucket_bytes: Horovod's fusion buffer, DDP's buckets). predict's default is the
# fusion buffer of Horovod's published tables (64 MiB, before 0.21 raised it to 128 MiB).
DEFAULT_BUCKET_BYTES = 64 * MIB

BELOW, COMM, COMPUTE, ABOVE, NOT_MODELLED = (
    "below-model", "communication-bound", "compute-bound", "above-model", "not-modelled")


# ---------------------------------------------------------------- the model

@dataclass(frozen=True)
class Link:
    """What the allreduce runs over: bus bandwidth (bytes/s) and the latency of one ring step."""

    bandwidth: float
    step_latency: float = DEFAULT_STEP_LATENCY
    source: str = "given"

    def __post_init__(self):
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"bandwidth must be a positive number, not {self.bandwidth}")
        if not (math.isfinite(self.step_latency) and self.step_latency >= 0):
            raise ValueError(f"step_latency must be >= 0, not {self.step_latency}")

    def describe(self) -> str:
        return (f"{format_bandwidth(self.bandwidth)}, {self.step_latency * 1e6:.3g} us per ring "
                f"step ({self.source})")


def ring_factor(workers: int) -> float:
    """2(N-1)/N: the share of a message that crosses every link in a ring allreduce."""
    return 2 * (workers - 1) / workers


def message_count(grad_bytes: float, bucket_bytes: float) -> int:
    return math.ceil(grad_bytes / bucket_bytes) if grad_bytes > 0 else 0


def gradient_bytes(params: int, fp16_allreduce: bool = False) -> int:
    """fp32 gradients (4 bytes per parameter), 2 bytes when compressed to fp16 for the allreduce."""
    return params * (FP16_BYTES if fp16_allreduce else FP32_BYTES)


@dataclass(frozen=True)
class Bounds:
    workers: int
    grad_bytes: float
    messages: int
    compute_seconds: float
    forward_seconds: float
    backward_seconds: float
    allreduce_bandwidth_seconds: float
    allreduce_latency_seconds: float

    @property
    def allreduce_seconds(self) -> float:
        return self.allreduce_bandwidth_seconds + self.allreduce_latency_seconds

    @property
    def step_no_overlap(self) -> float:
        return self.compute_seconds + self.allreduce_seconds

    @property
    def step_full_overlap(self) -> float:
        return self.forward_seconds + max(self.backward_seconds, self.allreduce_seconds)

    @property
    def efficiency_no_overlap(self) -> float:
        return self.compute_seconds / self.step_no_overlap

    @property
    def efficiency_full_overlap(self) -> float:
        return self.compute_seconds / self.step_full_overlap

    @property
    def limit(self) -> str:
        """What sets the full-overlap bound: compute, or an allreduce longer than the backward."""
        return "communication" if self.allreduce_seconds > self.backward_seconds else "compute"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("allreduce_seconds", "step_no_overlap", "step_full_overlap",
                     "efficiency_no_overlap", "efficiency_full_overlap", "limit"):
            out[name] = getattr(self, name)
        return out


def bounds(compute_seconds: float, grad_bytes: float, workers: int, link: Link, *,
           backward_to_forward: float = BACKWARD_TO_FORWARD,
           bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> Bounds:
    """The no-overlap and full-overlap step times at `workers` (see the module docstring)."""
    if compute_seconds <= 0 or workers < 1 or grad_bytes < 0 or backward_to_forward <= 0 \
            or bucket_bytes <= 0:
        raise ValueError("bounds needs compute_seconds > 0, workers >= 1, grad_bytes >= 0, "
                         "backward_to_forward > 0 and bucket_bytes > 0")
    messages = message_count(grad_bytes, bucket_bytes) if workers > 1 else 0
    return Bounds(
        workers=workers, grad_bytes=grad_bytes, messages=messages,
        compute_seconds=compute_seconds,
        forward_seconds=compute_seconds / (1 + backward_to_forward),
        backward_seconds=compute_seconds * backward_to_forward / (1 + backward_to_forward),
        allreduce_bandwidth_seconds=ring_factor(workers) * grad_bytes / link.bandwidth,
        allreduce_latency_seconds=messages * 2 * (workers - 1) * link.step_latency,
    )


@dataclass(frozen=True)
class Verdict:
    code: str  # BELOW | COMM | COMPUTE | ABOVE
    text: str
    hidden_seconds: float | None = None  # allreduce time the measurement implies was overlapped
    hidden_fraction: float | None = None  # of the modelled allreduce


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def judge(b: Bounds, measured: float, ci_low: float | None = None, ci_high: float | None = None
          ) -> Verdict:
    """Where a measured efficiency lies against the bounds, and the bottleneck in words.

    The 95% interval decides "outside": below only if even its upper end is below the
    no-overlap bound, above only if its lower end is above the full-overlap bound.
    """
    lo, hi = b.efficiency_no_overlap, b.efficiency_full_overlap
    top = ci_high if ci_high is not None else measured
    bottom = ci_low if ci_low is not None else measured
    if top < lo:
        return Verdict(BELOW, (
            f"below the no-overlap bound ({lo:.0%}): time is lost outside compute and allreduce "
            "- stragglers (see per-rank throughput), data loading, compute slower at N than "
            "alone (shared cores or memory bandwidth, fewer threads per worker), framework "
            "overhead, or a link slower than assumed"))
    if bottom > hi:
        return Verdict(ABOVE, (
            f"above the full-overlap bound ({hi:.0%}): faster than the model allows - the link "
            "is faster than assumed (workers on one node exchange through shared memory, "
            "NVLink or PCIe, not the network), or the one-worker run was slowed down"))
    step = b.compute_seconds / measured
    hidden = min(max(b.step_no_overlap - step, 0.0), b.allreduce_seconds)
    fraction = hidden / b.allreduce_seconds if b.allreduce_seconds > 0 else None
    share = f"about {fraction:.0%} of it overlapped" if fraction is not None else "none to hide"
    if b.limit == "communication":
        exposed = b.allreduce_seconds - b.backward_seconds
        return Verdict(COMM, (
            f"communication-bound: the allreduce ({_ms(b.allreduce_seconds)}) takes longer than "
            f"the backward pass ({_ms(b.backward_seconds)}), so even full overlap leaves "
            f"{_ms(exposed)} exposed; {share}. More bandwidth or fewer gradient bytes (fp16 "
            "compression) would help"), hidden, fraction)
    return Verdict(COMPUTE, (
        f"compute-bound: the allreduce ({_ms(b.allreduce_seconds)}) fits inside the backward "
        f"pass ({_ms(b.backward_seconds)}); {share}, so better overlap could gain up to "
        f"{max(hi - measured, 0.0) * 100:.0f} points"), hidden, fraction)


# ---------------------------------------------------------------- extrapolation (predict)

def model_params(model: str, params: int | None = None) -> tuple[int, str]:
    if model not in workloads.MODELS:
        raise UserError(f"model: unknown model {model!r}; allowed: {', '.join(workloads.MODELS)}")
    if params is not None:
        if params < 1:
            raise UserError(f"params: expected an integer >= 1, got {params}")
        return params, "given"
    info = workloads.get_info(model)
    aux = workloads.uses_aux_logits(model, info.native_image_size)
    note = " with the aux head" if info.params_without_aux is not None and aux else ""
    return info.param_count(aux), f"torchvision {model}{note}"


@dataclass(frozen=True)
class FromFlops:
    """A compute term from FLOPs for a device not measured (predict --peak-flops): one step of
    `batch` images takes batch x flops_per_image / (peak_flops x mfu) seconds."""

    flops_per_image: float  # counted (scalebench/flops.py)
    peak_flops: float  # FLOP/s of one worker's device
    mfu: float  # the share of the peak the step reaches
    flops_source: str = "counted"

    def images_per_sec(self) -> float:
        return self.peak_flops * self.mfu / self.flops_per_image


def predict(model: str, workers: int, bandwidth: float, images_per_sec_one: float | None,
            batch_size: int, *, step_latency: float = DEFAULT_STEP_LATENCY,
            bucket_bytes: float = DEFAULT_BUCKET_BYTES, fp16_allreduce: bool = False,
            backward_to_forward: float = BACKWARD_TO_FORWARD, params: int | None = None,
            measured_efficiency: float | None = None, from_flops: FromFlops | None = None
            ) -> dict[str, Any]:
    """Bounds on efficiency at `workers` from one worker's throughput, or (from_flops) from the
    model's FLOPs, a device's peak and an MFU; nothing is run."""
    count, params_source = model_params(model, params)
    if (images_per_sec_one is None) == (from_flops is None):
        raise UserError("images_per_sec_one: give one worker's measured throughput "
                        "(--images-per-sec-one) or a device's peak (--peak-flops with --mfu), "
                        "one of the two")
    if from_flops is not None:
        if not 0 < from_flops.mfu <= 1:
            raise UserError(f"mfu: expected a fraction above 0 and at most 1, e.g. 0.35, got "
                            f"{from_flops.mfu:g}")
        if not from_flops.peak_flops > 0:
            raise UserError("peak_flops: must be above 0")
        images_per_sec_one = from_flops.images_per_sec()
    checks = (("workers", workers >= 1, "an integer >= 1"),
              ("bandwidth", bandwidth > 0, "above 0"),
              ("images_per_sec_one", images_per_sec_one > 0, "above 0"),
              ("batch_size", batch_size >= 1, "an integer >= 1"),
              ("latency", step_latency >= 0, "0 or more"),
              ("bucket", bucket_bytes > 0, "above 0"),
              ("backward_ratio", backward_to_forward > 0, "above 0"))
    for name, ok, expected in checks:
        if not ok:
            raise UserError(f"{name}: must be {expected}")
    if measured_efficiency is not None and not 0 < measured_efficiency <= 1.5:
        raise UserError(f"measured_efficiency: expected a fraction, e.g. 0.68, got "
                        f"{measured_efficiency:g}")
    link = Link(bandwidth, step_latency, "given")
    grad = gradient_bytes(count, fp16_allreduce)
    compute = batch_size / images_per_sec_one
    b = bounds(compute, grad, workers, link, backward_to_forward=backward_to_forward,
               bucket_bytes=bucket_bytes)
    out: dict[str, Any] = {
        "model": model, "workers": workers, "batch_size": batch_size,
        "images_per_sec_one": images_per_sec_one, "bandwidth_bytes_per_sec": bandwidth,
        "step_latency_seconds": step_latency, "bucket_bytes": bucket_bytes,
        "fp16_allreduce": fp16_allreduce, "backward_to_forward": backward_to_forward,
        "params": count, "params_source": params_source,
        "bytes_per_param": FP16_BYTES if fp16_allreduce else FP32_BYTES,
        "grad_bytes": grad, "messages": b.messages,
        "step_seconds_one": compute, "forward_seconds": b.forward_seconds,
        "backward_seconds": b.backward_seconds,
        "allreduce_seconds": b.allreduce_seconds,
        "allreduce_bandwidth_seconds": b.allreduce_bandwidth_seconds,
        "allreduce_latency_seconds": b.allreduce_latency_seconds,
        "step_seconds_no_overlap": b.step_no_overlap,
        "step_seconds_full_overlap": b.step_full_overlap,
        "efficiency_no_overlap": b.efficiency_no_overlap,
        "efficiency_full_overlap": b.efficiency_full_overlap,
        "images_per_sec_no_overlap": workers * batch_size / b.step_no_overlap,
        "images_per_sec_full_overlap": workers * batch_size / b.step_full_overlap,
        "limit": b.limit,
        "compute_source": "measured" if from_flops is None else "flops",
    }
    if from_flops is not None:
        out.update(flops_per_image=from_flops.flops_per_image,
                   flops_source=from_flops.flops_source, peak_flops=from_flops.peak_flops,
                   mfu=from_flops.mfu)
    if measured_efficiency is not None:
        verdict = judge(b, measured_efficiency)
        out.update(measured_efficiency=measured_efficiency, verdict=verdict.code,
                   verdict_text=verdict.text, hidden_fraction=verdict.hidden_fraction)
    return out


# ---------------------------------------------------------------- links from the microbenchmark

def fit_link(points: Sequence[tuple[int, float]], workers: int, source: str = "measured") -> Link:
    """Weighted least-squares fit of seconds = latency + 2(N-1)/N x bytes / bandwidth over
    message sizes, each point weighted by 1/seconds^2 (its relative error counts).

    Unweighted, the largest messages' noise (a few percent of a long call) swamps the
    intercept; weighted, the small sizes, whose time is mostly latency, set it. The intercept is
    one call's latency, split over the 2(N-1) ring steps. With one size (or a fit that makes no
    sense) the bus bandwidth of the largest size is used with zero latency, which folds the
    latency into a lower bandwidth.
    """
    if workers < 2 or not points:
        raise ValueError("a link needs points measured with at least 2 workers")
    factor = ring_factor(workers)
    sizes = [float(s) for s, _ in points]
    times = [float(t) for _, t in points]
    if len(set(sizes)) >= 2 and all(t > 0 for t in times):
        weights = [1 / t**2 for t in times]
        total = sum(weights)
        mean_s = sum(w * s for w, s in zip(weights, sizes, strict=True)) / total
        mean_t = sum(w * t for w, t in zip(weights, times, strict=True)) / total
        sxx = sum(w * (s - mean_s) ** 2 for w, s in zip(weights, sizes, strict=True))
        slope = sum(w * (s - mean_s) * (t - mean_t)
                    for w, s, t in zip(weights, sizes, times, strict=True)) / sxx
        intercept = mean_t - slope * mean_s
        if slope > 0:
            return Link(factor / slope, max(intercept, 0.0) / (2 * (workers - 1)),
                        f"{source}, fit over {len(set(sizes))} sizes")
    size, seconds = max(points)
    return Link(factor * size / seconds, 0.0, f"{source}, busbw at {size} bytes")


LinkKey = tuple[str, str, int, int]  # framework, device, world size, nodes


def links_from_allreduce(records: Sequence[dict]) -> dict[LinkKey, Link]:
    """One fitted Link per framework x device x workers x nodes from the newest ok points."""
    groups: dict[LinkKey, list[tuple[int, float]]] = {}
    for r in aggregate.latest_allreduce_points(records):
        key = (r["framework"], r["device"], r["world_size"], r["nodes"])
        groups.setdefault(key, []).append((r["size_bytes"], r["seconds"]))
    return {key: fit_link(points, key[2], f"{key[0]} allreduce, {key[2]} workers")
            for key, points in groups.items()}


def link_chooser(links: Mapping[LinkKey, Link]) -> Callable[[dict], Link | None]:
    """A row's link: measured at its own worker count and nodes, else the same framework and
    device on the same number of nodes at the nearest worker count, else on another number of
    nodes (a link inside one node is not the network between nodes), said in the link's source;
    else None."""
    def choose(row: dict) -> Link | None:
        key = (row["framework"], row["device"], row["world_size"], row["nodes"])
        if key in links:
            return links[key]
        near = [k for k in links if k[:2] == key[:2]]
        if not near:
            return None
        best = min(near, key=lambda k: (k[3] != key[3], abs(math.log(k[2] / key[2])), -k[2]))
        link = links[best]
        nodes = "" if best[3] == key[3] else \
            f"; measured on {best[3]} node{'s' if best[3] != 1 else ''}, not {key[3]}"
        return Link(link.bandwidth, link.step_latency,
                    f"{link.source}; nearest to {key[2]} workers{nodes}")
    return choose


# ---------------------------------------------------------------- measured runs (report)

def model_rows(rows: Sequence[dict], link: Link | float | Callable[[dict], Link | None], *,
               backward_to_forward: float = BACKWARD_TO_FORWARD,
               bucket_bytes: float | None = None) -> list[dict]:
    """Bounds and verdict for each multi-worker row of aggregate.summary_rows.

    link: a Link, a bus bandwidth in bytes/s (with the default step latency), or a function
    row -> Link or None (e.g. link_chooser(links_from_allreduce(records))). The one-worker
    throughput is the row's own baseline (baseline_images_per_sec; for a row without it,
    images_per_sec / (N x efficiency)); the verdict reads the row's efficiency and its paired
    interval (aggregate.summary_rows) as they are; per-worker
    compute is batch_size / that, so strong-scaling rows get their smaller per-worker batch.
    Gradients are fp32 unless the row's options say fp16_allreduce (Horovod's compression);
    messages are the framework's buckets under the row's options (frameworks.bucket_bytes)
    unless bucket_bytes is given. Rows that cannot be modelled come back with verdict
    NOT_MODELLED and the reason.
    """
    if isinstance(link, (int, float)):
        link = Link(float(link), DEFAULT_STEP_LATENCY, "given")
    choose = link if callable(link) and not isinstance(link, Link) else (lambda row: link)
    out = []
    for row in rows:
        workers = row["world_size"]
        if workers < 2:
            continue
        entry: dict[str, Any] = {
            **{k: row.get(k) for k in ("model", "framework", "precision", "world_size", "nodes",
                                       "batch_size", "device", "scaling", "options",
                                       "step_label")},
            "efficiency": row.get("efficiency"),
            "efficiency_ci95_low": row.get("efficiency_ci95_low"),
            "efficiency_ci95_high": row.get("efficiency_ci95_high"),
            "efficiency_ci95_too_noisy": row.get("efficiency_ci95_too_noisy") or "",
        }
        reason = None
        chosen = choose(row)
        if row.get("efficiency") is None or not row.get("images_per_sec"):
            reason = "no one-worker run of this framework to compare with"
        elif row["model"] not in workloads.MODELS:
            reason = f"unknown model {row['model']!r}: no parameter count"
        elif entry["efficiency_ci95_too_noisy"]:
            reason = (f"efficiency {noisy_text(entry['efficiency_ci95_too_noisy'])}: not "
                      "judged against the model's bounds")
        elif chosen is None:
            reason = (f"no allreduce measurement for {row['framework']} on {row['device']}; "
                      "run `scalebench allreduce` or give a bandwidth")
        if reason is not None:
            out.append({**entry, "verdict": NOT_MODELLED, "verdict_text": reason})
            continue
        info = workloads.get_info(row["model"])
        params = info.param_count(workloads.uses_aux_logits(row["model"], row["image_size"]))
        base = row.get("baseline_images_per_sec") or \
            row["images_per_sec"] / (workers * row["efficiency"])
        options = row.get("options") or {}
        fp16 = bool(options.get("fp16_allreduce", row.get("fp16_allreduce")))
        bucket = (bucket_bytes or frameworks.bucket_bytes(row["framework"], options)
                  or DEFAULT_BUCKET_BYTES)
        b = bounds(row["batch_size"] / base, gradient_bytes(params, fp16), workers, chosen,
                   backward_to_forward=backward_to_forward, bucket_bytes=bucket)
        verdict = judge(b, row["efficiency"], row.get("efficiency_ci95_low"),
                        row.get("efficiency_ci95_high"))
        out.append({
            **entry, "params": params, "fp16_allreduce": fp16, "bucket_bytes": bucket,
            **b.as_dict(),
            "link_bandwidth": chosen.bandwidth, "link_step_latency": chosen.step_latency,
            "link_source": chosen.source,
            "verdict": verdict.code, "verdict_text": verdict.text,
            "hidden_fraction": verdict.hidden_fraction,
        })
    return out


def report_rows(records: Sequence[dict], link: Link | None = None) -> list[dict]:
    """model_rows for a results file: the given link, else the allreduce points among records."""
    rows = aggregate.summary_rows(list(records))
    if link is None:
        return model_rows(rows, link_chooser(links_from_allreduce(records)))
    return model_rows(rows, link)
