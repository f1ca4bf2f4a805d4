"""Per-rank message counts of the actor meshes this process talks to, for the notebook views.

`sent[(mesh key, rank)]` counts calls sent to that rank from this process; `answered[...]` the
replies read back from it (a reply counts when a future reading it is decoded). Plain counters
updated in the caller's thread: a lost increment under a thread race is an acceptable error for
a display, a lock on every call is not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = ["answered", "count_answered", "count_sent", "forget", "sent"]

sent: Counter[tuple[str, int]] = Counter()
answered: Counter[tuple[str, int]] = Counter()


def count_sent(key: str, ranks: Iterable[int]) -> None:
    for rank in ranks:
        sent[(key, rank)] += 1


def count_answered(key: str, rank: int) -> None:
    answered[(key, rank)] += 1


def forget(key: str, size: int) -> None:
    """Drop the counts of the `size` ranks of mesh `key` (its procs are gone)."""
    for rank in range(size):
        sent.pop((key, rank), None)
        answered.pop((key, rank), None)
