"""How long a microbenchmark run is: rounds, calls per batch, and the state sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from echomq_bench.microbench.cases import Case, Sizes

__all__ = ["Settings", "FULL", "QUICK"]


@dataclass(frozen=True)
class Settings:
    rounds: int = 20
    calls: int = 50            # calls per batch
    heavy_calls: int = 12      # for cases whose every call needs 100 fresh rows
    warmup_rounds: int = 1
    sizes: Sizes = field(default_factory=Sizes)

    def calls_for(self, case: Case) -> int:
        return self.heavy_calls if case.heavy else self.calls


FULL = Settings()
QUICK = Settings(rounds=8, calls=25, heavy_calls=6)
