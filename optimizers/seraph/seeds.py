"""A sweep's seed list as the user writes it (``--seeds``, ``rl.seeds``): light, no engines loaded."""

from __future__ import annotations

from core.errors import UserError

#: The most seeds a sweep takes (a typo such as ``0-99999`` is refused, not started).
MAX_SEEDS = 1000


def parse_seeds(text: str) -> tuple[int, ...]:
    """``0-9``, ``0,1,2`` or ``0-3,7``: distinct seeds in the given order; a UserError otherwise."""
    if not str(text).strip():
        raise UserError("--seeds: no seed given; allowed: '0-9', '0,1,2' or '0-3,7'")
    seeds: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        lo, dash, hi = part.partition("-")
        try:
            span = range(int(lo), int(hi) + 1) if dash else range(int(part), int(part) + 1)
        except ValueError:
            raise UserError(f"--seeds: {part!r} is not a seed or a range; allowed: '0-9', '0,1,2' or '0-3,7' "
                            "(whole numbers >= 0)") from None
        if not span or span.start < 0 or span.stop > 2**32:
            raise UserError(f"--seeds: {part!r} is not an ascending range of seeds in 0..2**32-1")
        if len(span) > MAX_SEEDS:
            raise UserError(f"--seeds: more than {MAX_SEEDS} seeds in {part!r}")
        seeds.extend(s for s in span if s not in seeds)
    if len(seeds) > MAX_SEEDS:
        raise UserError(f"--seeds: more than {MAX_SEEDS} seeds")
    return tuple(seeds)
