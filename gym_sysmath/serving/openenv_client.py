"""A typed OpenEnv ``EnvClient`` for ``gym-sysmath serve``, for code built on OpenEnv's own client
(needs the ``serve`` extra; ``client.RemoteSysmathEnv`` is the same session without ``openenv``).

    from gym_sysmath.serving.openenv_client import SysmathEnvClient

    with SysmathEnvClient(base_url="http://127.0.0.1:8040").sync() as env:
        result = env.reset(env_id="CsappExact-v0", seed=3)
        result = env.step("ANSWER: 0x2a")
        result.reward, result.observation.info["verdict"]

A scoring error arrives as the env gives it: ``reward`` 0.0, ``observation.truncated`` true and
``observation.info["scoring_error"]`` set; read it before counting a 0 as a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import State

from gym_sysmath.serving.protocol import CLIENT_MESSAGE_TIMEOUT_S

__all__ = ["SysmathEnvClient", "SysmathObservation"]


@dataclass
class SysmathObservation:
    """One result of ``reset`` or ``step``: the env's observation text and info dict."""

    text: str
    info: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False


class SysmathEnvClient(EnvClient[str, SysmathObservation, State]):
    """OpenEnv's client for the served envs: actions are reply strings; ``reset`` takes
    ``env_id``, ``env_kwargs``, ``seed`` and ``options``. Waits ``CLIENT_MESSAGE_TIMEOUT_S`` for a
    reply (OpenEnv's default of 60 s is below the server's 300 s lease wait)."""

    def __init__(self, base_url: str, *, token: str | None = None,
                 message_timeout_s: float = CLIENT_MESSAGE_TIMEOUT_S, **kwargs: Any):
        headers = dict(kwargs.pop("headers", None) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, headers=headers or None, **kwargs)

    def _step_payload(self, action: str) -> dict[str, Any]:
        return {"text": action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SysmathObservation]:
        observation = payload.get("observation", {})
        return StepResult(observation=SysmathObservation(text=observation.get("text", ""),
                                                         info=dict(observation.get("info", {})),
                                                         terminated=bool(observation.get("terminated", False)),
                                                         truncated=bool(observation.get("truncated", False))),
                          reward=payload.get("reward"), done=bool(payload.get("done", False)),
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
