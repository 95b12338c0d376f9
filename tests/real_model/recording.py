"""A ``SysmathReward`` that remembers what each call graded, for the trainer tests to read back."""

from __future__ import annotations

from gym_sysmath.integrations.trl import SysmathReward


class RecordingReward(SysmathReward):
    """``SysmathReward`` that keeps every call's ``last_results`` (verdicts, task ids)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[list] = []

    def __call__(self, *args, **kwargs):
        rewards = super().__call__(*args, **kwargs)
        self.calls.append(list(self.last_results))
        return rewards
