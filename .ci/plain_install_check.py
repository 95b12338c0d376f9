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
