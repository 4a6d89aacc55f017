"""``--xla-timing-base-python``: the A/B speed gate's method. The case is measured in N *pairs* of fresh processes,
one of the base build (its interpreter's command) and one of this build each, the first of a pair alternating;
the record adds the base's combination and the ratio within each pair, whose median the gate judges
(:func:`pytest_xla_dynamo.timing.across.pair`): drift of the machine slower than a pair cancels in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.timing import across
from pytest_xla_dynamo.timing.process_median import ProcessMedian, Side


class ABPairs(ProcessMedian):
    """Pairs of the base build's and this build's processes (see the module docstring)."""

    def __init__(self, base_python: tuple[str, ...]) -> None:
        self.base_python = base_python

    def sides(self, index: int, records: list[CaseRecord], base: list[CaseRecord]) -> list[Side]:
        """Pair ``index``: the base's process first in odd pairs, this build's first in even ones."""
        pair: list[Side] = [((), records)]
        pair.insert(0 if index % 2 else 1, (self.base_python, base))
        return pair

    def combine(self, records: Sequence[CaseRecord], base: Sequence[CaseRecord], count: int) -> CaseRecord:
        return across.pair(records, base, count)
