"""Price a European call under Heston dynamics by Monte Carlo, a batch of paths per item.

``python -m example_dags.shard_programs.monte_carlo_pricer --items N --items-log FILE [--checkpoint-every K]
[--item-seconds S] [--paths P] [--steps T] [--seed X]``, with the env the operator injects. Item ``i`` of
shard ``s`` simulates ``P`` paths of ``T`` Euler steps (full truncation) from
``random.Random("heston:<X>:<s>:<i>")``; its value is the discounted mean payoff: the same float every
run, so the shard's output (the sum over its items in order) is the same however often it resumed or redid
an item.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import sys
from collections.abc import Sequence

from .shard_loop import Work, add_loop_args, main

PROGRAM = "monte_carlo_pricer"
SPOT, RATE, MATURITY = 100.0, 0.02, 1.0
V0, KAPPA, THETA, XI, RHO = 0.04, 1.5, 0.04, 0.3, -0.7


def strike(shard_id: int) -> float:
    """Each shard prices its own strike (90, 95, ... 110): a strip of options."""
    return 90.0 + 5.0 * (shard_id % 5)


def price_item(shard_id: int, item: int, paths: int = 64, steps: int = 32, seed: int = 0) -> float:
    """The discounted mean payoff of ``paths`` Heston paths, seeded from (seed, shard, item)."""
    rng = random.Random(f"heston:{seed}:{shard_id}:{item}")
    dt, k = MATURITY / steps, strike(shard_id)
    root_dt, rho_bar = math.sqrt(dt), math.sqrt(1.0 - RHO * RHO)
    payoff = 0.0
    for _ in range(paths):
        log_s, v = math.log(SPOT), V0
        for _ in range(steps):
            z1 = rng.gauss(0.0, 1.0)
            z2 = RHO * z1 + rho_bar * rng.gauss(0.0, 1.0)
            vp = max(v, 0.0)
            log_s += (RATE - 0.5 * vp) * dt + math.sqrt(vp) * root_dt * z1
            v += KAPPA * (THETA - vp) * dt + XI * math.sqrt(vp) * root_dt * z2
        payoff += max(math.exp(log_s) - k, 0.0)
    return math.exp(-RATE * MATURITY) * payoff / paths


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.splitlines()[0])
    add_loop_args(p)
    p.add_argument("--paths", type=int, default=64, help="paths per item (>= 1)")
    p.add_argument("--steps", type=int, default=32, help="time steps per path (>= 1)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed (items draw from seed, shard, item)")
    return p


def make_work(args: argparse.Namespace) -> Work:
    for name in ("paths", "steps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name}={getattr(args, name)}: give >= 1")
    return functools.partial(price_item, paths=args.paths, steps=args.steps, seed=args.seed)


def run(argv: Sequence[str] | None = None) -> int:
    return main(PROGRAM, parser(), make_work, argv)


if __name__ == "__main__":
    sys.exit(run())
