"""Run from outside the source tree against a non-editable install: every registered id
makes, resets, and scores its reference action 1.0 on the first task."""

import gymnasium as gym

import gym_sysmath

assert "site-packages" in gym_sysmath.__file__, gym_sysmath.__file__
for env_id in gym_sysmath.env_ids():
    env = gym.make(env_id)
    env.reset(seed=0)
    for _ in range(3):  # multi-turn families take the code as a tool turn, then a submission
        _, reward, terminated, truncated, info = env.step(env.unwrapped.reference_action())
        if terminated or truncated:
            break
    assert reward == 1.0 and terminated and not truncated, (env_id, info)
    env.close()
    print(f"plain install: {env_id} ok")

# A dataset exported from the checkout must grade in the plain install: the same task-set labels,
# and the plain install's tasks measure the digest recorded for them (so nothing they are made of
# was left out of the wheel).
import json  # noqa: E402
import os  # noqa: E402

from gym_sysmath.families import families, task_set  # noqa: E402
from gym_sysmath.task_sets.lock import check  # noqa: E402

expected = json.loads(os.environ["GYM_SYSMATH_CHECKOUT_TASK_SETS"])
installed = {row.name: task_set(row.name) for row in families()}
assert installed == expected, f"task sets differ: checkout {expected}, plain install {installed}"
problems = check()
assert not problems, "the plain install's task sets are not the recorded ones:\n" + "\n".join(problems)
print(f"plain install: task sets {installed} match the checkout and their recorded digests")

# Generated files are generated: CompGeom's bad fixtures are built in memory, never shipped.
from pathlib import Path  # noqa: E402

shipped = sorted(Path(gym_sysmath.__file__).parent.glob("tasks/compgeom/*/fixtures/bad_*"))
assert not shipped, f"the wheel ships {len(shipped)} generated bad fixtures, e.g. {shipped[0]}"
print("plain install: no generated bad fixture shipped")
