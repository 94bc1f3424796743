"""The verdict over a vetting's figures: a pure function, fed by run.py, the simulator
(benchmarks/vet_scale.py) and unit tests.

Every figure is a rate (higher is better) with its repeats. Noise on a machine's rates is a
factor (a contended core makes a window 1.3x as long, not 0.3 units shorter), so spreads are
taken on the logarithms of the rates. For one kind of figure over the items measured (devices,
nodes or pairs):

- the repeats are interleaved (repeat r of every item measured in one short stretch of
  time), so each repeat is first taken relative to the median of all items in that repeat:
  a load that comes and goes moves every item of a repeat alike and cancels (without aligned
  repeats the raw rates are used);
- an item's standing is the median of its K relative repeats;
- the noise of one repeat is pooled over all items: 1.4826 x the median absolute difference
  between two repeats of one item, / sqrt(2) (every item's K(K-1)/2 differences together). One
  item's K repeats cannot estimate their own spread (5 values give a spread that itself varies
  by half); N x K(K-1)/2 differences give one that a re-run reproduces. The standard error of
  a standing is 1.2533 x that / sqrt(K);
- the reference is the median standing; between items, the spread of the standings beyond what
  that standard error explains: sqrt(max(0, (1.4826 x MAD of their logs)^2 - error^2));
- an item is **slow** when its standing lies below the reference by more than the threshold
  (a fraction) *and* ln(reference / standing) exceeds Z x sqrt(between^2 + error^2): more than
  the measured noise allows (Z = 4.5 for a standing pooled over probes or pairs, 6 for one
  probe's or one pair's few repeats). Median and MAD ignore a minority of bad items; neither rule alone
  decides. Figures shown are the medians of the raw repeats.

Localisation. A node is a **slow compute node** when one of its compute probes (the sweep's
training step, the short GEMM, the sustained GEMM) is slow, or all of them taken together
(every probe's relative repeats pooled: three probes' evidence against one noise). A node's
network figure is, repeat by repeat, the median busbw over its pairs, so one bad partner does
not move it; a node slow there, and slow by its fastest pair too, while its compute is fine is a
**slow network node** (its NIC: every pair it is in is slow). The pairs between the remaining
nodes are then compared with their median (with a topology: pairs inside a leaf with pairs
inside leaves, pairs across leaves with pairs across). Slow pairs across leaves that share a
leaf, two or more of them whose nodes' pairs inside their leaves are fine, are a **slow
uplink** of that leaf (under destination routing a bad uplink port slows every cross-leaf pair
of the node whose traffic arrives on it; with two leaves every such pair runs between the
same two: both named, the measurements cannot tell the sides apart); any other slow pair is a
**slow link** (its two nodes' other pairs are fine). A node whose probe failed, crashed or
hung is **unreachable**. Slow compute, network and unreachable nodes are cordoned; a slow link's or
uplink's nodes kept. With fewer than 3 nodes there is no majority to compare with: figures
only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

Unit = tuple[str, int]  # (node, device index): a CPU node has one device, 0
Pair = tuple[str, str]
MIN_NODES = 3
Z = 4.5  # how many robust standard deviations of noise a slow item must lie beyond ...
Z_FEW = 6.0  # ... or, for a standing of one probe's few repeats (a median of 5 heavy-tailed
# windows strays further than a normal one: the simulator's false alarms say how far)
MAD_TO_SD = 1.4826  # MAD x this estimates the standard deviation of normal noise
MEDIAN_SE = 1.2533  # the standard error of a median of K normal values: this x sd / sqrt(K)
COMPUTE, MATMUL, SUSTAINED, NODE = "compute", "matmul", "sustained", "node"
NETWORK, LINK = "network", "link"
COMPUTE_KINDS = (COMPUTE, MATMUL, SUSTAINED)
SLOW_COMPUTE, SLOW_NETWORK, SLOW_LINK = "slow compute node", "slow network node", "slow link"
SLOW_UPLINK, UNREACHABLE = "slow uplink", "unreachable"
RATE_UNITS = {COMPUTE: "images/s", MATMUL: "FLOP/s", SUSTAINED: "FLOP/s", NODE: "x",
              NETWORK: "B/s", LINK: "B/s"}
PROBE_WORDS = {COMPUTE: "compute probe", MATMUL: "matmul probe",
               SUSTAINED: "sustained matmul probe", NODE: "its compute probes together",
               NETWORK: "median busbw over its pairs", LINK: "allreduce busbw"}


@dataclass(frozen=True)
class Figures:
    """What the probes measured, each figure with its repeats."""

    nodes: tuple[str, ...]
    compute: Mapping[Unit, Sequence[float]] = field(default_factory=dict)  # images/s
    matmul: Mapping[Unit, Sequence[float]] = field(default_factory=dict)  # FLOP/s
    pairs: Mapping[Pair, Sequence[float]] = field(default_factory=dict)  # busbw, bytes/s
    sustained: Mapping[Unit, Sequence[float]] = field(default_factory=dict)  # FLOP/s
    rounds: Mapping[Pair, int] = field(default_factory=dict)  # the round each pair met in
    leaf_of: Mapping[str, str] = field(default_factory=dict)  # node -> leaf switch ({}: none)
    unreachable: Mapping[str, str] = field(default_factory=dict)  # node -> why its probe failed
    retest_from: int = 0  # the first round of the retest step (0: none)


@dataclass(frozen=True)
class Check:
    """One item against the median of its kind."""

    figure: float  # median of its repeats
    reference: float  # median of the items' figures
    ratio: float  # its standing against the median item's, repeat by repeat
    spread: float  # robust sd of the logs of one repeat, pooled over the items
    between: float  # robust sd of the logs of the items' standings beyond their error
    threshold: float  # fraction of the reference
    slow: bool
    repeats: int = 1
    z: float = Z

    @property
    def error(self) -> float:
        """The standard error of its standing (a median of its repeats)."""
        return MEDIAN_SE * self.spread / math.sqrt(self.repeats)

    @property
    def deficit(self) -> float:
        return 1.0 - self.ratio

    @property
    def noise(self) -> float:
        """How far below the reference noise may reach, in log units."""
        return self.z * math.hypot(self.between, self.error)

    @property
    def allowed(self) -> float:
        """How far below the reference noise may reach, as a fraction of the reference."""
        return 1.0 - math.exp(-self.noise)

    @property
    def beyond_threshold(self) -> bool:
        return self.deficit > self.threshold


@dataclass(frozen=True)
class Verdict:
    kind: str  # SLOW_COMPUTE, SLOW_NETWORK, SLOW_LINK, SLOW_UPLINK or UNREACHABLE
    nodes: tuple[str, ...]
    cordon: bool
    because: str  # which figures decided it, in words
    pairs: tuple[Pair, ...] = ()  # the pairs (partners) that decided it
    rounds: tuple[int, ...] = ()  # the rounds they met in
    switches: tuple[str, ...] = ()  # a slow uplink's leaf switch(es)


@dataclass(frozen=True)
class Decision:
    decided: bool  # False: too few nodes for a verdict (figures only)
    verdicts: tuple[Verdict, ...]
    notes: tuple[str, ...]  # near misses, what could not be judged and why
    checks: Mapping[str, Mapping]  # kind -> item -> Check (COMPUTE, MATMUL: units; ...)
    suspects: tuple[str, ...] = ()  # nodes worth a retest against nodes known good

    @property
    def cordoned(self) -> dict[str, str]:
        """Node -> why, in the order the verdicts name them."""
        out: dict[str, str] = {}
        for v in self.verdicts:
            if v.cordon:
                for node in v.nodes:
                    out.setdefault(node, f"{v.kind}: {v.because}")
        return out

    def vetted(self, nodes: Sequence[str]) -> list[str]:
        cordoned = self.cordoned
        return [node for node in nodes if node not in cordoned]


def mad(values: Sequence[float]) -> float:
    centre = statistics.median(values)
    return statistics.median(abs(v - centre) for v in values)


def pooled_spread(series: Iterable[Sequence[float]]) -> float:
    """Robust sd of one repeat's log, from every item's pairwise differences of log repeats."""
    diffs = []
    for values in series:
        logs = [math.log(v) for v in values]
        diffs += [abs(a - b) for i, a in enumerate(logs) for b in logs[i + 1:]]
    return MAD_TO_SD * statistics.median(diffs) / math.sqrt(2) if diffs else 0.0


def compare(series: Mapping, threshold: float, z: float = Z) -> dict:
    """item -> Check for every item with repeats; {} with fewer than MIN_NODES items."""
    usable = {key: list(values) for key, values in series.items()
              if values and all(v > 0 for v in values)}
    if len(usable) < MIN_NODES:
        return {}
    relative = usable
    lengths = {len(values) for values in usable.values()}
    if len(lengths) == 1 and min(lengths) >= 2:
        blocks = [statistics.median(values[r] for values in usable.values())
                  for r in range(min(lengths))]
        relative = {key: [v / b for v, b in zip(values, blocks, strict=True)]
                    for key, values in usable.items()}
    standing = {key: statistics.median(values) for key, values in relative.items()}
    middle = statistics.median(standing.values())
    spread = pooled_spread(relative.values())
    typical = statistics.median(len(v) for v in relative.values())
    error = MEDIAN_SE * spread / math.sqrt(typical)
    spread_of_standings = MAD_TO_SD * mad([math.log(v) for v in standing.values()])
    between = math.sqrt(max(0.0, spread_of_standings ** 2 - error ** 2))
    reference = statistics.median(statistics.median(v) for v in usable.values())
    out = {}
    for key, values in relative.items():
        check = Check(statistics.median(usable[key]), reference, standing[key] / middle,
                      spread, between, threshold, False, len(values), z)
        slow = check.beyond_threshold and -math.log(check.ratio) > check.noise
        out[key] = replace(check, slow=slow)
    return out


def relative_series(series: Mapping) -> dict:
    """Each item's repeats over the median item's, repeat by repeat (as compare takes them)."""
    usable = {k: list(v) for k, v in series.items() if v and all(x > 0 for x in v)}
    lengths = {len(v) for v in usable.values()}
    if len(usable) < MIN_NODES or len(lengths) != 1:
        return {}
    blocks = [statistics.median(v[r] for v in usable.values()) for r in range(min(lengths))]
    return {k: [x / b for x, b in zip(v, blocks, strict=True)] for k, v in usable.items()}


def pairs_by_node(pairs: Mapping[Pair, Sequence[float]]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for pair, values in pairs.items():
        if values:
            for node in pair:
                out.setdefault(node, []).append(pair)
    return out


def network_series(nodes: Sequence[str], pairs: Mapping[Pair, Sequence[float]],
                   over: Callable[[Iterable[float]], float] = statistics.median
                   ) -> dict[str, list[float]]:
    """Per node and repeat, the median (or `over`: max, its fastest pair) busbw over the pairs
    it is in."""
    index = pairs_by_node(pairs)
    out = {}
    for node in nodes:
        mine = [list(pairs[p]) for p in index.get(node, [])]
        if mine:
            repeats = min(len(v) for v in mine)
            out[node] = [over(v[r] for v in mine) for r in range(repeats)]
    return out


def rate_text(value: float, kind: str) -> str:
    unit = RATE_UNITS[kind]
    if unit == "images/s":
        return f"{value:.3g} images/s"
    if unit == "x":
        return f"{value:.3g}x"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{'FLOP/s' if unit == 'FLOP/s' else 'B/s'}"
    return f"{value:.3g} {unit}"


def check_text(check: Check, kind: str, against: str) -> str:
    """'compute probe 16.2 images/s against the median node's 24.5 images/s, 66% of it repeat
    by repeat: 34% below, beyond the 10% threshold and the 5% the spread allows'"""
    figure = (f" {100 * check.ratio:.0f}% of the median {against}'s" if kind == NODE else
              f" {rate_text(check.figure, kind)} against the median {against}'s "
              f"{rate_text(check.reference, kind)}, {100 * check.ratio:.0f}% of it")
    return (f"{PROBE_WORDS[kind]}{figure} repeat by repeat: {100 * check.deficit:.0f}% below, "
            "beyond the "
            f"{100 * check.threshold:.0f}% threshold and the {100 * check.allowed:.0f}% the "
            "spread allows")


def near_miss_text(name: str, check: Check, kind: str) -> str:
    return (f"{name}: {PROBE_WORDS[kind]} {100 * check.deficit:.0f}% below the median, beyond "
            f"the {100 * check.threshold:.0f}% threshold but within the "
            f"{100 * check.allowed:.0f}% its spread allows: not called slow (more repeats "
            "would tell)")


def unit_name(unit: Unit, units_on_node: int) -> str:
    node, index = unit
    return node if units_on_node <= 1 else f"{node} GPU {index}"


def combined_series(figures: Figures) -> dict[Unit, list[float]]:
    """Per unit, the relative repeats of every compute probe together (each probe over its
    median unit's standing)."""
    out: dict[Unit, list[float]] = {}
    for kind in COMPUTE_KINDS:
        relative = relative_series(getattr(figures, kind))
        if not relative:
            continue
        middle = statistics.median(statistics.median(v) for v in relative.values())
        for unit, values in relative.items():
            out.setdefault(unit, []).extend(v / middle for v in values)
    lengths = {len(v) for v in out.values()}
    return out if len(lengths) == 1 else {}


def by_step(pairs: Mapping[Pair, Sequence[float]], figures: Figures) -> dict:
    """Pair figures of the retest step put on the first step's scale, repeat by repeat: each
    step's repeat r over its median pair's, times the first step's median pair. A step runs at
    another time than the other, so a drift moves all of its pairs alike; its rounds are full
    (suspects, the good nodes they meet, the rest among themselves) so it has a median."""
    if not figures.retest_from:
        return dict(pairs)
    steps = [{p: v for p, v in pairs.items()
              if (figures.rounds.get(p, 0) >= figures.retest_from) == later}
             for later in (False, True)]
    relative = [relative_series(step) for step in steps]
    if not all(relative):
        return dict(pairs)
    scale = statistics.median(statistics.median(v) for v in steps[0].values() if v)
    return {p: [x * scale for x in v] for rel in relative for p, v in rel.items()}


def decide(figures: Figures, threshold: float) -> Decision:
    """The verdicts over a vetting's figures; threshold is a fraction (0.1 for 10%)."""
    nodes = [n for n in figures.nodes if n not in figures.unreachable]
    verdicts: list[Verdict] = [Verdict(UNREACHABLE, (node,), True, why)
                               for node, why in figures.unreachable.items()]
    if len(nodes) < MIN_NODES:
        return Decision(False, tuple(verdicts), (
            f"{len(nodes)} reachable node{'s' if len(nodes) != 1 else ''}: with fewer than "
            f"{MIN_NODES} there is no majority to compare with, so figures only and no "
            "verdict",), {})
    checks: dict[str, dict] = {kind: compare(getattr(figures, kind), threshold, Z_FEW)
                               for kind in COMPUTE_KINDS}
    checks[NODE] = compare(combined_series(figures), threshold) \
        if sum(bool(getattr(figures, k)) for k in COMPUTE_KINDS) > 1 else {}
    notes: list[str] = []
    per_node = {node: sum(1 for u in figures.compute if u[0] == node) for node in nodes}

    slow_compute: dict[str, list[str]] = {}
    for kind in (*COMPUTE_KINDS, NODE):
        if getattr(figures, kind, True) and not checks[kind] and kind != NODE:
            notes.append(f"{PROBE_WORDS[kind]}: fewer than {MIN_NODES} devices measured, "
                         "no verdict from it")
        against = "device" if any(n > 1 for n in per_node.values()) else "node"
        for unit, check in checks[kind].items():
            name = unit_name(unit, per_node.get(unit[0], 1))
            if check.slow:
                words = check_text(check, kind, against)
                slow_compute.setdefault(unit[0], []).append(
                    words if name == unit[0] else f"{name}: {words}")
            elif check.beyond_threshold and kind != NODE:
                notes.append(near_miss_text(name, check, kind))

    pairs = by_step({p: v for p, v in figures.pairs.items()
                     if not set(p) & set(figures.unreachable)}, figures)
    by_node = pairs_by_node(pairs)
    checks[NETWORK] = compare(network_series(nodes, pairs), threshold)
    fastest = compare(network_series(nodes, pairs, max), threshold)
    if pairs and not checks[NETWORK]:
        notes.append("pairs: too few nodes with pair figures for a network verdict")
    slow_network: dict[str, str] = {}
    suspects: list[str] = []
    for node, check in checks[NETWORK].items():
        if check.slow and fastest[node].slow:
            slow_network[node] = (f"{check_text(check, NETWORK, 'node')}; its fastest pair "
                                  f"{100 * fastest[node].deficit:.0f}% below the median node's")
        elif check.slow:
            suspects.append(node)
            notes.append(f"{node}: {PROBE_WORDS[NETWORK]} {100 * check.deficit:.0f}% below the "
                         f"median, but its fastest pair is not slow ({100 * fastest[node].deficit:.0f}"
                         "% below): not a slow network node; its pairs are judged as links")
        elif check.beyond_threshold:
            suspects.append(node)
            notes.append(near_miss_text(node, check, NETWORK))

    def evidence(node: str) -> tuple[tuple[Pair, ...], tuple[int, ...]]:
        mine = tuple(by_node.get(node, ()))
        return mine, tuple(figures.rounds.get(p, 0) for p in mine)

    for node in nodes:
        if node in slow_compute:
            words = "; ".join(slow_compute[node])
            if node in slow_network:
                words += f"; its pairs are slow too ({slow_network[node]})"
            verdicts.append(Verdict(SLOW_COMPUTE, (node,), True, words))
        elif node in slow_network:
            verdicts.append(Verdict(SLOW_NETWORK, (node,), True,
                                    f"{slow_network[node]}, while its compute is fine",
                                    *evidence(node)))

    bad = set(slow_compute) | set(slow_network)
    between_good = {p: v for p, v in pairs.items() if not bad & set(p)}
    leaf_of = figures.leaf_of
    classes = {"": between_good}
    if leaf_of:
        classes = {"inside": {p: v for p, v in between_good.items()
                              if leaf_of.get(p[0]) == leaf_of.get(p[1])},
                   "across": {p: v for p, v in between_good.items()
                              if leaf_of.get(p[0]) != leaf_of.get(p[1])}}
        if min(len(c) for c in classes.values()) < MIN_NODES:
            classes = {"": between_good}
    checks[LINK] = {}
    for group in classes.values():
        checks[LINK].update(compare(group, threshold, Z_FEW))
    if pairs and between_good and not checks[LINK]:
        notes.append(f"links: fewer than {MIN_NODES} pairs between nodes found fine, no link "
                     "verdict")
    slow_pairs = [pair for pair, check in checks[LINK].items() if check.slow]
    for pair, check in checks[LINK].items():
        if not check.slow and check.beyond_threshold:
            notes.append(near_miss_text(f"{pair[0]}-{pair[1]}", check, LINK))
    uplinks = _uplinks(slow_pairs, leaf_of) if leaf_of else []
    on_uplink = {p for _, ps in uplinks for p in ps}
    for switches, ps in uplinks:
        named = " or ".join(switches)
        verdicts.append(Verdict(SLOW_UPLINK, tuple(dict.fromkeys(n for p in ps for n in p)),
                                False, (
            f"{len(ps)} pairs across leaves through leaf switch{'es' if len(switches) > 1 else ''}"
            f" {named} are slow ({', '.join(f'{a}-{b}' for a, b in ps)}) while their nodes' "
            "pairs inside their leaves are fine: an uplink of "
            + (f"leaf {named}" if len(switches) == 1 else
               f"leaf {named} (every slow pair runs between them: the figures cannot tell "
               "which side)")), tuple(ps), tuple(figures.rounds.get(p, 0) for p in ps),
            tuple(switches)))
    for pair in slow_pairs:
        if pair in on_uplink:
            continue
        check = checks[LINK][pair]
        others = [_others_text(node, pair, checks[LINK], slow_pairs) for node in pair]
        suspects += [n for n in pair if n not in suspects]
        verdicts.append(Verdict(SLOW_LINK, pair, False, (
            f"{check_text(check, LINK, 'pair')}, while {others[0]} and {others[1]}: the "
            "link between them, not either node"), (pair,), (figures.rounds.get(pair, 0),)))
    suspects = [n for n in dict.fromkeys(suspects) if n not in bad]
    return Decision(True, tuple(verdicts), tuple(notes), checks, tuple(suspects))


def _uplinks(slow: Sequence[Pair], leaf_of: Mapping[str, str]
             ) -> list[tuple[tuple[str, ...], list[Pair]]]:
    """Slow pairs across leaves grouped by a leaf they share: a leaf with two or more of them
    (under destination routing a bad uplink port slows the cross-leaf pairs of the node whose
    traffic it carries, and of its partners' positions); leaves with the same slow pairs named
    together."""
    across = [p for p in slow if leaf_of.get(p[0]) != leaf_of.get(p[1])]
    by_leaf: dict[str, list[Pair]] = {}
    for pair in across:
        for node in pair:
            by_leaf.setdefault(leaf_of[node], []).append(pair)
    out: list[tuple[tuple[str, ...], list[Pair]]] = []
    taken: set[Pair] = set()
    for leaf in sorted(by_leaf, key=lambda k: -len(by_leaf[k])):
        ps = [p for p in by_leaf[leaf] if p not in taken]
        if len(ps) < 2:
            continue
        same = tuple(k for k in by_leaf if k != leaf and set(by_leaf[k]) == set(ps))
        out.append(((leaf, *same), ps))
        taken |= set(ps)
    return out


def _others_text(node: str, pair: Pair, links: Mapping[Pair, Check], slow: Sequence[Pair]) -> str:
    """How the node's other measured pairs fared: 'the other 2 pairs of sb1 are fine'."""
    others = [p for p in links if node in p and p != pair]
    bad = [p for p in others if p in slow]
    if not bad:
        return f"the other {len(others)} pair{'s' if len(others) != 1 else ''} of {node} are fine"
    return f"{len(bad)} of the other {len(others)} pairs of {node} are slow too"
