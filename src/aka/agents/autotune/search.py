"""Which variant to evaluate next, and which one is the best so far.

The starting point (the values the sources already have) is always evaluated first. When the whole
grid fits the budget every point is evaluated in declaration order; otherwise a seeded random sample
takes about half the budget and the rest refines around the best correct variant, one knob at a time
(first improvement wins, then the search moves there). A variant replaces the best only when its
speedup beats it by more than `margin`, so timing noise does not make the search wander.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from aka.agents.autotune.knobs import Value

Variant = tuple[Value, ...]
SHUFFLE_LIMIT = 4096
RANDOM_DRAWS = 1000


def _key(variant: Variant) -> tuple[tuple[str, Value], ...]:
    """Equality that keeps `True`, `1` and `1.0` apart."""
    return tuple((type(v).__name__, v) for v in variant)


@dataclass(frozen=True)
class SearchSpace:
    names: tuple[str, ...]
    choices: tuple[tuple[Value, ...], ...]
    start: Variant

    @classmethod
    def of(cls, names: tuple[str, ...], values: list[list[Value]], start: Variant) -> SearchSpace:
        choices = []
        for declared in values:
            seen: dict[tuple[str, Value], Value] = {}
            for value in declared:
                seen.setdefault((type(value).__name__, value), value)
            choices.append(tuple(seen.values()))
        return cls(names, tuple(choices), start)

    @property
    def size(self) -> int:
        return math.prod(len(c) for c in self.choices)

    def contains(self, variant: Variant) -> bool:
        pairs = zip(variant, self.choices, strict=True)
        return all(_key((v,)) in [_key((c,)) for c in choices] for v, choices in pairs)


class VariantSearch:
    """Proposes variants (`next_variant`) and keeps the best correct one (`record`)."""

    def __init__(self, space: SearchSpace, budget: int | None, seed: int, margin: float) -> None:
        self.space = space
        self.margin = margin
        self.total = space.size + (0 if space.contains(space.start) else 1)
        self.exhaustive = budget is None or self.total <= budget
        self.random_quota = 0 if self.exhaustive or budget is None else max(1, (budget - 1) // 2)
        self.best: Variant | None = None
        self.best_speedup = 0.0
        self._rng = random.Random(seed)
        self._tried: set[tuple[tuple[str, Value], ...]] = set()
        self._random_picks = 0
        self._grid: Iterator[Variant] = iter(itertools.product(*space.choices))
        self._shuffled: list[Variant] | None = None

    @property
    def strategy(self) -> str:
        return "exhaustive" if self.exhaustive else "random sample + coordinate descent"

    @property
    def done(self) -> bool:
        """Every point of the grid (and the start) has been proposed."""
        return len(self._tried) >= self.total

    def tried(self, variant: Variant) -> bool:
        return _key(variant) in self._tried

    def next_variant(self) -> Variant | None:
        """The next untried variant, or None when every point of the grid has been tried."""
        if not self._tried:
            return self._mark(self.space.start)
        if self.exhaustive:
            return self._mark(next((v for v in self._grid if not self.tried(v)), None))
        if self._random_picks < self.random_quota:
            self._random_picks += 1
            return self._mark(self._random_untried())
        neighbour = next(self._neighbours(), None)
        return self._mark(neighbour if neighbour is not None else self._random_untried())

    def record(self, variant: Variant, speedup: float | None) -> bool:
        """Note a variant's outcome (None: incorrect or untimed); True when it became the best."""
        if speedup is None or speedup <= 0:
            return False
        if self.best is None or speedup > self.best_speedup * (1.0 + self.margin):
            self.best, self.best_speedup = variant, speedup
            return True
        return False

    def _mark(self, variant: Variant | None) -> Variant | None:
        if variant is not None:
            self._tried.add(_key(variant))
        return variant

    def _neighbours(self) -> Iterator[Variant]:
        """Untried variants that change one knob of the best to an adjacent declared value."""
        if self.best is None:
            return
        for i, choices in enumerate(self.space.choices):
            keys = [_key((c,)) for c in choices]
            current = _key((self.best[i],))
            if current in keys:
                j = keys.index(current)
                candidates = [choices[k] for k in (j + 1, j - 1) if 0 <= k < len(choices)]
            else:
                candidates = list(choices)
            for value in candidates:
                variant = (*self.best[:i], value, *self.best[i + 1 :])
                if not self.tried(variant):
                    yield variant

    def _random_untried(self) -> Variant | None:
        if self.space.size <= SHUFFLE_LIMIT:
            if self._shuffled is None:
                self._shuffled = list(itertools.product(*self.space.choices))
                self._rng.shuffle(self._shuffled)
            while self._shuffled:
                variant = self._shuffled.pop()
                if not self.tried(variant):
                    return variant
            return None
        for _ in range(RANDOM_DRAWS):
            variant = tuple(self._rng.choice(choices) for choices in self.space.choices)
            if not self.tried(variant):
                return variant
        return None
