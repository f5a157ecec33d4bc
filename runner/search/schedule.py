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


def halving_schedule(n: int, eta: int, min_seconds: int, full_seconds: int,
                     budget_seconds: float, warmup: int = 0, final_candidates: int = 1,
                     max_repetitions: int = 8) -> list[Rung]:
    """Rungs of successive halving over n candidates: each keeps the best ceil(k/eta).

    The last rung runs at the spec's full length; earlier rungs are eta times shorter each,
    never below min_seconds. The last rung keeps at least `final_candidates` (so short and
    long runs can be compared on them). Budget left after one repetition everywhere buys
    repetitions, later rungs first (that is where close candidates are told apart).
    """
    if n < 1:
        raise ValueError("no candidates")
    sizes = [n]
    while sizes[-1] > max(1, final_candidates):
        nxt = max(math.ceil(sizes[-1] / eta), final_candidates)
        if nxt >= sizes[-1]:
            break
        sizes.append(nxt)
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes.pop()  # a rung of one candidate decides nothing
    last = len(sizes) - 1
    seconds = [max(min_seconds, min(full_seconds, round(full_seconds / eta ** (last - i))))
               for i in range(len(sizes))]
    rungs = [Rung(k, s, 1) for k, s in zip(sizes, seconds, strict=True)]
    total = sum(r.cost(warmup) for r in rungs)
    if total > budget_seconds:
        raise BudgetError(
            f"budget of {budget_seconds:g} benchmark-seconds is smaller than one pass of "
            f"successive halving over {n} candidates ({total:g} s: "
            + ", ".join(f"{r.candidates}x{r.seconds + warmup}s" for r in rungs) + ")")
    grew = True
    while grew:
        grew = False
        for i in reversed(range(len(rungs))):
            r = rungs[i]
            if r.repetitions >= max_repetitions:
                continue
            extra = r.candidates * (r.seconds + warmup)
            if total + extra <= budget_seconds:
                rungs[i] = Rung(r.candidates, r.seconds, r.repetitions + 1)
                total += extra
                grew = True
    return rungs
