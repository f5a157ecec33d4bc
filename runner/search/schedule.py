"""Successive halving: which candidates run how long, how often, within a budget."""

from __future__ import annotations

import math
from dataclasses import dataclass


class BudgetError(ValueError):
    """The budget cannot pay for the smallest useful search."""


@dataclass(frozen=True)
class Rung:
    candidates: int  # how many candidates run in this rung
    seconds: int  # measured seconds per run (warm-up comes on top)
    repetitions: int

    def cost(self, warmup: int) -> float:
        return float(self.candidates * self.repetitions * (self.seconds + warmup))


@dataclass(frozen=True)
class RestartCost:
    """What moving between candidates costs: `groups` restart groups in the space (0: no
    option needs a restart), `seconds` per restart, at most `max_visits` restarts."""

    groups: int = 0
    seconds: float = 0.0
    max_visits: int | None = None

    def visits(self, candidates: int) -> int:
        """Restarts one rung over `candidates` costs at most (one per restart group)."""
        return min(candidates, self.groups)

    def of(self, rungs: list[Rung]) -> float:
        return sum(self.visits(r.candidates) for r in rungs) * self.seconds


def _sizes(n: int, eta: int, final_candidates: int) -> list[int]:
    sizes = [n]
    while sizes[-1] > max(1, final_candidates):
        nxt = max(math.ceil(sizes[-1] / eta), final_candidates)
        if nxt >= sizes[-1]:
            break
        sizes.append(nxt)
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes.pop()  # a rung of one candidate decides nothing
    return sizes


def halving_schedule(n: int, eta: int, min_seconds: int, full_seconds: int,
                     budget_seconds: float, warmup: int = 0, final_candidates: int = 1,
                     max_repetitions: int = 8,
                     restarts: RestartCost | None = None) -> list[Rung]:
    """Rungs of successive halving over n candidates: each keeps the best ceil(k/eta).

    The last rung runs at the spec's full length; earlier rungs are eta times shorter each,
    never below min_seconds. The last rung keeps at least `final_candidates` (so short and
    long runs can be compared on them). Restarts are paid from the same budget: when one pass
    over all n candidates (runs plus restarts) does not fit, or would restart more often than
    `max_visits`, the first rung screens fewer candidates (the most it can afford). Budget left
    after one repetition everywhere buys repetitions, later rungs first (that is where close
    candidates are told apart).
    """
    if n < 1:
        raise ValueError("no candidates")
    cost = restarts or RestartCost()

    def plan(first: int) -> list[Rung]:
        sizes = _sizes(first, eta, min(first, final_candidates))
        last = len(sizes) - 1
        seconds = [max(min_seconds, min(full_seconds, round(full_seconds / eta ** (last - i))))
                   for i in range(len(sizes))]
        return [Rung(k, s, 1) for k, s in zip(sizes, seconds, strict=True)]

    def total(rungs: list[Rung]) -> float:
        return sum(r.cost(warmup) for r in rungs) + cost.of(rungs)

    def fits(rungs: list[Rung]) -> bool:
        visits = sum(cost.visits(r.candidates) for r in rungs)
        return total(rungs) <= budget_seconds + 1e-9 and (
            cost.max_visits is None or not cost.groups or visits <= cost.max_visits)

    first = n
    while first > 2 and not fits(plan(first)):
        first -= 1
    rungs = plan(first)
    if not fits(rungs):
        raise BudgetError(
            f"budget of {budget_seconds:g} seconds is smaller than one pass of successive "
            f"halving over {first} candidates ({total(rungs):g} s: "
            + ", ".join(f"{r.candidates}x{r.seconds + warmup}s" for r in rungs)
            + (f" + {sum(cost.visits(r.candidates) for r in rungs)} restart(s) x "
               f"{cost.seconds:g}s" if cost.groups and cost.seconds else "") + ")")
    spent = total(rungs)
    grew = True
    while grew:
        grew = False
        for i in reversed(range(len(rungs))):
            r = rungs[i]
            if r.repetitions >= max_repetitions:
                continue
            # repetitions of a rung run inside each restart group's one visit: no restart
            extra = r.candidates * (r.seconds + warmup)
            if spent + extra <= budget_seconds + 1e-9:
                rungs[i] = Rung(r.candidates, r.seconds, r.repetitions + 1)
                spent += extra
                grew = True
    return rungs
