"""What InTune learns from configurations that failed: rules that predict the next failure.

A configuration can fail without running out of memory: the pipeline rejects it (tf.data
refuses more parallel interleave calls than its cycle length) or it crashes. InTune is not told
why, so it learns: from each failed configuration it forms candidate rules of two simple
families, "knob ``a`` above knob ``b``" (between thread and other knobs, whose units compare)
and "knob ``a`` at ``v`` or more", and keeps those that no configuration that ran satisfies.
A rule that covers two failures or more is *confirmed*: configurations it matches are masked. A
rule that covers one failure only makes its configurations less attractive (the tuner scales
their predicted throughput by ``failure_penalty``), so a wrong guess costs a little, not the
search. A failure for memory is not a rule: it scales the memory model instead (the masker).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping

from ingestion.knobs import KnobSpace

MEMORY_FAILURES = ("memory limit",)


@dataclass(frozen=True)
class Rule:
    """``above``: knob ``a`` > knob ``b``; ``at_least``: knob ``a`` >= ``value``."""

    kind: str
    a: str
    b: str = ""
    value: int = 0

    def matches(self, config: Mapping[str, int]) -> bool:
        if self.kind == "above":
            return int(config[self.a]) > int(config[self.b])
        return int(config[self.a]) >= self.value

    def __str__(self) -> str:
        return f"{self.a} > {self.b}" if self.kind == "above" else f"{self.a} >= {self.value}"


def is_memory_failure(reason: str | None) -> bool:
    return bool(reason) and any(m in str(reason) for m in MEMORY_FAILURES)


class FailureRules:
    """Failed and running configurations of one space, and the rules they support."""

    def __init__(self, space: KnobSpace):
        self.space = space
        self.failed: list[dict[str, int]] = []
        self.ran: list[dict[str, int]] = []
        self._comparable = [k.name for k in space.knobs if k.kind in ("cpu", "other")]
        self._rules: dict[Rule, int] = {}

    def add(self, config: Mapping[str, int], *, failed: bool) -> None:
        (self.failed if failed else self.ran).append(dict(config))
        self._rules = self._supported()

    def _candidates(self, config: Mapping[str, int]) -> list[Rule]:
        rules = [Rule("above", a, b) for a, b in itertools.permutations(self._comparable, 2) if config[a] > config[b]]
        rules += [Rule("at_least", k.name, value=int(config[k.name])) for k in self.space.knobs
                  if int(config[k.name]) > k.values[0]]
        return rules

    def rules(self) -> dict[Rule, int]:
        """Each rule no running configuration contradicts, with how many failures it covers."""
        return dict(self._rules)

    def _supported(self) -> dict[Rule, int]:
        counts: dict[Rule, int] = {}
        for config in self.failed:
            for rule in self._candidates(config):
                if rule not in counts and not any(rule.matches(c) for c in self.ran):
                    counts[rule] = sum(rule.matches(f) for f in self.failed)
        return counts

    def predicted(self, config: Mapping[str, int]) -> int:
        """0: no rule matches; 1: an unconfirmed rule does; 2: a confirmed rule does (mask it)."""
        level = 0
        for rule, covered in self._rules.items():
            if rule.matches(config):
                level = max(level, 2 if covered >= 2 else 1)
                if level == 2:
                    break
        return level

    def report(self) -> list[str]:
        return [f"{rule} (covers {n} failure{'s' if n > 1 else ''})" for rule, n in self.rules().items()]
