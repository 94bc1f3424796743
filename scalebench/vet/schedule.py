"""Which pairs of nodes meet in which round: pure functions of the node names (and leaves).

Every round is a set of disjoint pairs (a node meets one partner per round), so a round's
allreduces run at the same time. Three schedules:

- all: the round-robin tournament (the circle method): N-1 rounds of N/2 pairs with N even,
  every pair exactly once; with N odd a bye joins (N rounds, each node sits out one). No
  schedule of disjoint pairs meets every pair in fewer rounds, and at 1,024 nodes that is
  1,023 rounds.
- leaves (a tree topology is known): INTRA rounds of pairs inside each leaf switch (the
  tournament's first rounds within the leaf), then rounds across leaves: the leaves are matched
  as a tournament of leaves (leaf a with leaf b in one round, with c in the next), and node i of
  the smaller leaf meets node (i + shift) of the larger, the shift growing by one each time the
  leaf matchings have all been used. In a cross round each leaf talks to one other leaf and its
  nodes' partners have distinct positions: under destination-based static routing no two pairs
  of a round share an uplink, and random pairs would (their collisions look like slow links).
  Nodes left over in a larger leaf meet one another inside it.
- rounds (no topology): the tournament's first K rounds: K rounds of disjoint pairs, every node
  meeting K distinct partners.

`choose` picks; `retests` adds one or two rounds that pair each suspect with nodes already
known good, to tell a slow node from a slow link (plus a few pairs of good nodes as the retest
step's reference, not all of them: the step then spans few nodes).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scalebench.spec.errors import UserError

Pair = tuple[str, str]
Round = tuple[Pair, ...]
MODES = ("auto", "all", "few")
DEFAULT_ROUNDS = 5  # rounds of the constant schedule, before retests
INTRA_ROUNDS = 2  # of them, rounds inside each leaf (with a topology)
RETEST_ROUNDS = 2  # suspects against known-good nodes: one partner per round
# pairs of good nodes in a retest round besides the suspects' (at least as many as those): the
# retest step's median pair, enough to put it on the first step's scale; more would only make
# the step span more nodes (its launch grows with them)
REFERENCE_PAIRS = 8


@dataclass(frozen=True)
class Schedule:
    kind: str  # "all" (tournament), "leaves" (topology-aware) or "rounds" (K disjoint rounds)
    rounds: tuple[Round, ...]
    why: str  # why this schedule, in words
    leaves: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # empty: no topology

    @property
    def pairs(self) -> int:
        return sum(len(r) for r in self.rounds)


def _distinct(nodes: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(nodes))
    if len(names) != len(nodes):
        twice = sorted({n for n in nodes if list(nodes).count(n) > 1})
        raise UserError(f"nodes: node {twice[0]!r} named twice; every node once")
    return names


def _circle(names: Sequence[str]) -> Iterable[list[tuple[str, str]]]:
    """The circle method's rounds, unsorted, each pair as (earlier, later) in `names`."""
    if len(names) < 2:
        return
    order = {name: i for i, name in enumerate(names)}
    players: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    n = len(players)
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = players[i], players[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if order[a] < order[b] else (b, a))
        yield pairs
        # the first player stays put, the others rotate one place
        players = [players[0], players[-1], *players[1:-1]]


def rounds(nodes: Sequence[str]) -> list[list[Pair]]:
    """The tournament's rounds; each pair in allocation order (earlier node first)."""
    names = _distinct(nodes)
    order = {name: i for i, name in enumerate(names)}
    return [sorted(r, key=lambda p: order[p[0]]) for r in _circle(names)]


def resting(nodes: Sequence[str], round_pairs: Sequence[Pair]) -> list[str]:
    """The node(s) without a partner in a round (the bye with N odd)."""
    busy = {node for pair in round_pairs for node in pair}
    return [node for node in nodes if node not in busy]


def disjoint_rounds(nodes: Sequence[str], k: int) -> list[list[Pair]]:
    """K rounds of disjoint pairs, every node meeting distinct partners (the tournament's
    first K rounds; all of it when K is more than it has)."""
    if k < 1:
        raise UserError(f"rounds: expected an integer >= 1, got {k}")
    return rounds(nodes)[:k]


def _pair(a: str, b: str, order: Mapping[str, int]) -> Pair:
    return (a, b) if order[a] < order[b] else (b, a)


def leaf_rounds(leaves: Mapping[str, Sequence[str]], k: int) -> list[list[Pair]]:
    """K rounds over a tree topology: min(INTRA_ROUNDS, K - 1) inside the leaves (all K with
    one leaf), the rest across leaves by shift permutations."""
    if k < 1:
        raise UserError(f"rounds: expected an integer >= 1, got {k}")
    groups = [list(v) for v in leaves.values() if v]
    names = _distinct([n for g in groups for n in g])
    order = {name: i for i, name in enumerate(names)}
    intra = k if len(groups) < 2 else max(1, min(INTRA_ROUNDS, k - 1))
    inside = [list(itertools.islice(_circle(g), intra)) for g in groups]  # each leaf's own
    out: list[list[Pair]] = []
    for r in range(intra):
        out.append([p for t in inside if r < len(t) for p in t[r]])
    met = {frozenset(p) for rnd in out for p in rnd}
    leaf_matchings = list(_circle(list(range(len(groups)))))
    for c in range(k - intra):
        matching = leaf_matchings[c % len(leaf_matchings)]
        shift = c // len(leaf_matchings)
        pairs: list[Pair] = []
        busy: set[int] = set()
        for a, b in matching:
            small, large = sorted((groups[a], groups[b]), key=len)
            hit = set()
            for i, node in enumerate(small):
                j = (i + shift) % len(large)
                pairs.append(_pair(node, large[j], order))
                hit.add(j)
            rest = [n for j, n in enumerate(large) if j not in hit]
            pairs += _leftover(rest, met, order)
            busy |= {a, b}
        for g, group in enumerate(groups):  # the leaf without a partner leaf (odd count)
            if g not in busy:
                pairs += _leftover(group, met, order)
        met |= {frozenset(p) for p in pairs}
        out.append(sorted(pairs, key=lambda p: order[p[0]]))
    return [r for r in out if r]


def _leftover(nodes: Sequence[str], met: set[frozenset], order: Mapping[str, int]) -> list[Pair]:
    """Nodes of one leaf with no partner this round, paired inside it where they have not met."""
    free = list(nodes)
    pairs = []
    while len(free) >= 2:
        a = free.pop(0)
        b = next((n for n in free if frozenset((a, n)) not in met), None)
        if b is not None:
            free.remove(b)
            pairs.append(_pair(a, b, order))
    return pairs


def choose(nodes: Sequence[str], mode: str = "auto", k: int = DEFAULT_ROUNDS,
           leaves: Mapping[str, Sequence[str]] | None = None) -> Schedule:
    """The schedule for these nodes: `all` the tournament; `few` the constant one (leaves when
    the topology is known, else K disjoint rounds); `auto` the tournament where it needs no
    more rounds than K, else the constant one."""
    names = _distinct(nodes)
    if mode not in MODES:
        raise UserError(f"pairs: expected one of {', '.join(MODES)}, got {mode!r}")
    if k < 1:
        raise UserError(f"rounds: expected an integer >= 1, got {k}")
    tournament = len(names) - 1 if len(names) % 2 == 0 else len(names)
    if len(names) < 2:
        return Schedule("all", (), "fewer than 2 nodes: no pair")
    if mode == "all" or (mode == "auto" and tournament <= k):
        why = ("--pairs all" if mode == "all" else
               f"the tournament's {tournament} rounds are no more than the {k} of the constant "
               "schedule")
        return Schedule("all", tuple(map(tuple, rounds(names))),
                        f"every pair once ({why})", dict(leaves or {}))
    if leaves and len([v for v in leaves.values() if v]) >= 1:
        found = leaf_rounds(leaves, k)
        return Schedule("leaves", tuple(map(tuple, found)),
                        f"{len(found)} rounds over {len(leaves)} leaf switches: pairs inside "
                        "each leaf, then shift permutations across leaves",
                        {a: tuple(b) for a, b in leaves.items()})
    found = disjoint_rounds(names, k)
    return Schedule("rounds", tuple(map(tuple, found)),
                    f"{len(found)} rounds of disjoint pairs with distinct partners (no "
                    f"topology; a tournament would take {tournament})")


def retests(suspects: Sequence[str], good: Sequence[str], met: Iterable[Sequence[str]],
            leaf_of: Mapping[str, str] | None = None, count: int = RETEST_ROUNDS,
            reference: int = REFERENCE_PAIRS) -> list[list[Pair]]:
    """Up to `count` rounds in which every suspect meets one node known good that it has not
    met yet (the same leaf first), each good node once per round; then as many pairs of good
    nodes left over (of the suspects' leaves first), where they have not met, as the
    suspects' pairs or `reference`, whichever is more: the step's median pair, against which
    its pairs are put on the first step's scale. The other good nodes stay out of the step,
    so it spans few nodes however large the allocation."""
    leaf_of = leaf_of or {}
    seen = {frozenset(p) for p in met}
    order = {n: i for i, n in enumerate(dict.fromkeys([*good, *suspects]))}
    out = []
    for _ in range(count):
        free = [g for g in good if g not in suspects]
        pairs = _suspect_pairs(suspects, free, seen, leaf_of, order)
        if not pairs:
            break
        near = {leaf_of.get(s) for s in suspects}
        free.sort(key=lambda g: leaf_of.get(g) not in near)  # the suspects' leaves first
        pairs += _reference_pairs(free, max(reference, len(pairs)), seen, leaf_of, order)
        out.append(pairs)
    return out


def _suspect_pairs(suspects: Sequence[str], free: list[str], seen: set[frozenset],
                   leaf_of: Mapping[str, str], order: Mapping[str, int]) -> list[Pair]:
    """Each suspect with an unmet good node of `free` (its own leaf first); taken from free."""
    pairs = []
    for s in suspects:
        options = [g for g in free if frozenset((s, g)) not in seen]
        options.sort(key=lambda g: leaf_of.get(g) != leaf_of.get(s))
        if options:
            g = options[0]
            free.remove(g)
            seen.add(frozenset((s, g)))
            pairs.append(_pair(s, g, order))
    return pairs


def _reference_pairs(free: list[str], wanted: int, seen: set[frozenset],
                     leaf_of: Mapping[str, str], order: Mapping[str, int]) -> list[Pair]:
    """Up to `wanted` pairs of unmet good nodes of `free`, the same leaf first."""
    rest = list(free)
    pairs: list[Pair] = []
    while len(rest) >= 2 and len(pairs) < wanted:
        a = rest.pop(0)
        b = next((n for n in rest if frozenset((a, n)) not in seen
                  and leaf_of.get(n) == leaf_of.get(a)), None)
        b = b or next((n for n in rest if frozenset((a, n)) not in seen), None)
        if b is not None:
            rest.remove(b)
            seen.add(frozenset((a, b)))
            pairs.append(_pair(a, b, order))
    return pairs
