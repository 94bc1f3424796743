"""The verdict over a vetting's figures: a pure function, fed by run.py and by unit tests.

Every figure is a rate (higher is better) with its repeats. Noise on a machine's rates is a
factor (a contended core makes a window 1.3x as long, not 0.3 units shorter), so spreads are
taken on the logarithms of the rates. For one kind of figure over the items measured (devices,
nodes or pairs):

- the repeats are interleaved (repeat r of every item measured in one short stretch of
  time), so each repeat is first taken relative to the median of all items in that repeat:
  a load that comes and goes moves every item of a repeat alike and cancels (without aligned
  repeats the raw rates are used);
- an item's standing is the median of its K relative repeats, its spread the robust standard
  deviation of their logs (1.4826 x their median absolute deviation, MAD), the standard error
  of its median 1.2533 x spread / sqrt(K);
- the reference is the median standing over the items, the spread between items 1.4826 x
  the MAD of the logs of their standings;
- an item is **slow** when its standing lies below the reference by more than the threshold
  (a fraction) *and* ln(reference / standing) exceeds Z x sqrt(between^2 + its standard
  error^2): more than the measured noise allows. Median and MAD ignore a minority of bad
  items; neither rule alone decides. Figures shown are the medians of the raw repeats.

Localisation: a node with a slow device in the compute probe (the sweep's training step) or
the matmul probe is a **slow compute node**. A node's network figure is, repeat by repeat, the
median busbw over its pairs, so one bad partner does not move it; a node slow there, and slow
by its fastest pair too, while its compute is fine is a **slow network node** (its NIC: every
pair it is in is slow). The fastest pair keeps a slow link plus one noisy window on another
of its pairs (the median of a node's three pairs then falls) from cordoning a node. The pairs
between the remaining nodes are then compared with their median: a slow one is a **slow link**
(its two nodes' other pairs are fine). Slow compute and network nodes are cordoned, a slow
link's nodes kept. With fewer than 3 nodes there is no majority to compare with: figures only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

Unit = tuple[str, int]  # (node, device index): a CPU node has one device, 0
Pair = tuple[str, str]
MIN_NODES = 3
Z = 3.0  # how many robust standard deviations of noise a slow item must lie beyond
MAD_TO_SD = 1.4826  # MAD x this estimates the standard deviation of normal noise
MEDIAN_SE = 1.2533  # the standard error of a median of K normal values: this x sd / sqrt(K)
COMPUTE, MATMUL, NETWORK, LINK = "compute", "matmul", "network", "link"
SLOW_COMPUTE, SLOW_NETWORK, SLOW_LINK = "slow compute node", "slow network node", "slow link"
RATE_UNITS = {COMPUTE: "images/s", MATMUL: "FLOP/s", NETWORK: "B/s", LINK: "B/s"}
PROBE_WORDS = {COMPUTE: "compute probe", MATMUL: "matmul probe", NETWORK: "median busbw over "
               "its pairs", LINK: "allreduce busbw"}


@dataclass(frozen=True)
class Figures:
    """What the probes measured, each figure with its repeats."""

    nodes: tuple[str, ...]
    compute: Mapping[Unit, Sequence[float]] = field(default_factory=dict)  # images/s
    matmul: Mapping[Unit, Sequence[float]] = field(default_factory=dict)  # FLOP/s
    pairs: Mapping[Pair, Sequence[float]] = field(default_factory=dict)  # busbw, bytes/s


@dataclass(frozen=True)
class Check:
    """One item against the median of its kind."""

    figure: float  # median of its repeats
    reference: float  # median of the items' figures
    ratio: float  # its standing against the median item's, repeat by repeat
    spread: float  # robust sd of the logs of its relative repeats
    between: float  # robust sd of the logs of the items' standings
    threshold: float  # fraction of the reference
    slow: bool
    repeats: int = 1

    @property
    def error(self) -> float:
        """The standard error of its figure (a median of its repeats)."""
        return MEDIAN_SE * self.spread / math.sqrt(self.repeats)

    @property
    def deficit(self) -> float:
        return 1.0 - self.ratio

    @property
    def noise(self) -> float:
        """How far below the reference noise may reach, in log units."""
        return Z * math.hypot(self.between, self.error)

    @property
    def allowed(self) -> float:
        """How far below the reference noise may reach, as a fraction of the reference."""
        return 1.0 - math.exp(-self.noise)

    @property
    def beyond_threshold(self) -> bool:
        return self.deficit > self.threshold


@dataclass(frozen=True)
class Verdict:
    kind: str  # SLOW_COMPUTE, SLOW_NETWORK or SLOW_LINK
    nodes: tuple[str, ...]
    cordon: bool
    because: str  # which figures decided it, in words


@dataclass(frozen=True)
class Decision:
    decided: bool  # False: too few nodes for a verdict (figures only)
    verdicts: tuple[Verdict, ...]
    notes: tuple[str, ...]  # near misses, what could not be judged and why
    checks: Mapping[str, Mapping]  # kind -> item -> Check (COMPUTE, MATMUL: units; ...)

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


def compare(series: Mapping, threshold: float) -> dict:
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
    between = MAD_TO_SD * mad([math.log(v) for v in standing.values()])
    reference = statistics.median(statistics.median(v) for v in usable.values())
    out = {}
    for key, values in relative.items():
        check = Check(statistics.median(usable[key]), reference, standing[key] / middle,
                      MAD_TO_SD * mad([math.log(v) for v in values]), between, threshold, False,
                      len(values))
        slow = check.beyond_threshold and -math.log(check.ratio) > check.noise
        out[key] = replace(check, slow=slow)
    return out


def network_series(nodes: Sequence[str], pairs: Mapping[Pair, Sequence[float]],
                   over: Callable[[Iterable[float]], float] = statistics.median
                   ) -> dict[str, list[float]]:
    """Per node and repeat, the median (or `over`: max, its fastest pair) busbw over the pairs
    it is in."""
    out = {}
    for node in nodes:
        mine = [list(v) for p, v in pairs.items() if node in p and v]
        if mine:
            repeats = min(len(v) for v in mine)
            out[node] = [over(v[r] for v in mine) for r in range(repeats)]
    return out


def rate_text(value: float, kind: str) -> str:
    unit = RATE_UNITS[kind]
    if unit == "images/s":
        return f"{value:.3g} images/s"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{'FLOP/s' if unit == 'FLOP/s' else 'B/s'}"
    return f"{value:.3g} {unit}"


def check_text(check: Check, kind: str, against: str) -> str:
    """'compute probe 16.2 images/s against the median node's 24.5 images/s, 66% of it repeat
    by repeat: 34% below, beyond the 10% threshold and the 5% the spread allows'"""
    return (f"{PROBE_WORDS[kind]} {rate_text(check.figure, kind)} against the median "
            f"{against}'s {rate_text(check.reference, kind)}, {100 * check.ratio:.0f}% of it "
            f"repeat by repeat: {100 * check.deficit:.0f}% below, beyond the "
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


def decide(figures: Figures, threshold: float) -> Decision:
    """The verdicts over a vetting's figures; threshold is a fraction (0.1 for 10%)."""
    nodes = figures.nodes
    if len(nodes) < MIN_NODES:
        return Decision(False, (), (f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: with "
                                    f"fewer than {MIN_NODES} there is no majority to compare "
                                    "with, so figures only and no verdict",), {})
    checks: dict[str, dict] = {COMPUTE: compare(figures.compute, threshold),
                               MATMUL: compare(figures.matmul, threshold)}
    notes: list[str] = []
    verdicts: list[Verdict] = []
    per_node = {node: sum(1 for u in figures.compute if u[0] == node) for node in nodes}

    slow_compute: dict[str, list[str]] = {}
    for kind in (COMPUTE, MATMUL):
        if not checks[kind]:
            notes.append(f"{PROBE_WORDS[kind]}: fewer than {MIN_NODES} devices measured, "
                         "no verdict from it")
        against = "device" if any(n > 1 for n in per_node.values()) else "node"
        for unit, check in checks[kind].items():
            name = unit_name(unit, per_node.get(unit[0], 1))
            if check.slow:
                words = check_text(check, kind, against)
                slow_compute.setdefault(unit[0], []).append(
                    words if name == unit[0] else f"{name}: {words}")
            elif check.beyond_threshold:
                notes.append(near_miss_text(name, check, kind))

    checks[NETWORK] = compare(network_series(nodes, figures.pairs), threshold)
    fastest = compare(network_series(nodes, figures.pairs, max), threshold)
    if figures.pairs and not checks[NETWORK]:
        notes.append("pairs: too few nodes with pair figures for a network verdict")
    slow_network: dict[str, str] = {}
    for node, check in checks[NETWORK].items():
        if check.slow and fastest[node].slow:
            slow_network[node] = (f"{check_text(check, NETWORK, 'node')}; its fastest pair "
                                  f"{100 * fastest[node].deficit:.0f}% below the median node's")
        elif check.slow:
            notes.append(f"{node}: {PROBE_WORDS[NETWORK]} {100 * check.deficit:.0f}% below the "
                         f"median, but its fastest pair is not slow ({100 * fastest[node].deficit:.0f}"
                         "% below): not a slow network node; its pairs are judged as links")
        elif check.beyond_threshold:
            notes.append(near_miss_text(node, check, NETWORK))

    for node in nodes:
        if node in slow_compute:
            words = "; ".join(slow_compute[node])
            if node in slow_network:
                words += f"; its pairs are slow too ({slow_network[node]})"
            verdicts.append(Verdict(SLOW_COMPUTE, (node,), True, words))
        elif node in slow_network:
            verdicts.append(Verdict(SLOW_NETWORK, (node,), True,
                                    f"{slow_network[node]}, while its compute is fine"))

    bad = set(slow_compute) | set(slow_network)
    between_good = {p: v for p, v in figures.pairs.items() if not bad & set(p)}
    checks[LINK] = compare(between_good, threshold)
    if figures.pairs and between_good and not checks[LINK]:
        notes.append(f"links: fewer than {MIN_NODES} pairs between nodes found fine, no link "
                     "verdict")
    slow_links = [pair for pair, check in checks[LINK].items() if check.slow]
    for pair, check in checks[LINK].items():
        if check.slow:
            others = [_others_text(node, pair, checks[LINK], slow_links) for node in pair]
            verdicts.append(Verdict(SLOW_LINK, pair, False, (
                f"{check_text(check, LINK, 'pair')}, while {others[0]} and {others[1]}: the "
                "link between them, not either node")))
        elif check.beyond_threshold:
            notes.append(near_miss_text(f"{pair[0]}-{pair[1]}", check, LINK))
    return Decision(True, tuple(verdicts), tuple(notes), checks)


def _others_text(node: str, pair: Pair, links: Mapping[Pair, Check], slow: Sequence[Pair]) -> str:
    """How the node's other measured pairs fared: 'the other 2 pairs of sb1 are fine'."""
    others = [p for p in links if node in p and p != pair]
    bad = [p for p in others if p in slow]
    if not bad:
        return f"the other {len(others)} pair{'s' if len(others) != 1 else ''} of {node} are fine"
    return f"{len(bad)} of the other {len(others)} pairs of {node} are slow too"
