"""Agents for ``gym-sysmath eval``: who writes each action of an episode.

An agent is built once per eval and asked for one action per turn through ``act(turn)``. It
holds no per-episode state (everything an episode needs arrives in the ``Turn``), so one
agent serves every worker thread at once and pickles whole into a Ray actor.

Built-in agents, by their ``--agent`` spec:

- ``reference``: the env's own reference action (host-side); must score 100%.
- ``random``: a seeded well-formed answer that scores only by chance (``chance_action``); the baseline.
- ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint, through the ``openai``
  package (the ``[openai]`` extra); the prompt and every later observation are user messages,
  its replies the assistant's. Each turn's reply record (the sampling fields sent, response id
  and model, ``finish_reason``, token ``usage``, latency, the wait for a request slot,
  attempts and each retry) is logged beside the action. An over-long conversation ends the
  episode (``ContextOverflow``).
- ``python:MODULE:FUNCTION``: your callable ``(observation, history, info) -> str``, where
  ``history`` is the chat so far before ``observation`` (``{"role", "content"}`` dicts:
  ``user`` for what the env said, ``assistant`` for your earlier actions) and ``info`` the
  env's latest info (task metadata, ``turn``) plus ``env_id``, ``rollout`` and ``seed``.
- ``responses:FILE.jsonl``: replays already-generated outputs (the offline path). Each line
  has ``task_id``, optionally ``env_id`` and ``rollout`` (default 0), and the action texts as
  ``actions`` (a list, one per turn) or ``response`` (one text). An eval's own
  ``results.jsonl`` is such a file. A sample whose actions run out gets the empty action,
  which every env grades ``format_error``. A line without ``env_id`` answers that task in
  every evaluated env whose eval split has it; two lines that answer the same (env, task,
  rollout), with or without ``env_id``, are an error, never two samples.

Each agent's ``fingerprint()`` is what determines its actions (never an API key): ``eval
--resume`` refuses to continue a run that another configuration started.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import itertools
import json
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from gym_sysmath.env import core_env

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion

    from gym_sysmath.chat_client import AttemptWatchingClient

KINDS = ("reference", "random", "openai", "python", "responses")
KINDS_WITH_ARGUMENT = ("python", "responses")
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Turn:
    """What an agent may see when it chooses one action."""

    env_id: str
    task_id: str
    rollout: int
    seed: int
    index: int  #: 0 for the episode's first action
    observation: str
    history: tuple[Mapping[str, str], ...]  #: chat messages before ``observation``
    info: Mapping[str, Any]
    env: gym.Env = field(repr=False, compare=False)  #: host-side handle, for privileged agents only

    def messages(self) -> list[dict[str, str]]:
        """The chat so far, ending with the current observation as a user message."""
        return [dict(message) for message in self.history] + [{"role": "user", "content": self.observation}]


@dataclass(frozen=True)
class AgentReply:
    """One action and, when the agent has one, the record of how it was made (an endpoint's
    response id, model, finish reason, token usage, latency): logged per turn."""

    text: str
    record: Mapping[str, Any] | None = None


#: Path components that tell no model from another: a label reaches back past them (hex: a hash).
_GENERIC_PART = re.compile(r"models?|weights|snapshots?|checkpoints?|hf|hub|huggingface|share|main|final|latest"
                           r"|best|merged|outputs?|exported|[0-9a-f]{12,}"
                           r"|(checkpoint|ckpt|step|global_step|epoch|iter)[-_]?\d+", re.IGNORECASE)
_FILE_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9_]{0,11}$")
_HASH = re.compile(r"[0-9a-f]{12,}")


def _path_like(model: str) -> bool:
    """A model id that names a file or a directory (``/root/.../model``, ``./ckpt``, ``a/b/c``,
    ``C:\\m\\x.gguf``, ``org/x.gguf``) rather than a served name; a hub id ``org/name`` is not."""
    if "\\" in model or model.startswith(("/", "~", ".")) or model.count("/") >= 2:
        return True
    return "/" in model and bool(_FILE_EXTENSION.search(model))


def short_label(name: str, reach: int = 0) -> str:
    """What a scoreboard calls the agent ``name`` (``kind:rest``): ``name`` itself, unless
    ``rest`` is path-like (``_path_like``); then its last meaningful component, followed by
    the final one when that is generic (``openai:/root/share/smollm2/model`` ->
    ``openai:smollm2/model``, a hash cut to 7 characters). ``reach`` > 0 keeps every component
    from ``reach`` before the meaningful one (to tell apart two labels that collide), and at
    the path's start gives ``name`` whole. The full name stays in the logs and fingerprint."""
    kind, colon, rest = name.partition(":")
    if not colon or "/" in kind or "\\" in kind:
        kind, colon, rest = "", "", name
    if not _path_like(rest):
        return name
    parts = [part for part in re.split(r"[/\\]+", rest) if part not in ("", ".", "..", "~")]
    if not parts:
        return name
    meaningful = next((i for i in reversed(range(len(parts))) if not _GENERIC_PART.fullmatch(parts[i])),
                      len(parts) - 1)
    if reach:
        if meaningful - reach <= 0:
            return name
        chosen = parts[meaningful - reach:]
    else:
        chosen = parts[meaningful:meaningful + 1] + parts[-1:] * (meaningful < len(parts) - 1)
    return kind + colon + "/".join(part[:7] if _HASH.fullmatch(part) else part for part in chosen)


class Agent:
    """Chooses actions. Subclasses set ``name`` and implement ``act`` (or ``reply``, when
    they have a per-turn record worth logging)."""

    name: str = "agent"
    #: The label it was given (``make_agent(name=...)``, ``eval --name``). Display only: the
    #: logs and the fingerprint keep ``name``, so a new label resumes the same run.
    given_label: str | None = None
    #: Whether the progress line counts its turns and tokens (a model's turns take seconds).
    turn_progress: bool = False

    @property
    def label(self) -> str:
        """What scoreboards and progress lines call it: the given label, else ``short_label(name)``."""
        return self.given_label or short_label(self.name)

    def act(self, turn: Turn) -> str:
        raise NotImplementedError

    def reply(self, turn: Turn) -> AgentReply:
        """The action with its record; by default ``act``'s text and no record."""
        return AgentReply(self.act(turn))

    def samples(self, env_id: str, task_ids: Sequence[str]) -> list[tuple[str, int]] | None:
        """The (task_id, rollout) pairs this agent answers, when it decides them (or None)."""
        return None

    def env_ids(self) -> tuple[str, ...]:
        """Env ids this agent names by itself (a responses file); empty when it names none."""
        return ()

    def fingerprint(self) -> dict[str, Any]:
        """JSON-able: everything that decides this agent's actions, so that ``eval --resume``
        can tell a run's own agent from another one of the same name. Never a secret."""
        return {"kind": type(self).__name__, "name": self.name}


class ReferenceAgent(Agent):
    name = "reference"

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "reference"}

    def act(self, turn: Turn) -> str:
        return core_env(turn.env).reference_action()


@dataclass(frozen=True)
class RandomAgent(Agent):
    """The chance baseline: each turn, the env's ``chance_action`` (a well-formed answer that
    scores only by chance: a uniform draw among CsappExact's executed candidates, a random
    value of the asked-for shape in LinearAlgebra, CompGeom's unimplemented starter), seeded
    by sample and turn, so a rerun or a resumed run writes the same text."""

    name: str = "random"

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "random", "version": 2, "draws": "chance_action"}  # version 1 wrote random characters

    def act(self, turn: Turn) -> str:
        return core_env(turn.env).chance_action(np.random.default_rng([turn.seed, turn.index]))


class AgentError(RuntimeError):
    """The agent could not produce an action (an endpoint down, a bad file): no sample."""


class ContextOverflow(AgentError):
    """The endpoint refused the request because the conversation no longer fits the model's
    context: the episode ends there (verdict ``context_overflow``), its turns so far kept,
    and ``--resume`` does not replay it (the same prompt would overflow again)."""


#: How servers word an over-long prompt in their HTTP 400: OpenAI and vLLM ("maximum context
#: length"), llama.cpp ("exceeds the available context size"), TGI ("must have less than ...
#: tokens"), others ("prompt is too long", "too many tokens").
CONTEXT_OVERFLOW = re.compile(r"context[ _](length|size|window)|maximum context|exceeds? the .{0,30}context"
                              r"|prompt is too long|too many tokens|must have less than \d+ tokens", re.IGNORECASE)


class RequestLimiter:
    """At most ``concurrency`` requests in flight and, with ``per_minute``, request starts at
    least ``60 / per_minute`` seconds apart: one per agent per process, shared by its worker
    threads (a Ray actor has its own)."""

    def __init__(self, concurrency: int, per_minute: float | None = None):
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._interval = 60.0 / per_minute if per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self) -> Iterator[float]:
        """Hold one request slot; yields the seconds spent waiting for it."""
        started = time.monotonic()
        self._slots.acquire()
        try:
            if self._interval:
                with self._lock:
                    now = time.monotonic()
                    start_at = max(now, self._next)
                    self._next = start_at + self._interval
                time.sleep(max(start_at - now, 0.0))
            yield time.monotonic() - started
        finally:
            self._slots.release()


_LAZY_LOCK = threading.Lock()
#: What an agent makes on first use in each process, never pickled: its request limiter, the
#: table of shared first-turn requests, its openai client and the httpx client under it.
_PER_PROCESS = ("_limiter", "_shared", "_chat")


@dataclass(frozen=True)
class OpenAIAgent(Agent):
    """A chat model behind any OpenAI-compatible endpoint, spoken to through ``openai.OpenAI``.

    The client does the HTTP: ``timeout_s`` per attempt (``connect_timeout_s`` to connect) and
    ``retries`` more attempts on a refused or dropped connection, a timeout, HTTP 408, 409, 429
    or 5xx (unless the server says ``x-should-retry: false``), waiting what ``Retry-After``
    asks, up to openai-python's cap (a longer ask is never waited), or its own backoff.
    What the eval adds: each turn's record (``reply``), the request limits, one request shared
    by a block of rollouts (``choices_per_request``), and the key kept to its host.

    The key: ``api_key_env`` names the variable it is read from before each attempt (so a Ray
    worker reads its own). Left unset, ``OPENAI_API_KEY`` is read for OpenAI's own URL only:
    a key meant for OpenAI is never sent to another host unless asked for by name, and no
    redirect is followed. Sampling arguments left at ``None`` are not sent, so the server's
    defaults apply; ``send_seed`` sends each sample's seed (the run's ``--seed`` decides it)
    as the request's ``seed``.

    Limits: ``max_concurrent_requests`` requests in flight per process (default 1: one local
    server, one slot) and, with ``requests_per_minute``, request starts spaced evenly.

    Failing fast: ``check()`` (run by ``make_agent`` before any episode) asks ``/models`` which
    model the server serves (logged in the run's fingerprint) and raises ``AgentError`` naming
    the URL when no attempt could connect.
    """

    model: str
    base_url: str = OPENAI_DEFAULT_URL
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    send_seed: bool = True
    extra_body: Mapping[str, Any] | None = None
    timeout_s: float = 600.0
    retries: int = 3
    system_prompt: str | None = None
    connect_timeout_s: float = 10.0
    max_concurrent_requests: int = 1
    requests_per_minute: float | None = None
    #: ``n`` on a first turn: rollouts ``k*n .. k*n+n-1`` of a task share one request, one choice each.
    choices_per_request: int | None = None
    #: The server's ``/models`` entry for this model (set by ``check``); part of the fingerprint.
    served_model: Mapping[str, Any] | None = field(default=None, compare=False)
    turn_progress = True  # a class attribute, not a field: a model's turns take seconds

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"openai:{self.model}"

    @property
    def api_key_variable(self) -> str | None:
        """The variable the key is read from: the one named, else ``OPENAI_API_KEY`` for
        OpenAI's own URL, else none."""
        if self.api_key_env:
            return self.api_key_env
        return "OPENAI_API_KEY" if self._on_openai else None

    @property
    def _on_openai(self) -> bool:
        return self.base_url.rstrip("/") == OPENAI_DEFAULT_URL

    def _api_key(self) -> str:
        return os.environ.get(self.api_key_variable or "", "")

    def fingerprint(self) -> dict[str, Any]:
        """The request's content and the served model: not the key (nor the variable holding
        it), timeouts, retries or limits."""
        return {"kind": "openai", "model": self.model, "base_url": self.base_url.rstrip("/"),
                "temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                "stop": None if self.stop is None else list(self.stop), "send_seed": self.send_seed,
                "extra_body": None if self.extra_body is None else dict(self.extra_body),
                "system_prompt": self.system_prompt, "choices_per_request": self.choices_per_request,
                "served_model": None if self.served_model is None else dict(self.served_model)}

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in _PER_PROCESS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _per_process(self, key: str, make: Callable[[], Any]) -> Any:
        with _LAZY_LOCK:
            if key not in self.__dict__:
                object.__setattr__(self, key, make())
            return self.__dict__[key]

    @property
    def limiter(self) -> RequestLimiter:
        return self._per_process("_limiter", lambda: RequestLimiter(self.max_concurrent_requests,
                                                                    self.requests_per_minute))

    @property
    def chat(self) -> tuple[openai.OpenAI, AttemptWatchingClient]:
        """This process's openai client and the httpx client under it, which notes each attempt."""
        return self._per_process("_chat", self._make_chat)

    def _make_chat(self) -> tuple[openai.OpenAI, AttemptWatchingClient]:
        try:
            from gym_sysmath.chat_client import chat_client
        except ImportError as exc:
            raise AgentError(f"the openai agent needs the openai package ({exc}): "
                             "pip install 'gym-sysmath[openai]'") from None
        return chat_client(self.base_url.rstrip("/"), self._api_key, timeout_s=self.timeout_s,
                           connect_timeout_s=self.connect_timeout_s, retries=self.retries, openai_host=self._on_openai)

    def _request_options(self) -> dict[str, Any]:
        """No key, no Authorization header (openai-python asks for one to be left out explicitly)."""
        import openai

        return {} if self._api_key() else {"extra_headers": {"Authorization": openai.Omit()}}

    def check(self) -> None:
        """Fail before any episode when the endpoint cannot serve us: OpenAI's own without a
        key, a setting out of range, or a host no attempt could connect to; then record which
        model it serves."""
        if self.retries < 0 or self.connect_timeout_s <= 0 or self.timeout_s <= 0:
            raise AgentError("--retries must be >= 0 and the timeouts above 0")
        if self.max_concurrent_requests < 1 or (self.requests_per_minute is not None and self.requests_per_minute <= 0):
            raise AgentError("--model-concurrency must be at least 1 and --rpm above 0")
        if self.choices_per_request is not None and self.choices_per_request < 1:
            raise AgentError("--choices-per-request must be at least 1")
        variable = self.api_key_variable
        if self._on_openai and not os.environ.get(variable or ""):
            raise AgentError(f"set {variable} (or choose another variable with --api-key-env)")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AgentError(f"--base-url must be an http:// or https:// URL, got {self.base_url!r}")
        object.__setattr__(self, "served_model", self._served_model())

    def _served_model(self) -> dict[str, Any]:
        """This model's entry in the server's ``/models`` (its id and, where the server gives
        them, owner and metadata, never the volatile ``created``): the one named like the
        request's model, else the only one served; ``{"listed": [...]}`` otherwise, and
        ``{"error": ...}`` when the server has no such list. ``AgentError`` when no attempt
        could connect."""
        client, http = self.chat  # first: a clear error when openai is not installed
        import httpx
        import openai

        with http.watch() as attempts:
            try:
                page = client.models.list(timeout=httpx.Timeout(self.connect_timeout_s + 20,
                                                                connect=self.connect_timeout_s),
                                          **self._request_options())
            except openai.APIConnectionError as exc:
                if isinstance(exc.__cause__, httpx.ConnectError | httpx.ConnectTimeout):
                    raise AgentError(f"cannot connect to {self.base_url} ({exc.__cause__ or 'timed out'}; "
                                     f"{len(attempts)} attempt(s), {self.connect_timeout_s:g} s each): is the server "
                                     "running? (--connect-timeout and --retries set this policy)") from None
                return {"error": attempts[-1]["outcome"][:300] if attempts else str(exc)[:300]}
            except openai.APIStatusError as exc:  # worded as before openai-python, so fingerprints still match
                return {"error": f"{exc.request.url}: HTTP Error {exc.status_code}: {exc.response.reason_phrase}"}
        entries = [entry.model_dump(exclude_unset=True) for entry in page.data or []]
        named = [entry for entry in entries if entry.get("id") == self.model]
        chosen = named or (entries if len(entries) == 1 else [])
        if not chosen:
            return {"listed": sorted(str(entry.get("id")) for entry in entries)[:20]}
        return {key: value for key, value in chosen[0].items() if key in ("id", "owned_by", "meta", "root")}

    def sampling(self, turn: Turn) -> dict[str, Any]:
        """The request's fields other than the model and messages: what the turn's record keeps."""
        fields: dict[str, Any] = {}
        for key in ("temperature", "top_p", "max_tokens"):
            if getattr(self, key) is not None:
                fields[key] = getattr(self, key)
        if self.stop:
            fields["stop"] = list(self.stop)
        if self.send_seed:
            fields["seed"] = turn.seed
        fields.update(self.extra_body or {})
        return fields

    def messages(self, turn: Turn) -> list[dict[str, str]]:
        messages = turn.messages()
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def act(self, turn: Turn) -> str:
        return self.reply(turn).text

    def reply(self, turn: Turn) -> AgentReply:
        """The first choice's text with the turn's record: the sampling fields sent, the
        response's id and model, ``finish_reason``, ``usage``, ``latency_s`` (the answering
        attempt), ``wait_s`` (for a request slot), ``attempts`` and each retry's error and wait."""
        messages, sampling = self.messages(turn), self.sampling(turn)
        shared = (self._shared_choice(turn, messages, sampling)
                  if turn.index == 0 and (self.choices_per_request or 1) > 1 else None)
        if shared is not None:
            return shared
        with self.limiter.slot() as waited:
            completion, latency, retries = self._complete(messages, sampling)
        return self._reply(completion, 0, latency, waited, retries, sampling)

    def _reply(self, completion: ChatCompletion, index: int, latency: float, waited: float,
               retries: list[dict[str, Any]], sampling: Mapping[str, Any]) -> AgentReply:
        try:  # openai-python does not validate what a server sends
            choice = next(c for c in completion.choices if (c.index or 0) == index) if index else completion.choices[0]
            choice.message.content  # noqa: B018
        except (AttributeError, TypeError, IndexError, StopIteration):
            sent = completion.model_dump_json(warnings=False)[:300]
            raise AgentError(f"unexpected chat-completions reply: {sent}") from None
        record = {"id": completion.id, "model": completion.model, "finish_reason": choice.finish_reason,
                  "usage": None if completion.usage is None else completion.usage.model_dump(exclude_unset=True),
                  "latency_s": round(latency, 6), "wait_s": round(waited, 6), "attempts": len(retries) + 1,
                  "retries": retries, "request": dict(sampling)}
        if completion.system_fingerprint:
            record["system_fingerprint"] = completion.system_fingerprint
        return AgentReply(choice.message.content or "", record)

    def _shared_choice(self, turn: Turn, messages: list[dict[str, str]],
                       sampling: dict[str, Any]) -> AgentReply | None:
        """A first turn's reply from the request its block of rollouts shares (``n`` =
        ``choices_per_request``), made by whichever rollout of the block asks first; rollout
        ``r`` takes choice ``r % n``. The request's ``usage`` is recorded on choice 0's turn
        alone (the others: ``usage`` None, ``shared_usage`` True), so totals count it once.
        None (ask alone) when that request failed or the server returned fewer choices (one
        that ignores ``n``)."""
        count = self.choices_per_request or 1
        index = turn.rollout % count
        key = (turn.env_id, turn.task_id, turn.rollout // count,
               hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest())
        table = self._per_process("_shared", dict)
        with _LAZY_LOCK:
            entry = table.get(key)
            owner = entry is None
            if owner:
                entry = table[key] = {"ready": threading.Event(), "taken": 0}
        if owner:
            try:
                with self.limiter.slot() as waited:
                    entry["answer"] = (*self._complete(messages, {**sampling, "n": count}), waited)
            except AgentError:  # each rollout then asks alone, and meets the error itself
                pass
            finally:
                entry.setdefault("answer", None)
                entry["ready"].set()
        entry["ready"].wait()
        with _LAZY_LOCK:
            entry["taken"] += 1
            if entry["taken"] >= count:
                table.pop(key, None)
        if entry["answer"] is None:
            return None
        completion, latency, retries, waited = entry["answer"]
        if not any((choice.index or 0) == index for choice in completion.choices or []):
            return None
        answer = self._reply(completion, index, latency, waited if owner else 0.0, retries if owner else [],
                             {**sampling, "n": count})
        answer.record["choice"] = index  # type: ignore[index]
        if index:
            answer.record.update(usage=None, shared_usage=True)  # type: ignore[union-attr]
        return answer

    def _complete(self, messages: list[dict[str, str]],
                  sampling: Mapping[str, Any]) -> tuple[ChatCompletion, float, list[dict[str, Any]]]:
        """The completion, the answering attempt's latency, and the retries before it (each:
        what went wrong, the seconds waited after it, the ``Retry-After`` the server sent)."""
        client, http = self.chat
        import openai
        from openai.types.chat import ChatCompletion

        with http.watch() as attempts:
            try:
                completion = client.chat.completions.create(
                    model=self.model, messages=messages, extra_body=dict(sampling),  # type: ignore[arg-type]
                    **self._request_options())
            except openai.APIStatusError as exc:
                raise _status_error(exc, len(attempts)) from None
            except openai.APIError as exc:  # no answer: refused, dropped, timed out
                last = attempts[-1]["outcome"] if attempts else str(exc)
                raise AgentError(f"{last} (after {len(attempts)} attempt(s))") from None
            except ValueError as exc:  # an answer that says it is JSON and is not
                raise AgentError(f"{self.base_url} did not answer JSON: {exc}") from None
        if not isinstance(completion, ChatCompletion):
            raise AgentError(f"{self.base_url} did not answer JSON: {str(completion)[:300]}")
        latency = time.perf_counter() - attempts[-1]["started"]
        retries = [{"error": failed["outcome"][:300], "wait_s": round(then["started"] - failed["ended"], 3),
                    **{key: failed[key] for key in ("retry_after", "retry_after_ms") if key in failed}}
                   for failed, then in itertools.pairwise(attempts)]
        return completion, latency, retries


def _status_error(exc: openai.APIStatusError, attempts: int) -> AgentError:
    """An HTTP error as one line; ``ContextOverflow`` when it says the conversation no longer
    fits the model's context."""
    detail = exc.response.text[:600]
    message = f"HTTP {exc.status_code} from {exc.request.url}: {detail or exc.response.reason_phrase}"
    if exc.status_code in (400, 413, 422) and CONTEXT_OVERFLOW.search(detail):
        return ContextOverflow(message)
    if exc.response.is_redirect:
        message = (f"HTTP {exc.status_code} from {exc.request.url}: redirect to {exc.response.headers.get('location')} "
                   "refused (not followed, so the API key goes nowhere else; use the final URL as --base-url)")
    return AgentError(f"{message} (after {attempts} attempt(s))")


class PythonAgent(Agent):
    """Your callable ``(observation: str, history: list[dict], info: dict) -> str``.

    Imported by name (``package.module:function``), so it pickles by name into Ray workers;
    the module must be importable there too. With ``-c`` above 1 it is called from several
    threads at once, so it should keep no per-episode state of its own (``history`` has it).
    """

    turn_progress = True  # the callable may well ask a model

    def __init__(self, target: str):
        module, _, function = target.partition(":")
        if not module or not function:
            raise ValueError(f"python agent wants MODULE:FUNCTION, got {target!r}")
        self.target = target
        self.name = f"python:{target}"
        self._function: Callable[..., str] | None = None
        self._load()

    def _load(self) -> Callable[..., str]:
        if self._function is None:
            module, _, function = self.target.partition(":")
            if module.startswith(".") or "/" in module or "\\" in module:
                raise AgentError(f"python agent {self.target}: {module!r} is a path, not a module name: run from "
                                 "the file's directory and name it as `python my_agent:act` (my_agent.py)")
            try:
                loaded = importlib.import_module(module)
            except ImportError as exc:
                raise AgentError(f"python agent {self.target}: cannot import {module!r} ({exc}); it is looked "
                                 "up on sys.path and in the current directory") from exc
            for part in function.split("."):
                try:
                    loaded = getattr(loaded, part)
                except AttributeError:
                    raise AgentError(f"python agent {self.target}: {module!r} has no {function!r}") from None
            if not callable(loaded):
                raise AgentError(f"python agent {self.target}: {function!r} is not callable")
            self._function = loaded
        return self._function

    def __getstate__(self) -> dict[str, Any]:
        return {"target": self.target, "name": self.name, "_function": None}

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "python", "target": self.target}

    def act(self, turn: Turn) -> str:
        info = dict(turn.info)
        info.update(env_id=turn.env_id, rollout=turn.rollout, seed=turn.seed)
        return self._load()(turn.observation, [dict(message) for message in turn.history], info)


class ResponsesAgent(Agent):
    """Replays the actions of a JSONL file; the file decides which samples exist."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = f"responses:{self.path.name}"
        self.table: dict[tuple[str | None, str, int], tuple[str, ...]] = {}
        self.lines: dict[tuple[str | None, str, int], int] = {}  #: each key's line number
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise AgentError(f"cannot read responses file {self.path}: {exc.strerror or exc}") from exc
        self.sha256 = hashlib.sha256(data).hexdigest()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AgentError(f"{self.path}: not UTF-8 ({exc})") from exc
        for number, line in enumerate(io.StringIO(text, newline=None), 1):
            if line.strip():
                self._add(number, line)
        if not self.table:
            raise AgentError(f"{self.path} holds no responses")

    def _add(self, number: int, line: str) -> None:
        where = f"{self.path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AgentError(f"{where}: not JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise AgentError(f"{where}: not a JSON object")
        if "task_id" not in record:
            raise AgentError(f"{where}: no task_id")
        if "actions" in record:
            actions = record["actions"]
        elif "response" in record:
            actions = [record["response"]]
        else:
            raise AgentError(f"{where}: give the action texts as `actions` (a list) or `response`")
        if not isinstance(actions, list) or not all(isinstance(action, str) for action in actions):
            raise AgentError(f"{where}: actions must be a list of strings")
        env_id = record.get("env_id")
        if env_id is not None and not isinstance(env_id, str):
            raise AgentError(f"{where}: env_id must be a string")
        try:
            rollout = int(record.get("rollout", 0))
        except (TypeError, ValueError) as exc:
            raise AgentError(f"{where}: rollout must be an integer") from exc
        key = (env_id, str(record["task_id"]), rollout)
        if key in self.table:
            raise AgentError(f"{where}: duplicate of line {self.lines[key]}: {_describe(key)} is answered twice; "
                             "keep one line per sample")
        self.table[key] = tuple(actions)
        self.lines[key] = number

    def env_ids(self) -> tuple[str, ...]:
        return tuple(sorted({env_id for env_id, _, _ in self.table if env_id is not None}))

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "responses", "sha256": self.sha256}

    def samples(self, env_id: str, task_ids: Sequence[str]) -> list[tuple[str, int]]:
        """This env's (task_id, rollout) pairs: its own lines and the lines without env_id whose
        task is in its split, the latter read as naming ``env_id``; one pair answered by two
        lines (one with env_id, one without) is an error."""
        known = set(task_ids)
        owners: dict[tuple[str, int], tuple[str | None, str, int]] = {}
        for key in self.table:
            owner, task_id, rollout = key
            if owner != env_id and (owner is not None or task_id not in known):
                continue
            first = owners.setdefault((task_id, rollout), key)
            if first != key:
                numbers = sorted((self.lines[first], self.lines[key]))
                raise AgentError(f"{self.path}: lines {numbers[0]} and {numbers[1]} both answer "
                                 f"{_describe((env_id, task_id, rollout))} (a line without env_id counts for "
                                 f"{env_id}); keep one line per sample")
        unknown = sorted({task_id for task_id, _ in owners} - known)
        if unknown:
            raise AgentError(f"{self.path}: task ids {env_id} does not serve (not in its eval split, or excluded "
                             f"by its filters, such as --env-arg difficulty=...): {unknown[:5]}")
        order = {task_id: index for index, task_id in enumerate(task_ids)}
        return sorted(owners, key=lambda pair: (order[pair[0]], pair[1]))

    def act(self, turn: Turn) -> str:
        actions = self.table.get((turn.env_id, turn.task_id, turn.rollout))
        if actions is None:
            actions = self.table[(None, turn.task_id, turn.rollout)]
        return actions[turn.index] if turn.index < len(actions) else ""


def _describe(key: tuple[str | None, str, int]) -> str:
    env_id, task_id, rollout = key
    return f"{'' if env_id is None else env_id + ' '}task {task_id!r} rollout {rollout}"


#: The longest ``--name``: a label is a scoreboard column, not a description.
MAX_LABEL = 40


def make_agent(spec: str, argument: str | None = None, name: str | None = None, **openai_options: Any) -> Agent:
    """An agent from its ``--agent`` spec: ``reference``, ``random``, ``openai`` (with
    ``openai_options``: ``model`` and the ``OpenAIAgent`` fields), ``python:MODULE:FUNCTION``
    or ``responses:FILE`` (the part after the kind may come as ``argument`` instead).
    ``name`` (``eval --name``) is its label on the scoreboard and the progress line, for any
    kind; display only, so the logs, the fingerprint and ``--resume`` go by the agent's own name."""
    if name is not None and (not name.strip() or not name.isprintable() or len(name) > MAX_LABEL):
        raise ValueError(f"--name takes one line of printable text of at most {MAX_LABEL} characters, "
                         f"got {name[:MAX_LABEL + 20]!r}")
    agent = _agent_of_kind(spec, argument, openai_options)
    if name is not None:
        object.__setattr__(agent, "given_label", name.strip())  # frozen dataclass agents too
    return agent


def _agent_of_kind(spec: str, argument: str | None, openai_options: Mapping[str, Any]) -> Agent:
    kind, _, inline = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown agent {spec!r}; choose from {', '.join(KINDS)}")
    argument = inline or argument
    if kind in KINDS_WITH_ARGUMENT:
        if not argument:
            raise ValueError(f"agent {kind} needs an argument: {kind} MODULE:FUNCTION" if kind == "python"
                             else f"agent {kind} needs an argument: {kind} FILE.jsonl")
        return PythonAgent(argument) if kind == "python" else ResponsesAgent(argument)
    if argument:
        raise ValueError(f"agent {kind} takes no argument, got {argument!r}")
    if kind == "reference":
        return ReferenceAgent()
    if kind == "random":
        return RandomAgent()
    options = {key: value for key, value in openai_options.items() if value is not None}
    if not options.get("model"):
        raise ValueError("agent openai needs --model")
    agent = OpenAIAgent(**options)
    agent.check()
    return agent
