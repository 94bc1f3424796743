"""Which pairs of nodes meet when: a round-robin tournament (the circle method).

N nodes (N even) need N-1 rounds of N/2 disjoint pairs, every pair exactly once; with N odd a
bye joins, so there are N rounds of (N-1)/2 pairs and each node sits out one of them. The pairs
of a round share no node, so a round's allreduces can run at the same time.
"""

from __future__ import annotations

from collections.abc import Sequence

Pair = tuple[str, str]


def rounds(nodes: Sequence[str]) -> list[list[Pair]]:
    """The tournament's rounds; each pair in allocation order (earlier node first)."""
    names = list(dict.fromkeys(nodes))
    if len(names) != len(nodes):
        raise ValueError(f"nodes are not distinct: {list(nodes)}")
    if len(names) < 2:
        return []
    order = {name: i for i, name in enumerate(names)}
    players: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    n = len(players)
    out = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = players[i], players[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b) if order[a] < order[b] else (b, a))
        out.append(sorted(pairs, key=lambda p: order[p[0]]))
        # the first player stays put, the others rotate one place
        players = [players[0], players[-1], *players[1:-1]]
    return out


def resting(nodes: Sequence[str], round_pairs: Sequence[Pair]) -> list[str]:
    """The node(s) without a partner in a round (the bye with N odd)."""
    busy = {node for pair in round_pairs for node in pair}
    return [node for node in nodes if node not in busy]
