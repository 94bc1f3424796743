"""Node vetting: the tournament schedule, the verdict rule on fabricated figures and the host
lists (fast); then `scalebench vet` and `sweep --vet` on a real 4-node private Slurm cluster
(slow, one cluster for the whole module)."""

from __future__ import annotations

import itertools

import pytest

from scalebench.slurm import allocation
from scalebench.vet import schedule, verdict
from scalebench.vet.verdict import Figures

# ------------------------------------------------------------------ tournament schedule


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 7, 8, 16])
def test_round_robin_meets_every_pair_once_in_disjoint_rounds(count):
    nodes = [f"n{i}" for i in range(1, count + 1)]
    rounds = schedule.rounds(nodes)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    seen = [pair for r in rounds for pair in r]
    assert sorted(seen) == sorted(itertools.combinations(nodes, 2))  # each pair exactly once
    for r in rounds:
        busy = [node for pair in r for node in pair]
        assert len(busy) == len(set(busy))  # a node meets one partner per round
        assert len(r) == count // 2
        assert len(schedule.resting(nodes, r)) == count % 2  # the bye, odd counts only
    if count % 2:  # every node sits out exactly one round
        byes = [schedule.resting(nodes, r)[0] for r in rounds]
        assert sorted(byes) == sorted(nodes)


def test_round_robin_small_and_bad_inputs():
    assert schedule.rounds(["a"]) == [] and schedule.rounds([]) == []
    assert schedule.rounds(["a", "b"]) == [[("a", "b")]]
    with pytest.raises(ValueError, match="not distinct"):
        schedule.rounds(["a", "a", "b"])


# ------------------------------------------------------------------ host lists


@pytest.mark.parametrize("names,text", [
    (["sb1", "sb2", "sb4"], "sb[1-2,4]"),
    (["sb3"], "sb3"),
    ([], ""),
    (["gpu01", "gpu02", "gpu03", "gpu07", "login1"], "gpu[01-03,07],login1"),
    (["n8", "n9", "n10", "n11"], "n[8-11]"),
    (["n08", "n09", "n10"], "n[08-10]"),
    (["a", "b1", "b2"], "a,b[1-2]"),
])
def test_hostlists_compress_as_slurm_writes_them_and_expand_back(names, text):
    assert allocation.compress_hostlist(names) == text
    assert (allocation.expand_hostlist(text) if text else []) == names


def test_allocation_subset_keeps_each_nodes_share():
    alloc = allocation.Allocation("5", ("sb1", "sb2", "sb3", "sb4"), (1, 1, 2, 1), ntasks=4)
    vetted = alloc.subset(["sb1", "sb2", "sb4"])
    assert vetted.nodes == ("sb1", "sb2", "sb4") and vetted.cpus_per_node == (1, 1, 1)
    assert vetted.ntasks == 3 and "sb[1-2,4]" in vetted.describe()
    assert vetted.place(3, "cpu").nodes == ("sb1", "sb2", "sb4")
    with pytest.raises(ValueError, match="not a part of"):
        alloc.subset(["sb9"])
    wide = allocation.Allocation("6", ("a", "b"), (8, 8))
    assert wide.place(2, "cpu").nodes == ("a",)  # packs onto one node ...
    assert wide.place(2, "cpu", max_per_node=1) == allocation.Placement(("a", "b"), 1, 8, 0)


# ------------------------------------------------------------------ the verdict rule

NODES = ("sb1", "sb2", "sb3", "sb4")
PAIRS = tuple(itertools.combinations(NODES, 2))


def figures(compute=None, matmul=None, pairs=None, nodes=NODES, noise=0.01) -> Figures:
    """Healthy figures with a little repeat noise; the arguments replace the base rate of
    some nodes or pairs (rates: images/s, FLOP/s, bytes/s)."""
    def repeats(rate: float) -> list[float]:
        return [rate * (1 - noise), rate, rate * (1 + noise)]

    compute, matmul, pairs = compute or {}, matmul or {}, pairs or {}
    return Figures(
        nodes=tuple(nodes),
        compute={(n, 0): repeats(compute.get(n, 20.0 + 0.1 * i)) for i, n in enumerate(nodes)},
        matmul={(n, 0): repeats(matmul.get(n, 5e10)) for n in nodes},
        pairs={p: repeats(pairs.get(p, 1e9)) for p in itertools.combinations(nodes, 2)})


def test_healthy_nodes_get_no_verdict():
    decision = verdict.decide(figures(), 0.10)
    assert decision.decided and decision.verdicts == () and decision.cordoned == {}
    assert decision.vetted(NODES) == list(NODES)


def test_a_slow_compute_node_is_cordoned_and_says_which_figure():
    decision = verdict.decide(figures(compute={"sb3": 20.0 / 1.5}), 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.nodes, v.cordon) == ("slow compute node", ("sb3",), True)
    assert v.because.startswith("compute probe 13.3 images/s, 67% of the median node's")
    assert "beyond the 10% threshold" in v.because
    assert decision.vetted(NODES) == ["sb1", "sb2", "sb4"]
    assert list(decision.cordoned) == ["sb3"]


def test_a_slow_matmul_alone_also_makes_a_slow_compute_node():
    [v] = verdict.decide(figures(matmul={"sb1": 2.5e10}), 0.10).verdicts
    assert v.kind == "slow compute node" and v.nodes == ("sb1",)
    assert v.because.startswith("matmul probe 25 GFLOP/s, 50% of the median node's 50 GFLOP/s")


def test_a_node_whose_pairs_are_all_slow_is_a_slow_network_node():
    slow = {p: 4e8 for p in PAIRS if "sb2" in p}
    decision = verdict.decide(figures(pairs=slow), 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.nodes, v.cordon) == ("slow network node", ("sb2",), True)
    assert "median busbw over its pairs 400 MB/s" in v.because and "compute is fine" in v.because


def test_one_slow_pair_is_a_slow_link_and_both_nodes_stay():
    decision = verdict.decide(figures(pairs={("sb1", "sb4"): 5e8}), 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.nodes, v.cordon) == ("slow link", ("sb1", "sb4"), False)
    assert "the other 2 pairs of sb1 are fine" in v.because
    assert decision.cordoned == {} and decision.vetted(NODES) == list(NODES)


def test_a_slow_compute_node_with_slow_pairs_is_one_verdict_not_a_link():
    slow_pairs = {p: 5e8 for p in PAIRS if "sb3" in p}
    [v] = verdict.decide(figures(compute={"sb3": 10.0}, pairs=slow_pairs), 0.10).verdicts
    assert v.kind == "slow compute node" and "its pairs are slow too" in v.because


def test_below_the_threshold_is_not_slow_however_quiet():
    decision = verdict.decide(figures(compute={"sb3": 20.0 * 0.93}, noise=0.0001), 0.10)
    assert decision.verdicts == () and decision.notes == ()


def test_beyond_the_threshold_but_within_the_noise_is_a_note_not_a_verdict():
    noisy = figures(compute={"sb3": 20.0 * 0.8}, noise=0.15)
    decision = verdict.decide(noisy, 0.10)
    assert decision.verdicts == ()
    [note] = decision.notes
    assert note.startswith("sb3: compute probe 20% below the median, beyond the 10% threshold "
                           "but within the") and "more repeats" in note
    # the same figures with a 25% threshold: not even a note
    assert verdict.decide(noisy, 0.25).notes == ()


def test_fewer_than_three_nodes_get_figures_only():
    decision = verdict.decide(figures(compute={"sb2": 5.0}, nodes=("sb1", "sb2")), 0.10)
    assert not decision.decided and decision.verdicts == () and decision.cordoned == {}
    assert "no majority" in decision.notes[0] and "figures only" in decision.notes[0]


def test_a_slow_gpu_inside_a_node_names_the_gpu():
    rates = {(n, g): [100.0, 101.0, 99.0] for n in ("a", "b", "c") for g in range(4)}
    rates[("b", 2)] = [60.0, 61.0, 59.0]
    decision = verdict.decide(Figures(nodes=("a", "b", "c"), compute=rates), 0.10)
    [v] = decision.verdicts
    assert v.nodes == ("b",) and v.because.startswith("b GPU 2: compute probe 60 images/s")
    assert "median device's" in v.because
