"""A curriculum as simple as it can be: move up a level when the recent success rate is high.

reasoning-gym's curricula step each attribute through a list of levels on request; this one
has a single ladder (the ``difficulty`` reset option: easy, medium, hard by default; pass
``levels=gym_sysmath.tasks.csapp.LEVELS`` or ``gym_sysmath.tasks.linalg.LEVELS`` to start at
``starter``, where a 135M model first scores) and climbs it by itself: after ``window`` episodes
at a level whose mean reward reaches ``threshold`` it moves to the next level and starts
counting again. It never moves down. Nothing here is random and nothing reads a clock, so a run
replays exactly. ``examples/smollm2_grpo.py`` trains with it.

    curriculum = Curriculum()
    obs, info = env.reset(seed=s, options=curriculum.options())
    ...                                     # the episode
    curriculum.record(reward)               # may raise the level for the next reset
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from gym_sysmath.tasks.csapp.difficulty import STANDARD_LEVELS


class Curriculum:
    """A moving success rate over the last ``window`` episodes, and the level it has earned."""

    def __init__(self, *, threshold: float = 0.8, window: int = 32, levels: Sequence[str] = STANDARD_LEVELS,
                 start: str | None = None):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], not {threshold!r}")
        if window < 1:
            raise ValueError(f"window must be at least 1 episode, not {window!r}")
        if not levels or len(set(levels)) != len(levels):
            raise ValueError(f"levels must be a non-empty list of distinct names, not {list(levels)!r}")
        if start is not None and start not in levels:
            raise ValueError(f"start must be one of {list(levels)}, not {start!r}")
        self.threshold = threshold
        self.levels = tuple(levels)
        self._index = 0 if start is None else self.levels.index(start)
        self._recent: deque[float] = deque(maxlen=window)

    @property
    def level(self) -> str:
        return self.levels[self._index]

    @property
    def success_rate(self) -> float | None:
        """The mean reward of the episodes counted at this level so far (None before the first)."""
        return sum(self._recent) / len(self._recent) if self._recent else None

    def options(self) -> dict[str, str]:
        """The reset options that ask for the current level."""
        return {"difficulty": self.level}

    def record(self, reward: float) -> str:
        """Count one finished episode; returns the level for the next one."""
        self._recent.append(float(reward))
        full = len(self._recent) == self._recent.maxlen
        if full and self._index < len(self.levels) - 1 and self.success_rate >= self.threshold:  # type: ignore[operator]
            self._index += 1
            self._recent.clear()
        return self.level
