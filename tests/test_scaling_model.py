"""The scaling model: units, hand-computed bounds, verdicts, the published table, predict's CLI."""

from __future__ import annotations

import json
import math

import pytest

from scalebench import cli
from scalebench.analysis import aggregate
from scalebench.analysis import scaling_model as sm
from scalebench.spec import units
from scalebench.spec.errors import UserError

GBIT25 = 25e9 / 8


# ---------------------------------------------------------------- units

@pytest.mark.parametrize("text, expected", [
    ("25Gbit", 3.125e9), ("25Gbps", 3.125e9), ("25Gb/s", 3.125e9), ("25 Gbit/s", 3.125e9),
    ("3.1GB/s", 3.1e9), ("3.1GBps", 3.1e9), ("100MB/s", 1e8),
    ("1GiB/s", 2.0**30), ("10Gibit", 10 * 2.0**30 / 8), ("800kbit", 1e5), ("1e3B/s", 1e3),
    ("1TB/s", 1e12),
])
def test_bandwidth_units(text, expected):
    assert units.parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, message", [
    ("0Gbit", "must be above 0"), ("25", "has no unit"), ("25Gbat", "unknown unit"),
    ("25XB/s", "unknown unit"), ("fast", "cannot read"), ("-3GB/s", "cannot read"),
    ("25/s", "unknown unit"),
    # a lowercase prefix with a lowercase b says neither bits nor bytes
    ("100mb/s", "'mb/s' is ambiguous; write Mbit/s for bits or MB/s for bytes"),
])
def test_bandwidth_errors(text, message):
    with pytest.raises(UserError, match=message):
        units.parse_bandwidth(text)


@pytest.mark.parametrize("text, expected", [("5us", 5e-6), ("5µs", 5e-6), ("0.01ms", 1e-5),
                                            ("0", 0.0), ("2e-6s", 2e-6), ("100ns", 1e-7)])
def test_durations(text, expected):
    assert units.parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["5", "5 parsecs", "-1us", ""])
def test_duration_errors(text):
    with pytest.raises(UserError, match="latency"):
        units.parse_duration(text)


# ---------------------------------------------------------------- bounds by hand

def test_bounds_by_hand_no_latency():
    # 4 workers, 1 GB/s, 300 MB of gradients: ring moves 2*3/4 * 300 MB = 450 MB -> 0.45 s.
    b = sm.bounds(0.9, 300e6, 4, sm.Link(1e9, 0.0), bucket_bytes=1e9)
    assert b.forward_seconds == pytest.approx(0.3)
    assert b.backward_seconds == pytest.approx(0.6)
    assert b.allreduce_seconds == pytest.approx(0.45)
    assert b.efficiency_no_overlap == pytest.approx(0.9 / 1.35)
    assert b.efficiency_full_overlap == pytest.approx(1.0)  # 0.45 s hides inside 0.6 s
    assert b.limit == "compute"


def test_bounds_by_hand_with_latency_and_messages():
    # 250 MB in 100 MB buckets -> 3 messages; each waits 2(N-1) = 6 steps of 10 us.
    b = sm.bounds(0.3, 250e6, 4, sm.Link(0.5e9, 10e-6), bucket_bytes=100e6)
    assert b.messages == 3
    assert b.allreduce_latency_seconds == pytest.approx(3 * 6 * 10e-6)
    assert b.allreduce_bandwidth_seconds == pytest.approx(1.5 * 250e6 / 0.5e9)
    a = 0.75 + 180e-6
    assert b.step_no_overlap == pytest.approx(0.3 + a)
    assert b.step_full_overlap == pytest.approx(0.1 + a)  # allreduce > backward (0.2 s)
    assert b.limit == "communication"


def test_one_worker_has_no_communication():
    b = sm.bounds(0.5, 1e9, 1, sm.Link(1e9))
    assert (b.allreduce_seconds, b.efficiency_no_overlap, b.efficiency_full_overlap) == (0, 1, 1)


def test_backward_ratio_moves_only_the_upper_bound():
    link = sm.Link(1e9, 0.0)
    r1 = sm.bounds(1.0, 1e9, 8, link, backward_to_forward=1.0)
    r3 = sm.bounds(1.0, 1e9, 8, link, backward_to_forward=3.0)
    assert r1.efficiency_no_overlap == r3.efficiency_no_overlap
    assert r1.step_full_overlap == pytest.approx(0.5 + 1.75)
    assert r3.step_full_overlap == pytest.approx(0.25 + 1.75)


def test_fp16_compression_halves_the_bytes():
    assert sm.gradient_bytes(10) == 40 and sm.gradient_bytes(10, fp16_allreduce=True) == 20


# ---------------------------------------------------------------- verdicts

BOUNDS = sm.bounds(0.9, 300e6, 4, sm.Link(1e9, 0.0), bucket_bytes=1e9)  # 66.7% .. 100%
COMM_BOUNDS = sm.bounds(0.3, 250e6, 4, sm.Link(0.5e9, 0.0), bucket_bytes=1e9)


def test_verdict_below_above_and_between():
    assert sm.judge(BOUNDS, 0.5).code == sm.BELOW
    assert "stragglers" in sm.judge(BOUNDS, 0.5).text
    assert sm.judge(COMM_BOUNDS, 0.9).code == sm.ABOVE
    between = sm.judge(BOUNDS, 0.8)
    assert between.code == sm.COMPUTE
    # measured step 0.9/0.8 = 1.125 s; no overlap 1.35 s -> 0.225 of the 0.45 s allreduce hidden
    assert between.hidden_fraction == pytest.approx(0.5)
    assert sm.judge(COMM_BOUNDS, 0.3).code == sm.COMM


def test_verdict_uses_the_interval():
    # 0.6 alone is below 66.7%, but its interval reaches into the model's range.
    assert sm.judge(BOUNDS, 0.6, 0.5, 0.7).code == sm.COMPUTE
    assert sm.judge(BOUNDS, 0.6, 0.55, 0.65).code == sm.BELOW


# ---------------------------------------------------------------- the published tables

# Horovod's README: 25 Gbit/s RoCE, 4 Pascal GPUs per server, batch 64, single-GPU images/s.
ONE_GPU = {"inception_v3": 134.4, "resnet101": 119.4, "vgg16": 130.9}
PUBLISHED = {512: {"inception_v3": 0.90, "resnet101": 0.90, "vgg16": 0.68},  # 128 servers
             128: {"inception_v3": 0.90, "resnet101": 0.90, "vgg16": 0.79}}  # 32 servers


@pytest.mark.parametrize("latency", [0.0, sm.DEFAULT_STEP_LATENCY])
@pytest.mark.parametrize("workers", sorted(PUBLISHED))
def test_published_efficiencies_fall_between_the_bounds(workers, latency):
    for model, published in PUBLISHED[workers].items():
        p = sm.predict(model, workers, units.parse_bandwidth("25Gbit"), ONE_GPU[model], 64,
                       step_latency=latency, bucket_bytes=64 * 2**20,
                       measured_efficiency=published)
        assert p["efficiency_no_overlap"] < published < p["efficiency_full_overlap"], (model, p)
        expected = sm.COMM if model == "vgg16" else sm.COMPUTE
        assert p["verdict"] == expected


def test_published_vgg16_by_hand():
    # C = 64/130.9 = 0.48892 s; S = 138,357,544 x 4 B; ring 2*511/512 * S / 3.125e9 = 0.35350 s.
    p = sm.predict("vgg16", 512, GBIT25, 130.9, 64, step_latency=0.0, bucket_bytes=64 * 2**20)
    assert p["allreduce_seconds"] == pytest.approx(0.35350, abs=1e-5)
    assert p["efficiency_no_overlap"] == pytest.approx(0.48892 / (0.48892 + 0.35350), abs=1e-4)
    assert p["efficiency_full_overlap"] == pytest.approx(0.48892 / (0.48892 / 3 + 0.35350),
                                                         abs=1e-4)


def test_published_table_breaks_with_too_much_latency():
    # Honest limit: past ~22 us per ring step (9 messages x 1022 steps) VGG-16's upper bound
    # drops below the published 68%.
    p = sm.predict("vgg16", 512, GBIT25, 130.9, 64, step_latency=25e-6, bucket_bytes=64 * 2**20)
    assert p["efficiency_full_overlap"] < 0.68


# ---------------------------------------------------------------- rows from analysis

def summary_row(**overrides) -> dict:
    row = {"model": "resnet101", "framework": "ddp", "world_size": 2, "nodes": 1,
           "batch_size": 4, "global_batch": 8, "image_size": 64, "precision": "fp32",
           "device": "cpu", "scaling": "weak", "data": "synthetic", "trials": 3,
           "images_per_sec": 12.0, "efficiency": 0.75, "efficiency_ci95_low": 0.7,
           "efficiency_ci95_high": 0.8}
    row.update(overrides)
    return row


def test_model_rows_by_hand():
    # one worker: 12 / (2 x 0.75) = 8 images/s -> 0.5 s per batch of 4.
    link = sm.Link(1e9, 0.0)
    [row] = sm.model_rows([summary_row(world_size=1, efficiency=1.0), summary_row()], link)
    grad = 44_549_160 * 4
    assert row["compute_seconds"] == pytest.approx(0.5)
    assert row["allreduce_seconds"] == pytest.approx(grad / 1e9)
    assert row["efficiency_no_overlap"] == pytest.approx(0.5 / (0.5 + grad / 1e9))
    assert row["verdict"] in (sm.COMPUTE, sm.COMM, sm.BELOW, sm.ABOVE)
    assert row["link_source"] == "given"


def test_model_rows_accepts_a_plain_bandwidth_and_says_what_it_cannot_model():
    rows = sm.model_rows([summary_row(efficiency=None), summary_row()], 1e9)
    assert rows[0]["verdict"] == sm.NOT_MODELLED and "one-worker" in rows[0]["verdict_text"]
    assert rows[1]["link_step_latency"] == sm.DEFAULT_STEP_LATENCY
    none = sm.model_rows([summary_row()], lambda row: None)
    assert none[0]["verdict"] == sm.NOT_MODELLED and "scalebench allreduce" in none[0]["verdict_text"]


def test_fit_link_recovers_bandwidth_and_latency():
    workers, bw, step = 4, 2e9, 20e-6
    points = [(s, 2 * 3 * step + 1.5 * s / bw) for s in (2**20, 2**24, 2**27)]
    link = sm.fit_link(points, workers)
    assert link.bandwidth == pytest.approx(bw, rel=1e-6)
    assert link.step_latency == pytest.approx(step, rel=1e-6)
    single = sm.fit_link(points[:1], workers)
    assert single.step_latency == 0 and single.bandwidth < bw


def test_link_chooser_prefers_own_worker_count_then_nearest():
    links = {("ddp", "cpu", 2, 1): sm.Link(1e9), ("ddp", "cpu", 8, 1): sm.Link(2e9)}
    choose = sm.link_chooser(links)
    assert choose(summary_row(world_size=2)).bandwidth == 1e9
    assert "nearest to 4" in choose(summary_row(world_size=4)).source
    assert choose(summary_row(framework="horovod")) is None


# ---------------------------------------------------------------- predict CLI

PREDICT = ["predict", "--model", "vgg16", "--workers", "512", "--bandwidth", "25Gbit",
           "--images-per-sec-one", "130.9", "--batch-size", "64"]


def test_predict_json(capsys):
    assert cli.main([*PREDICT, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["efficiency_no_overlap"] < out["efficiency_full_overlap"] <= 1
    assert out["bandwidth_bytes_per_sec"] == pytest.approx(3.125e9)
    assert (out["model"], out["workers"], out["batch_size"]) == ("vgg16", 512, 64)
    assert out["params"] == 138_357_544 and out["backward_to_forward"] == 2.0
    assert math.isclose(out["step_seconds_one"], 64 / 130.9)


def test_predict_text(capsys):
    assert cli.main([*PREDICT, "--measured-efficiency", "0.68"]) == 0
    out = capsys.readouterr().out
    assert "no overlap" in out and "communication-bound" in out


def _swap(args: list[str], flag: str, value: str) -> list[str]:
    args = list(args)
    args[args.index(flag) + 1] = value
    return args


@pytest.mark.parametrize("flag, value, message", [
    ("--model", "alexnet", "model: unknown model 'alexnet'"),
    ("--bandwidth", "0Gbit", "bandwidth: must be above 0"),
    ("--bandwidth", "25Gbat", "bandwidth: unknown unit"),
    ("--bandwidth", "25", "bandwidth: '25' has no unit"),
    ("--workers", "0", "workers: must be an integer >= 1"),
    ("--workers", "many", "workers: expected an integer"),
    ("--images-per-sec-one", "0", "images_per_sec_one: must be above 0"),
    ("--batch-size", "2.5", "batch_size: expected an integer"),
])
def test_predict_input_errors(capsys, flag, value, message):
    assert cli.main(_swap(PREDICT, flag, value)) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_predict_bad_latency_and_bucket(capsys):
    assert cli.main([*PREDICT, "--latency", "5 years"]) == 2
    assert cli.main([*PREDICT, "--bucket", "lots"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("scalebench predict: error: latency:")
    assert err[1].startswith("scalebench predict: error: bucket:")


# ---------------------------------------------------------------- units: bits or bytes, said

@pytest.mark.parametrize("text, expected", [
    ("8Gbit/s", 1e9), ("8Gbps", 1e9), ("1GB/s", 1e9), ("1GiB/s", 2.0**30), ("8Gibit", 2.0**30),
])
def test_bandwidth_units_that_say_bits_or_bytes(text, expected):
    assert units.parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, unit, bits, bytes_", [
    ("25gb", "gb", "Gbit/s", "GB/s"), ("25gbps", "gbps", "Gbit/s", "GB/s"),
    ("100mb/s", "mb/s", "Mbit/s", "MB/s"), ("1gib/s", "gib/s", "Gibit/s", "GiB/s"),
])
def test_ambiguous_bandwidth_units_are_refused(text, unit, bits, bytes_):
    with pytest.raises(UserError) as info:
        units.parse_bandwidth(text)
    assert str(info.value) == (f"bandwidth: {unit!r} is ambiguous; write {bits} for bits or "
                               f"{bytes_} for bytes")


def test_predict_refuses_an_ambiguous_bandwidth(capsys):
    assert cli.main(_swap(PREDICT, "--bandwidth", "25gbps")) == 2
    err = capsys.readouterr().err
    assert "bandwidth: 'gbps' is ambiguous" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- the run's own options

VGG16_PARAMS = 138_357_544


def test_fp16_compressed_vgg16_row_is_modelled_with_half_the_bytes():
    plain = summary_row(model="vgg16", framework="horovod", options={})
    compressed = summary_row(model="vgg16", framework="horovod",
                             options={"fp16_allreduce": True}, step_label="fp16_allreduce")
    [a, b] = sm.model_rows([plain, compressed], sm.Link(1e9, 0.0))
    assert a["grad_bytes"] == VGG16_PARAMS * 4  # ~553 MB
    assert b["grad_bytes"] == VGG16_PARAMS * 2  # ~277 MB
    assert b["grad_bytes"] == pytest.approx(277e6, rel=0.01)
    assert (a["fp16_allreduce"], b["fp16_allreduce"]) == (False, True)
    assert b["allreduce_seconds"] == pytest.approx(a["allreduce_seconds"] / 2)
    assert b["step_label"] == "fp16_allreduce"


def test_bucket_bytes_come_from_the_framework_and_its_options():
    link = sm.Link(1e9, 1e-6)
    grad = 44_549_160 * 4  # resnet101, ~178 MB
    rows = sm.model_rows([summary_row(framework="horovod"),
                          summary_row(framework="horovod", options={"fusion_threshold_mb": 32}),
                          summary_row(framework="ddp")], link)
    assert [r["bucket_bytes"] for r in rows] == [128 * 2**20, 32 * 2**20, 25 * 2**20]
    assert [r["messages"] for r in rows] == [math.ceil(grad / b) for b in
                                             (128 * 2**20, 32 * 2**20, 25 * 2**20)]


def allreduce_record(size: int, seconds: float, timestamp: str = "t0", **fields) -> dict:
    r = {"kind": "allreduce", "status": "ok", "framework": "ddp", "world_size": 2, "nodes": 1,
         "dtype": "float32", "device": "cpu", "env": {"device_kind": "cpu"},
         "size_bytes": size, "seconds": seconds, "timestamp": timestamp}
    r.update(fields)
    return r


def test_links_come_from_the_newest_allreduce_points():
    bw = 1e9  # bus bandwidth: 2 workers move 2(N-1)/N = 1 x the message
    records = [allreduce_record(s, 1.0) for s in (2**20, 2**23)]  # older, replaced below
    records += [allreduce_record(s, s / bw, "t1") for s in (2**20, 2**23)]
    records.append(allreduce_record(2**20, 9.0, status="failed"))
    points = aggregate.latest_allreduce_points(records)
    assert [(p["size_bytes"], p["timestamp"]) for p in points] == [(2**20, "t1"), (2**23, "t1")]
    [(key, link)] = sm.links_from_allreduce(records).items()
    assert key == ("ddp", "cpu", 2, 1)
    assert link.bandwidth == pytest.approx(bw) and link.step_latency == pytest.approx(0.0)


# ---------------------------------------------------------------- links: latency and node count

def noisy_points(seed: int, workers: int = 2, bandwidth: float = 1e9, step: float = 50e-6
                 ) -> list[tuple[int, float]]:
    """Allreduce times for 8 KiB .. 256 MiB with up to +-3% noise, as a real sweep scatters
    them: at 256 MiB over 1 GB/s the noise alone is up to 8 ms, 80 times the call's latency."""
    import random

    rng = random.Random(seed)
    call = 2 * (workers - 1) * step
    return [(s, (call + sm.ring_factor(workers) * s / bandwidth) * rng.uniform(0.97, 1.03))
            for s in (8 * 2**10, 64 * 2**10, 2**20, 16 * 2**20, 256 * 2**20)]


@pytest.mark.parametrize("seed", range(8))
def test_fit_link_recovers_a_50us_latency_from_noisy_timings(seed):
    # unweighted least squares let the largest sizes' noise set the intercept: 0 to 86 us
    link = sm.fit_link(noisy_points(seed), 2)
    assert link.step_latency == pytest.approx(50e-6, rel=0.2)
    assert link.bandwidth == pytest.approx(1e9, rel=0.05)


def test_link_chooser_prefers_the_same_node_count_then_the_worker_count():
    links = {("ddp", "cuda", 6, 1): sm.Link(100e9, 0.0, "one node"),
             ("ddp", "cuda", 16, 2): sm.Link(10e9, 0.0, "two nodes")}
    choose = sm.link_chooser(links)
    # 8 workers on 2 nodes: 6 workers is nearer, but measured inside one node (NVLink, not the
    # network between the nodes)
    two = choose(summary_row(device="cuda", world_size=8, nodes=2))
    assert two.bandwidth == 10e9 and "nearest to 8 workers" in two.source
    one = choose(summary_row(device="cuda", world_size=8, nodes=1))
    assert one.bandwidth == 100e9
    only_other = sm.link_chooser({("ddp", "cuda", 8, 1): sm.Link(100e9, 0.0, "one node")})
    assert "measured on 1 node, not 2" in only_other(summary_row(device="cuda", world_size=8,
                                                                 nodes=2)).source


def test_compressed_vgg16_from_records_is_modelled_with_277_mb():
    from tests.conftest import fake_record

    records = [fake_record(trials, framework="horovod", model="vgg16", world_size=w,
                           options={"fp16_allreduce": True}, params=VGG16_PARAMS)
               for w, trials in ((1, (10.0, 10.1, 9.9)), (2, (19.0, 19.2, 18.8)))]
    [row] = sm.report_rows(records, sm.Link(1e9, 0.0))
    assert row["fp16_allreduce"] and row["grad_bytes"] == VGG16_PARAMS * 2
    assert row["grad_bytes"] == pytest.approx(277e6, rel=0.01)  # not ~553 MB
