"""Node vetting: the schedules (tournament, leaves, K rounds, retests), topology parsing, the
verdict rule on fabricated figures, the simulator and the host lists (fast); then one
`sweep --vet` with three faults on a real 8-node private Slurm cluster of two leaf switches
(slow)."""

from __future__ import annotations

import itertools

import pytest

from scalebench.slurm import allocation
from scalebench.spec.errors import UserError
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
    with pytest.raises(UserError, match="nodes: node 'a' named twice"):
        schedule.rounds(["a", "a", "b"])


# ------------------------------------------------------------------ topology and the constant schedule

TOPOLOGY_CONF = """# two leaves under one top switch
SwitchName=s0 Nodes=sb[1-4]
SwitchName=s1 Nodes=sb[5-8]   # the second rack
SwitchName=top Switches=s[0-1]
"""
SCONTROL_TOPOLOGY = """SwitchName=s0 Level=0 LinkSpeed=1 Nodes=sb[1-4]
SwitchName=s1 Level=0 LinkSpeed=1 Nodes=sb[5-8]
SwitchName=top Level=1 LinkSpeed=1 Nodes=sb[1-8] Switches=s[0-1]
"""
EIGHT = tuple(f"sb{i}" for i in range(1, 9))


@pytest.mark.parametrize("text", [TOPOLOGY_CONF, SCONTROL_TOPOLOGY])
def test_topology_conf_and_scontrol_output_give_the_same_leaves(text):
    from scalebench.vet import topology

    found = topology.parse(text, "t")
    assert dict(found.leaves) == {"s0": EIGHT[:4], "s1": EIGHT[4:]}
    part = topology.for_nodes(found, ["sb2", "sb3", "sb6", "sb7", "sb8"])
    assert dict(part.leaves) == {"s0": ("sb2", "sb3"), "s1": ("sb6", "sb7", "sb8")}


@pytest.mark.parametrize("text,nodes,message", [
    ("SwitchName=s0 Nodes=sb[1-4]\n", EIGHT,
     "topology: t does not cover the allocation: sb5, sb6, sb7, sb8 in no leaf switch"),
    ("SwitchName=s0 Nodes=sb[1-4]\nSwitchName=s1 Nodes=sb[4-8]\n", EIGHT,
     "topology: node 'sb4' named twice (t: leaf switches 's0' and 's1')"),
    ("SwitchName=s0 Nodes=sb[1-8]\nSwitchName=s0 Nodes=x1\n", EIGHT,
     "topology: t line 2: switch 's0' named twice"),
    ("Nodes=sb[1-8]\n", EIGHT, "topology: t line 1: every line names a switch"),
    ("SwitchName=s0 Nodes sb1\n", EIGHT, "topology: t line 1: expected KEY=VALUE words"),
])
def test_bad_topology_is_one_line_naming_the_field(text, nodes, message):
    from scalebench.vet import topology

    with pytest.raises(UserError) as err:
        topology.for_nodes(topology.parse(text, "t"), nodes)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), err.value


def _met(rounds):
    return [frozenset(p) for r in rounds for p in r]


@pytest.mark.parametrize("leaves,k", [(2, 5), (3, 5), (4, 6), (5, 5), (2, 3), (1, 4)])
def test_leaf_schedule_pairs_inside_leaves_then_shifts_across_sharing_no_uplink(leaves, k):
    size = 6
    tree = {f"s{j}": tuple(f"n{j}_{i}" for i in range(size)) for j in range(leaves)}
    leaf_of = {n: leaf for leaf, nodes in tree.items() for n in nodes}
    position = {n: i for nodes in tree.values() for i, n in enumerate(nodes)}
    rounds = schedule.leaf_rounds(tree, k)
    assert len(rounds) == k
    met = _met(rounds)
    assert len(met) == len(set(met))  # every node meets distinct partners
    intra = k if leaves == 1 else min(schedule.INTRA_ROUNDS, k - 1)
    for number, r in enumerate(rounds):
        busy = [n for p in r for n in p]
        assert len(busy) == len(set(busy))  # disjoint pairs
        across = [p for p in r if leaf_of[p[0]] != leaf_of[p[1]]]
        if number < intra:
            assert not across and len(r) == leaves * size // 2
            continue
        talks: dict[str, set] = {}
        for a, b in across:
            talks.setdefault(leaf_of[a], set()).add(leaf_of[b])
            talks.setdefault(leaf_of[b], set()).add(leaf_of[a])
        assert all(len(v) == 1 for v in talks.values())  # one partner leaf per round
        for leaf in talks:  # the partners' positions differ: no shared uplink
            positions = [position[b if leaf_of[a] == leaf else a] for a, b in across
                         if leaf in (leaf_of[a], leaf_of[b])]
            assert len(positions) == len(set(positions))


def test_without_topology_k_rounds_of_distinct_partners_and_auto_keeps_small_tournaments():
    nodes = [f"n{i}" for i in range(40)]
    found = schedule.choose(nodes, "auto", 5)
    assert found.kind == "rounds" and len(found.rounds) == 5
    assert all(len(r) == 20 for r in found.rounds)
    met = _met(found.rounds)
    assert len(met) == len(set(met)) == 100
    assert schedule.choose(nodes, "all").kind == "all"
    assert len(schedule.choose(nodes, "all").rounds) == 39
    small = schedule.choose(nodes[:6], "auto", 5)  # 5 rounds either way: every pair
    assert small.kind == "all" and len(small.rounds) == 5
    assert schedule.choose(nodes[:8], "auto", 5).kind == "rounds"
    tree = {"s0": tuple(nodes[:4]), "s1": tuple(nodes[4:8])}
    assert schedule.choose(nodes[:8], "few", 5, tree).kind == "leaves"
    with pytest.raises(UserError, match="rounds: expected an integer >= 1, got 0"):
        schedule.choose(nodes, "auto", 0)


def test_retests_pair_each_suspect_with_unmet_good_nodes_of_its_leaf_first():
    tree = {"s0": ("a1", "a2", "a3", "a4"), "s1": ("b1", "b2", "b3", "b4")}
    leaf_of = {n: leaf for leaf, nodes in tree.items() for n in nodes}
    met = [("a1", "a2"), ("a1", "b1")]
    good = ["a2", "a3", "a4", "b1", "b2", "b3"]
    rounds = schedule.retests(["a1", "b4"], good, met, leaf_of)
    assert len(rounds) == 2
    for r in rounds:
        busy = [n for p in r for n in p]
        assert len(busy) == len(set(busy))
    mine = [p for r in rounds for p in r if "a1" in p]
    partners = [n for p in mine for n in p if n != "a1"]
    assert partners == ["a3", "a4"]  # unmet, in its own leaf
    assert {frozenset(p) for p in met}.isdisjoint(_met(rounds))
    assert [n for p in rounds[0] for n in p if "b4" in p and n != "b4"][0] in tree["s1"]


def test_retests_take_a_few_reference_pairs_of_the_suspects_leaf_not_every_good_node():
    """At 256 nodes, two suspects: each retest round holds their two pairs and 8 pairs of good
    nodes of their own leaf (the step's median pair), not the other 250 nodes: the retest step,
    whose launch grows with its nodes, spans 20 of them."""
    tree = {f"s{j}": tuple(f"n{j}_{i:02d}" for i in range(32)) for j in range(8)}
    leaf_of = {n: leaf for leaf, nodes in tree.items() for n in nodes}
    nodes = [n for v in tree.values() for n in v]
    met = [p for r in schedule.leaf_rounds(tree, 5) for p in r]
    suspects = ["n3_07", "n3_20"]
    good = [n for n in nodes if n not in suspects]
    rounds = schedule.retests(suspects, good, met, leaf_of)
    assert len(rounds) == 2
    for r in rounds:
        busy = [n for p in r for n in p]
        assert len(busy) == len(set(busy)) == 2 * 2 + 2 * schedule.REFERENCE_PAIRS
        assert {leaf_of[n] for n in busy} == {"s3"}
        assert len([p for p in r if set(p) & set(suspects)]) == 2
    assert {frozenset(p) for p in met}.isdisjoint(_met(rounds))
    many = [f"n{j}_00" for j in range(8)] + [f"n{j}_01" for j in range(8)]
    wide = schedule.retests(many, [n for n in nodes if n not in many], met, leaf_of, count=1)
    assert len(wide[0]) == 2 * len(many)  # as many reference pairs as the suspects' pairs


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
    """Healthy figures with 5 repeats of independent noise (a relative sd of `noise`, seeded);
    the arguments replace the base rate of some nodes or pairs (images/s, FLOP/s, bytes/s)."""
    import math
    import random

    rng = random.Random(1)

    def repeats(rate: float) -> list[float]:
        return [rate * math.exp(rng.gauss(0, noise)) for _ in range(5)]

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
    assert v.because.startswith("compute probe 13.3 images/s against the median node's 20.1 "
                                "images/s, 66% of it repeat by repeat: 34% below")
    assert "beyond the 10% threshold" in v.because
    assert decision.vetted(NODES) == ["sb1", "sb2", "sb4"]
    assert list(decision.cordoned) == ["sb3"]


def test_a_slow_matmul_alone_also_makes_a_slow_compute_node():
    [v] = verdict.decide(figures(matmul={"sb1": 2.5e10}), 0.10).verdicts
    assert v.kind == "slow compute node" and v.nodes == ("sb1",)
    assert v.because.startswith("matmul probe 25.1 GFLOP/s against the median node's 50 "
                                "GFLOP/s, 50% of it")


def test_a_node_whose_pairs_are_all_slow_is_a_slow_network_node():
    slow = {p: 4e8 for p in PAIRS if "sb2" in p}
    decision = verdict.decide(figures(pairs=slow), 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.nodes, v.cordon) == ("slow network node", ("sb2",), True)
    assert v.because.startswith("median busbw over its pairs 401 MB/s against the median node's")
    assert v.because.endswith("while its compute is fine")


def test_one_slow_pair_is_a_slow_link_and_both_nodes_stay():
    decision = verdict.decide(figures(pairs={("sb1", "sb4"): 5e8}), 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.nodes, v.cordon) == ("slow link", ("sb1", "sb4"), False)
    assert "the other 2 pairs of sb1 are fine" in v.because
    assert decision.cordoned == {} and decision.vetted(NODES) == list(NODES)


def test_a_slow_link_and_a_noisy_window_on_another_pair_cordon_nothing():
    """sb1-sb2 slow throughout; sb1's other pairs each slow in a repeat or two (a noisy
    window): the median over sb1's three pairs is then low in 3 of 5 repeats, but its fastest
    pair is fine, so sb1 is no slow network node, and its noisy pairs are no slow links."""
    import dataclasses

    base = figures(pairs={("sb1", "sb2"): 5e8})
    pairs = dict(base.pairs)
    pairs[("sb1", "sb3")] = [1e9, 6e8, 1e9, 6e8, 1e9]
    pairs[("sb1", "sb4")] = [1e9, 1e9, 6e8, 1e9, 1e9]
    decision = verdict.decide(dataclasses.replace(base, pairs=pairs), 0.10)
    assert [(v.kind, v.nodes, v.cordon) for v in decision.verdicts] == [
        ("slow link", ("sb1", "sb2"), False)]
    assert decision.cordoned == {}
    assert [n for n in decision.notes if n.startswith("sb1: median busbw over its pairs ")
            and "its fastest pair is not slow" in n], decision.notes


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


def _tree_figures(slow_pairs=(), noise=0.01, leaves=2, size=4, seed=2):
    """Healthy figures over `leaves` leaves of `size`, 5 repeats, the 5-round leaf schedule;
    slow_pairs at 70%."""
    import math
    import random

    rng = random.Random(seed)
    tree = {f"s{j}": tuple(f"n{j}{i}" for i in range(size)) for j in range(leaves)}
    nodes = tuple(n for v in tree.values() for n in v)
    rounds = schedule.leaf_rounds(tree, 5)

    def rep(rate):
        return [rate * math.exp(rng.gauss(0, noise)) for _ in range(5)]

    pairs = {p: rep(7e8 if p in slow_pairs else 1e9) for r in rounds for p in r}
    return Figures(nodes, {(n, 0): rep(20.0) for n in nodes}, {(n, 0): rep(5e10) for n in nodes},
                   pairs, {(n, 0): rep(5e10) for n in nodes},
                   {p: i for i, r in enumerate(rounds, 1) for p in r},
                   {n: leaf for leaf, v in tree.items() for n in v}), rounds


def test_slow_cross_pairs_of_one_node_are_its_leafs_uplink_and_nobody_is_cordoned():
    """Three leaves: node n01's pairs to the other leaves are slow (the uplink its traffic
    arrives on), its pairs inside leaf s0 fine: a slow uplink of s0, no node cordoned."""
    base, rounds = _tree_figures(leaves=3)
    slow = [p for r in rounds for p in r if "n01" in p and p[1][1] != "0"]
    assert len(slow) >= 2
    figs, _ = _tree_figures(slow_pairs=slow, leaves=3)
    decision = verdict.decide(figs, 0.10)
    [v] = decision.verdicts
    assert (v.kind, v.switches, v.cordon) == ("slow uplink", ("s0",), False)
    assert set(v.pairs) == set(slow) and v.rounds == tuple(figs.rounds[p] for p in v.pairs)
    assert decision.cordoned == {}


def test_a_node_whose_probe_failed_is_cordoned_as_unreachable_and_the_rest_judged():
    import dataclasses

    base = figures(compute={"sb3": 10.0})
    figs = dataclasses.replace(
        base, unreachable={"sb2": "its node probe failed on it alone: killed"},
        compute={u: v for u, v in base.compute.items() if u[0] != "sb2"},
        matmul={u: v for u, v in base.matmul.items() if u[0] != "sb2"},
        pairs={p: v for p, v in base.pairs.items() if "sb2" not in p})
    decision = verdict.decide(figs, 0.10)
    assert decision.cordoned["sb2"].startswith("unreachable: its node probe failed")
    assert list(decision.cordoned) == ["sb2", "sb3"]
    assert decision.vetted(NODES) == ["sb1", "sb4"]


def test_a_retest_step_that_ran_slower_throughout_names_no_link():
    """The retest step runs later: a drift moves all its pairs alike (here 30% slower). Put on
    the first step's scale it names nothing; taken raw, its pairs would be slow links."""
    import dataclasses

    figs, rounds = _tree_figures(size=6)
    later = {("n00", "n03"): [7e8] * 5, ("n01", "n04"): [7.1e8] * 5, ("n02", "n05"): [6.9e8] * 5,
             ("n10", "n13"): [7e8] * 5}
    more = dataclasses.replace(figs, pairs={**figs.pairs, **later},
                               rounds={**figs.rounds, **{p: 6 for p in later}})
    assert [v.kind for v in verdict.decide(more, 0.10).verdicts] == ["slow link"] * 4
    fixed = dataclasses.replace(more, retest_from=6)
    assert verdict.decide(fixed, 0.10).verdicts == ()


def test_three_probes_together_find_a_node_none_of_them_finds_alone():
    """4% slower on every compute probe at 2% noise: beyond the 3% threshold, within what one
    probe's 5 repeats allow, beyond what 15 repeats of three probes allow."""
    import math
    import random

    rng = random.Random(4)
    nodes = tuple(f"n{i}" for i in range(32))

    def rep(rate):
        return [rate * math.exp(rng.gauss(0, 0.02)) for _ in range(5)]

    rates = {n: 0.96 if n == "n7" else 1.0 for n in nodes}
    figs = Figures(nodes, {(n, 0): rep(rates[n]) for n in nodes},
                   {(n, 0): rep(rates[n]) for n in nodes}, {},
                   {(n, 0): rep(rates[n]) for n in nodes})
    decision = verdict.decide(figs, 0.03)
    assert [c.slow for k in verdict.COMPUTE_KINDS for c in [decision.checks[k][("n7", 0)]]] \
        == [False] * 3
    [v] = decision.verdicts
    assert v.nodes == ("n7",) and v.because.startswith("its compute probes together 9")


def test_the_simulator_runs_the_real_schedule_and_verdict_and_prints_the_json_fields(capsys):
    import json
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "benchmarks"))
    import vet_scale

    assert vet_scale.main(["--smoke", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["nodes"] for r in rows] == [16, 64]
    for row in rows:
        assert row["network_rounds"] <= 8 and row["wall_seconds"] > 0
        assert set(row["found"]) == set(vet_scale.FAULTS)
        assert row["found"]["slow_node_20"] == 1.0
        assert 0.9 <= row["component_right"] <= 1.0
        assert row["false_alarms_per_10k"] >= 0
    assert rows[0]["found"]["slow_uplink"] is None  # one leaf of 16: no uplink
    assert rows[1]["found"]["slow_uplink"] > 0.9
    for row in rows:
        low, high = row["found_95"]["slow_node_5"]
        assert low <= row["found"]["slow_node_5"] <= high
        low, high = row["false_alarms_per_10k_95"]
        assert low <= row["false_alarms_per_10k"] < high
        assert row["wall_seconds"] == pytest.approx(sum(row["wall_parts"].values()), abs=0.1)
    assert rows[1]["retest_nodes"] < rows[1]["nodes"]  # the retest step spans few nodes


def _simulator():
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "benchmarks"))
    import vet_scale

    return vet_scale


def test_the_simulators_intervals_are_wilsons_and_the_exact_poisson_ones():
    sim = _simulator()
    assert sim.wilson(184, 208) == pytest.approx((0.834, 0.921), abs=0.001)
    assert sim.wilson(0, 0) == (0.0, 1.0)
    assert sim.poisson_interval(0) == pytest.approx((0.0, 3.689), abs=0.001)
    assert sim.poisson_interval(2) == pytest.approx((0.242, 7.225), abs=0.001)
    assert sim.poisson_interval(5) == pytest.approx((1.623, 11.668), abs=0.001)


def test_the_simulators_printed_probabilities_never_round_up_onto_a_goal():
    sim = _simulator()
    assert sim.down(0.8997) == "0.899" and sim.down(0.9147) == "0.914"
    assert sim.down(0.915) == "0.915" and sim.down(0.91474, 4) == "0.9147"
    assert sim.up(0.9201) == "0.921" and sim.up(0.921) == "0.921"


def test_the_cost_model_charges_every_sweep_run_its_build_and_the_retest_step_its_nodes():
    """The node step pays the model's build, so does every run of the sweep; the retest step's
    launch grows with the nodes it spans, not the allocation's."""
    sim = _simulator()
    parts = sim.wall_parts(1024, 5, 2, 64, 7)
    assert parts["node_launch"] == parts["pair_launch"] == pytest.approx(20 + 0.02 * 1024)
    assert parts["retest_launch"] == pytest.approx(20 + 0.02 * 64)
    assert parts["node_build"] == sim.BUILD and parts["node_sustained"] == sim.SUSTAINED
    assert sim.wall_parts(1024, 5, 0, 0, 7)["retest_launch"] == 0.0
    runs, ranks = 0, 1
    while ranks <= 1024 * sim.GPUS_PER_NODE:
        runs, ranks = runs + 9, ranks * 2
    without_build = sim.sweep_seconds(1024) - runs * sim.BUILD
    assert runs == 126 and without_build == pytest.approx(4634, abs=1)


class _FakeSteps:
    """Steps whose node step fails when it holds a bad node: a killed one names itself in srun's
    words, a hung one names nobody (a time limit)."""

    def __init__(self, tmp_path, killed=(), hung=()):
        self.out_dir, self.killed, self.hung, self.ran = tmp_path, set(killed), set(hung), []

    def run(self, job):
        nodes, run_id = job
        self.ran.append(list(nodes))
        lines = [f"srun: error: {n}: task {i}: Killed" for i, n in enumerate(nodes)
                 if n in self.killed]
        lines += [f"srun: error: {n}: task {i}: Terminated" for i, n in enumerate(nodes)
                  if n not in self.killed]
        bad = self.killed & set(nodes) or self.hung & set(nodes)
        (self.out_dir / "runs" / run_id).mkdir(parents=True)
        (self.out_dir / "runs" / run_id / "stderr.log").write_text(
            "\n".join(lines if self.killed & set(nodes) else []) + "\n")
        return {"run_id": run_id, "status": "failed" if bad else "ok", "error": "x"}


def test_a_killed_node_is_found_in_three_steps_and_a_hung_one_by_halving(tmp_path):
    from scalebench.vet.run import probe_nodes

    nodes = [f"sb{i}" for i in range(1, 9)]
    steps = _FakeSteps(tmp_path / "k", killed={"sb6"})
    unreachable, failed = probe_nodes(steps, lambda n, r: (n, r), nodes, "v")
    assert list(unreachable) == ["sb6"] and failed is None
    assert steps.ran == [nodes, ["sb6"], [n for n in nodes if n != "sb6"]]
    steps = _FakeSteps(tmp_path / "h", hung={"sb3"})
    unreachable, failed = probe_nodes(steps, lambda n, r: (n, r), nodes, "v")
    assert list(unreachable) == ["sb3"] and failed is None
    assert steps.ran == [nodes, nodes[:4], nodes[:2], nodes[2:4], ["sb3"], ["sb4"], nodes[4:],
                         [n for n in nodes if n != "sb3"]]  # halves that pass: not split


# ------------------------------------------------------------------ bad input, one line


def _slurm_env(monkeypatch, **env):
    import os

    for key in list(os.environ):
        if key.startswith("SLURM_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    allocation._CURRENT.clear()


FAKE_JOB = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "sb[1-4]", "SLURM_JOB_CPUS_PER_NODE": "1(x4)"}


@pytest.mark.parametrize("argv,env,message", [
    (["vet"], {}, "scalebench vet: error: allocation: `scalebench vet` measures the nodes of a "
                  "Slurm allocation (salloc or sbatch), but SLURM_JOB_ID is not set"),
    (["vet", "--threshold", "150"], FAKE_JOB, "threshold: expected a percentage between 0 and "
                                              "100 (exclusive), got 150"),
    (["vet", "--inject-node-slowdown", "sb9:0.5"], FAKE_JOB,
     "inject_node_slowdown: unknown node 'sb9'; the allocation's nodes: sb1, sb2, sb3, sb4"),
    (["vet", "--inject-link-delay", "sb1:sb1:0.1"], FAKE_JOB, "inject_link_delay: two different"),
    (["vet", "--repeats", "1"], FAKE_JOB, "repeats: expected an integer >= 2"),
    (["vet", "--rounds", "0"], FAKE_JOB, "rounds: expected an integer >= 1, got 0"),
    (["vet", "--pairs", "some"], FAKE_JOB, "pairs: unknown value 'some'; allowed: auto, all, few"),
    (["vet", "--inject-probe-kill", "sb7"], FAKE_JOB,
     "inject_probe_kill: unknown node 'sb7'; the allocation's nodes: sb1, sb2, sb3, sb4"),
    (["vet", "--topology", "TOPO"], FAKE_JOB,
     "topology: TOPO does not cover the allocation: sb3, sb4 in no leaf switch"),
    (["vet", "--topology", "TWICE"], FAKE_JOB, "topology: node 'sb2' named twice"),
    (["sweep", "--vet", "--frameworks", "ddp"], FAKE_JOB,
     "vet: vetting places runs on the nodes of a Slurm allocation; use it with launcher slurm"),
])
def test_bad_vet_input_is_one_line_naming_the_field(argv, env, message, monkeypatch, capsys,
                                                     tmp_path):
    from scalebench import cli

    _slurm_env(monkeypatch, **env)
    (tmp_path / "TOPO").write_text("SwitchName=s0 Nodes=sb[1-2]\n")
    (tmp_path / "TWICE").write_text("SwitchName=s0 Nodes=sb[1-2]\nSwitchName=s1 Nodes=sb[2-4]\n")
    monkeypatch.chdir(tmp_path)
    code = cli.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_vet_file_holds_for_its_own_job_only(monkeypatch, tmp_path):
    from scalebench.vet import files

    doc = {"format": files.FORMAT, "version": files.VERSION, "id": "vet-1-x", "status": "ok",
           "allocation": {"job_id": "1", "nodes": ["sb1", "sb2", "sb3", "sb4"]},
           "vetted": ["sb1", "sb2", "sb4"], "cordoned": {"sb3": "slow compute node: ..."}}
    files.write(doc, tmp_path)
    assert (tmp_path / "vetted-nodes.txt").read_text() == "sb[1-2,4]\n"
    assert (tmp_path / "cordoned-nodes.txt").read_text() == "sb3\n"
    mine = allocation.from_env({**FAKE_JOB, "SLURM_JOB_ID": "1"}, ask_scontrol=False)
    vetting = files.load(tmp_path, mine)
    assert vetting.vetted == ("sb1", "sb2", "sb4") and list(vetting.cordoned) == ["sb3"]
    other = allocation.from_env(FAKE_JOB, ask_scontrol=False)
    with pytest.raises(UserError, match="vetted Slurm job 1, this is job 9"):
        files.load(tmp_path / "vet.json", other)


def test_a_workloads_topology_file_gives_the_leaves_of_the_nodes_left_to_probe(tmp_path,
                                                                            monkeypatch):
    """The [vet] table's `topology` file, as `sweep --vet` reads it (the 8-node Slurm test
    below reads Slurm's own): its leaves over the allocation, then over the nodes left once
    sb1 is unreachable, as vet.json names them, and the leaf schedule over those."""
    import json

    from scalebench.commands.slurm_script import sweep_values
    from scalebench.spec import config
    from scalebench.vet import plan, topology

    _slurm_env(monkeypatch)
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=a Nodes=sb[1-4]\nSwitchName=b Nodes=sb[5-8]\n")
    workload = tmp_path / "w.toml"
    workload.write_text('[sweep]\nmodels = ["inception_v3"]\nworkers = [2, 8]\n'
                        f"[vet]\ntopology = {json.dumps(str(topo))}\n")
    options = config.build_spec(sweep_values(str(workload), ["--vet"])).vet
    tree = plan.topology_for(options, EIGHT)
    assert tree.as_dict() == {"source": str(topo), "leaves": {"a": list(EIGHT[:4]),
                                                              "b": list(EIGHT[4:])}}
    reachable = topology.for_nodes(tree, EIGHT[1:])
    assert reachable.as_dict() == {"source": str(topo), "leaves": {"a": list(EIGHT[1:4]),
                                                                   "b": list(EIGHT[4:])}}
    assert plan.pair_schedule(options, EIGHT[1:], reachable).kind == "leaves"


def test_a_vetting_without_a_verdict_vets_every_node_and_says_none_is_slow(tmp_path):
    """vet.json, the node lists, the page and the printed summary of a vetting whose figures
    hold no slow node (that a healthy cluster gets none is a false-alarm rate:
    benchmarks/vet_accuracy.py measures it)."""
    from scalebench.vet import files, page, plan, run
    from scalebench.vet.options import VetOptions

    alloc = allocation.Allocation("9", NODES, (1,) * len(NODES))
    share = plan.sharing({n: "m" for n in NODES})
    course = run.Course(schedule.choose(list(NODES), "auto", 5))
    decision = verdict.decide(figures(), 0.10)
    doc = run.document(VetOptions(), alloc, share, [], decision, "vet-9-x", 1.0, {}, course)
    assert doc["status"] == "ok" and doc["decided"] and doc["faults"] == {}
    assert doc["verdicts"] == [] and doc["cordoned"] == {} and doc["vetted"] == list(NODES)
    files.write(doc, tmp_path)
    assert (tmp_path / "vetted-nodes.txt").read_text() == "sb[1-4]\n"
    assert (tmp_path / "cordoned-nodes.txt").read_text() == ""
    assert page.verdict_lines(doc) == ["No slow node and no slow link."]
    assert "<p>No slow node and no slow link.</p>" in page.html(doc, {})
    assert run.summary_lines(doc) == ["  no slow node or link",
                                      "vetted: sb[1-4]; cordoned: (none)"]


# ------------------------------------------------------------------ real Slurm: 8 nodes, 2 leaves
# One private 8-node cluster with a tree topology of two leaf switches (scripts/slurm_local.sh
# writes topology.conf: leaf1 = sb[1-4], leaf2 = sb[5-8]) for the test below. Its nodes share
# this machine's cores, so the vetting probes them one at a time. Probes as small as still
# show a 2x slowdown: Inception V3 at 75 px, batch 2, 2 steps per window, 5 repeats, half a
# second of sustained GEMM. 8 nodes and the default 5 rounds: the leaf schedule (2 rounds inside
# the leaves, 3 across).
#
# One vetting only, the faulted one: it also carries what a vetting without a fault checked
# here before (Slurm's own topology, the leaf schedule, rounds run = rounds printed, the files,
# each node's figures, the page). That no node is cordoned when there is no fault is a
# false-alarm rate: benchmarks/vet_accuracy.py measures and prints it (`--nodes 8 --leaves 2
# --threshold 35` for this cluster; its --smoke runs in tests/test_benchmarks.py).

# Pair busbw here moves by up to 2x between windows seconds apart (gloo over loopback on 2
# shared cores: 58-112 ms for the same 40 allreduces of 2 MB, two ranks alone), so 5 repeats
# cannot tell a 10% fault from noise: healthy pairs stood 44-50% below the median, the noise
# allowing 82-90% (the pooled spread of one repeat's log: 0.3-0.46 for pairs, 0.1-0.27 for the
# compute probes). The tests ask 35%; the link fault is a 50 ms delay per call (about 95%).
# The node fault leaves less room: sb5 twice as slow has stood at 45-52% of the median node by
# its compute probe and 46-68% by its three probes together (under a heavy load: a slept
# slowdown shows less on a busy machine), where below 60-65% was slow (docs/vetting.md); fewer
# repeats or steps per window would widen what the noise allows, so the probes stay as they are.
NETWORK_THRESHOLD = ("--threshold", "35")
# The [vet] table's probes; the sweep's model, image size and batch (Inception V3, TINY's 75 px
# and batch 2) fill the rest.
TINY_VET = {"warmup": 1, "iters": 2, "repeats": 5, "matmul_size": 384, "matmul_iters": 10,
            "allreduce_size": "2M", "allreduce_iters": 5, "timeout": 300, "sustained": 0.5}
ALL = [f"sb{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def two_leaves():
    from tests.test_slurm import _start_cluster, _stop_cluster

    base = _start_cluster(8, leaves=2)
    yield base / "slurm.conf"
    _stop_cluster(base)


def _vet_json(out):
    import json

    return json.loads((out / "vet.json").read_text())


def _printed_rounds(stdout: str) -> dict[int, list[list[str]]]:
    """The rounds the command printed: 'vet:   round 3: sb1-sb5 sb2-sb6' -> {3: [[sb1, sb5], ..]}."""
    import re

    out = {}
    for number, pairs in re.findall(r"^vet:   round (\d+): (.*)$", stdout, re.M):
        out[int(number)] = [p.split("-") for p in pairs.split()]
    return out


def _rounds_run(doc) -> dict[int, list[list[str]]]:
    out: dict[int, list] = {}
    for p in doc["pairs"]:
        out.setdefault(p["round"], []).append(p["nodes"])
    return out


@pytest.mark.slow
@pytest.mark.serial  # its verdicts compare timings across nodes sharing these cores
def test_sweep_vets_first_cordons_a_dead_and_a_slowed_node_names_a_link_runs_on_the_rest(
        two_leaves, tmp_path):
    """`sweep --launcher slurm --vet` with three faults (the workload's [vet] table; the
    topology Slurm's own, from `scontrol show topology`): sb1's node probe killed -> cordoned as
    unreachable, the vetting goes on; sb5 twice as slow -> cordoned as a slow compute node;
    sb2-sb6 delayed 50 ms a call -> named a slow link, both kept. The leaf schedule over the 7
    reachable nodes, 5 rounds, then the retests; the rounds run are the ones printed. The
    2-worker run goes on sb2 and sb3, the 8-worker run is skipped with the reason, every record
    says which vetting placed it."""
    import json
    import subprocess
    import sys

    from tests.conftest import TINY, read_records
    from tests.test_slurm import slurm_env

    lines = ["[sweep]", 'models = ["inception_v3"]', 'frameworks = ["ddp"]', "workers = [2, 8]",
             *(f"{k} = {json.dumps(v)}" for k, v in TINY.items()), "breakdown = false",
             "report = false",
             "[vet]", 'inject_node_slowdown = "sb5:1.0"', 'inject_probe_kill = "sb1"',
             'inject_link_delay = "sb2:sb6:0.05"', f"threshold = {NETWORK_THRESHOLD[1]}",
             *(f"{k} = {json.dumps(v)}" for k, v in TINY_VET.items())]
    workload = tmp_path / "vetted.toml"
    workload.write_text("\n".join(lines) + "\n")
    out = tmp_path / "sweep"
    proc = subprocess.run(["salloc", "-N8", "--quiet", sys.executable, "-m", "scalebench",
                           "sweep", str(workload), "--launcher", "slurm", "--vet", "--out",
                           str(out), "--quiet"], capture_output=True, text=True,
                          env=slurm_env(two_leaves), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _vet_json(out / "vet")
    assert doc["status"] == "ok" and doc["decided"]
    assert doc["faults"] == {"probe_kill": ["sb1"], "node_slowdown": {"sb5": 1.0},
                             "link_delay_seconds": {"sb2:sb6": 0.05}}
    assert doc["settings"]["model"] == "inception_v3"  # the sweep's model, batch and size
    assert not doc["probing"]["together"]  # the nodes share this machine: one at a time
    # Slurm's own topology (scontrol show topology), two leaves, over the reachable nodes
    assert doc["topology"] == {"source": "scontrol show topology",
                               "leaves": {"leaf1": ALL[1:4], "leaf2": ALL[4:]}}
    assert "topology from scontrol show topology: 2 leaf switches" in proc.stdout
    assert [(v["kind"], v["nodes"], v["cordon"]) for v in doc["verdicts"]] == [
        ("unreachable", ["sb1"], True), ("slow compute node", ["sb5"], True),
        ("slow link", ["sb2", "sb6"], False)], doc["verdicts"]
    link = doc["verdicts"][2]
    assert link["pairs"] == [["sb2", "sb6"]] and link["rounds"] == [4]  # the 2nd cross round
    assert "srun: error: sb1: task 0: Killed" in doc["unreachable"]["sb1"]
    assert list(doc["cordoned"]) == ["sb1", "sb5"]
    assert doc["vetted"] == ["sb2", "sb3", "sb4", "sb6", "sb7", "sb8"]
    assert (out / "vet" / "vetted-nodes.txt").read_text() == "sb[2-4,6-8]\n"
    assert (out / "vet" / "cordoned-nodes.txt").read_text() == "sb[1,5]\n"
    # the step of all nodes failed; sb1, which srun named, failed alone; the other seven
    # passed in one step, and no pair includes sb1
    assert [(s["probe"], s["nodes"], s["status"]) for s in doc["steps"][:3]] == [
        ("nodes", ALL, "failed"), ("nodes", ["sb1"], "failed"), ("nodes", ALL[1:], "ok")]
    assert all("sb1" not in p["nodes"] for p in doc["pairs"])
    # the leaf schedule over the 7 reachable nodes (leaves of 3 and 4), then the retests of
    # sb2 and sb6; the rounds run are the ones printed and the ones vet.json names
    schedule_doc = doc["schedule"]
    assert schedule_doc["kind"] == "leaves" and len(schedule_doc["rounds"]) == 5
    assert _rounds_run(doc) == _printed_rounds(proc.stdout) == {
        i: r for i, r in enumerate(schedule_doc["rounds"] + schedule_doc["retest_rounds"],
                                   start=1)}
    assert sum(map(len, schedule_doc["rounds"])) == 15 and schedule_doc["network_rounds"] <= 7
    for number, pairs in _rounds_run(doc).items():  # inside the leaves first, then across
        across = [p for p in pairs if (p[0] in ALL[:4]) != (p[1] in ALL[:4])]
        assert (not across) if number <= 2 else number > 5 or len(across) == 3  # all of sb2-4
    for node, info in doc["nodes"].items():
        if node == "sb1":  # unreachable: no figures, no partner
            assert info["devices"] == [] and info["partners"] == [] and info["unreachable"]
            continue
        [device] = info["devices"]
        assert len(device["compute_images_per_sec"]) == 5 and device["threads"] == 1
        assert len(device["sustained_flops_per_sec"]) == 5
        partners = [p["node"] for p in info["partners"]]
        assert len(partners) == len(set(partners)) >= 4  # 7 nodes: one sits out a round
    html = (out / "vet" / "vet.html").read_text()
    assert "data:image/png;base64" in html and "round 3: " in html
    assert "Topology from scontrol show topology: leaf1: sb2, sb3, sb4; leaf2: " in html
    assert "<b>unreachable: sb1</b> (cordoned)" in html  # the verdicts, as the page words them
    assert "<b>slow compute node: sb5</b> (cordoned)" in html
    assert "<b>slow link: sb2, sb6</b> (kept)" in html
    assert "vet nodes on 8 nodes" in proc.stdout
    assert "vetted: sb[2-4,6-8]; cordoned: sb[1,5]" in proc.stdout
    two, eight = read_records(out / "results.jsonl")
    assert two["status"] == "ok", two["error"]
    assert two["scheduler"]["nodes"] == ["sb2", "sb3"]
    assert eight["status"] == "skipped" and eight["world_size"] == 8
    assert eight["error"].startswith(f"vetting {doc['id']}: 8 workers need 8 nodes, 6 of the 8 "
                                     "remain vetted (sb1 cordoned (unreachable); sb5 cordoned "
                                     "(slow compute node))"), eight["error"]
    for record in (two, eight):
        assert record["vetting"]["id"] == doc["id"]
        assert list(record["vetting"]["excluded"]) == ["sb1", "sb5"]


def test_runs_go_on_vetted_nodes_and_one_that_needs_more_is_unplaced(monkeypatch):
    from scalebench.hardware import devices
    from scalebench.slurm import steps
    from scalebench.spec import config
    from scalebench.tasks import train
    from scalebench.vet.files import Vetting

    _slurm_env(monkeypatch, **FAKE_JOB)
    sweep = config.build_spec({"frameworks": "ddp", "workers": [1, 3, 4], "launcher": "slurm"})
    vetting = Vetting("vet-9-x", "9", ("sb1", "sb2", "sb3", "sb4"), ("sb1", "sb2", "sb4"),
                      {"sb3": "slow compute node: compute probe ..."})
    device = devices.resolve("cpu")
    one, three, four = (train.launch_spec(sweep, "ddp", w, device, vetting) for w in (1, 3, 4))
    assert steps.placement_for(one)[1].nodes == ("sb1",) and one.unplaced is None
    assert three.slurm_nodes == ("sb1", "sb2", "sb4") and three.nodes == 3
    assert steps.placement_for(three)[1].nodes == ("sb1", "sb2", "sb4")
    assert four.unplaced == ("vetting vet-9-x: 4 workers need 4 nodes, 3 of the 4 remain "
                             "vetted (sb3 cordoned (slow compute node))")
    plain = train.launch_spec(sweep, "ddp", 3, device)  # no vetting: the first three nodes
    assert steps.placement_for(plain)[1].nodes == ("sb1", "sb2", "sb3")


def test_slurm_script_vet_makes_the_job_vet_first(tmp_path, monkeypatch, capsys):
    from scalebench import cli

    _slurm_env(monkeypatch)
    workload = tmp_path / "w.toml"
    workload.write_text('[sweep]\nmodels = ["inception_v3"]\nworkers = [1, 2]\n'
                        '[vet]\nrepeats = 4\nthreshold = 15\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["slurm-script", str(workload), "--nodes", "4", "--vet", "--script",
                     "job.sh"]) == 0
    text = (tmp_path / "job.sh").read_text()
    assert " --vet" in text and "--launcher slurm" in text
    from scalebench.commands.slurm_script import sweep_values
    from scalebench.spec import config

    spec = config.build_spec(sweep_values(str(workload), ["--vet"]))
    assert (spec.vet.repeats, spec.vet.threshold, spec.vet.model) == (4, 15.0, "inception_v3")
