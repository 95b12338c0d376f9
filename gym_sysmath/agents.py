"""Agents for ``gym-sysmath eval``: who writes each action of an episode.

An agent is built once per eval and asked for one action per turn through ``act(turn)``. It
holds no per-episode state (everything an episode needs arrives in the ``Turn``), so one
agent serves every worker thread at once and pickles whole into a Ray actor.

Built-in agents, by their ``--agent`` spec:

- ``reference``: the env's own reference action (host-side); must score 100%.
- ``random``: seeded random text from the action space; the noise floor.
- ``openai``: any OpenAI-compatible ``/chat/completions`` endpoint over plain HTTP; the
  prompt and every later observation are user messages, its replies the assistant's. Each
  turn's reply record (the sampling fields sent, response id and model, ``finish_reason``,
  token ``usage``, latency, the wait for a request slot, attempts and each retry) is logged
  beside the action. An over-long conversation ends the episode (``ContextOverflow``).
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
import email.utils
import hashlib
import importlib
import io
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gym_sysmath.env import core_env

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
class Reply:
    """One action and, when the agent has one, the record of how it was made (an endpoint's
    response id, model, finish reason, token usage, latency): logged per turn."""

    text: str
    record: Mapping[str, Any] | None = None


class Agent:
    """Chooses actions. Subclasses set ``name`` and implement ``act`` (or ``reply``, when
    they have a per-turn record worth logging)."""

    name: str = "agent"

    def act(self, turn: Turn) -> str:
        raise NotImplementedError

    def reply(self, turn: Turn) -> Reply:
        """The action with its record; by default ``act``'s text and no record."""
        return Reply(self.act(turn))

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
    """Up to ``max_chars`` characters drawn from the action space's charset, seeded by sample
    and turn, so a rerun or a resumed run writes the same text."""

    max_chars: int = 200
    name: str = "random"

    def fingerprint(self) -> dict[str, Any]:
        return {"kind": "random", "max_chars": self.max_chars}

    def act(self, turn: Turn) -> str:
        rng = np.random.default_rng([turn.seed, turn.index])
        space = turn.env.action_space
        if not isinstance(space, spaces.Text):
            raise TypeError(f"the random agent draws from a Text action space, not {type(space).__name__}")
        chars = space.character_list
        length = int(rng.integers(1, self.max_chars + 1))
        return "".join(chars[i] for i in rng.integers(len(chars), size=length))


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
#: Statuses worth another attempt (as openai-python retries them): timeout, conflict, rate limit, server errors.
RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, or ``Retry-After`` in seconds or as
    an HTTP date; None when it asked for none (or for something unreadable)."""
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error, never followed: urllib would carry the Authorization header to
    wherever the ``Location`` points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} refused (not followed, so the "
                                     "API key goes nowhere else; use the final URL as --base-url)", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirect)
_LIMITERS_LOCK = threading.Lock()


@dataclass(frozen=True)
class OpenAIAgent(Agent):
    """A chat model behind any OpenAI-compatible endpoint, spoken to with ``urllib``.

    The key: ``api_key_env`` names the variable it is read from at each request (so a Ray
    worker reads its own). Left unset, ``OPENAI_API_KEY`` is read for OpenAI's own URL only:
    a key meant for OpenAI is never sent to another host unless asked for by name.
    Redirects are refused, not followed. Sampling arguments left at ``None`` are not sent, so
    the server's defaults apply; ``send_seed`` sends each sample's seed (the run's ``--seed``
    decides it) as the request's ``seed``.

    Limits: ``max_concurrent_requests`` requests in flight per process (default 1: one local
    server, one slot) and, with ``requests_per_minute``, request starts spaced evenly.

    Failing fast: ``check()`` (run by ``make_agent`` before any episode) opens a TCP
    connection to the endpoint's host within ``connect_timeout_s``, ``retries`` more times
    ``retry_backoff_s``, ``2 * retry_backoff_s``, ... apart, raises ``AgentError`` naming the
    URL when none succeeds, then asks ``/models`` which model the server serves (logged in
    the run's fingerprint). A request is retried the same way on a refused or dropped
    connection, a timeout (``timeout_s`` per attempt), HTTP 408, 409, 429 or 5xx, waiting what
    ``Retry-After`` asks when the server says (at most ``retry_max_wait_s``); every retry is
    recorded in the turn's record.
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
    retry_backoff_s: float = 1.0
    retry_max_wait_s: float = 60.0
    max_concurrent_requests: int = 1
    requests_per_minute: float | None = None
    #: ``n`` on a first turn: rollouts ``k*n .. k*n+n-1`` of a task share one request, one choice each.
    choices_per_request: int | None = None
    #: The server's ``/models`` entry for this model (set by ``check``); part of the fingerprint.
    served_model: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"openai:{self.model}"

    @property
    def api_key_variable(self) -> str | None:
        """The variable the key is read from: the one named, else ``OPENAI_API_KEY`` for
        OpenAI's own URL, else none."""
        if self.api_key_env:
            return self.api_key_env
        return "OPENAI_API_KEY" if self.base_url.rstrip("/") == OPENAI_DEFAULT_URL else None

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
        return {key: value for key, value in self.__dict__.items() if key not in ("_limiter", "_shared")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def limiter(self) -> RequestLimiter:
        with _LIMITERS_LOCK:
            limiter = self.__dict__.get("_limiter")
            if limiter is None:
                limiter = RequestLimiter(self.max_concurrent_requests, self.requests_per_minute)
                object.__setattr__(self, "_limiter", limiter)
            return limiter

    def check(self) -> None:
        """Fail before any episode when the endpoint cannot serve us: OpenAI's own without a
        key, or one whose host does not accept a connection (see the class docstring); then
        record which model it serves."""
        if self.retries < 0 or self.connect_timeout_s <= 0 or self.timeout_s <= 0 or self.retry_backoff_s < 0 \
                or self.retry_max_wait_s < 0:
            raise AgentError("--retries, --retry-backoff and --retry-max-wait must be >= 0, the timeouts > 0")
        if self.max_concurrent_requests < 1 or (self.requests_per_minute is not None and self.requests_per_minute <= 0):
            raise AgentError("--model-concurrency must be at least 1 and --rpm above 0")
        if self.choices_per_request is not None and self.choices_per_request < 1:
            raise AgentError("--choices-per-request must be at least 1")
        variable = self.api_key_variable
        if self.base_url.rstrip("/") == OPENAI_DEFAULT_URL and not os.environ.get(variable or ""):
            raise AgentError(f"set {variable} (or choose another variable with --api-key-env)")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AgentError(f"--base-url must be an http:// or https:// URL, got {self.base_url!r}")
        address = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        error: OSError | None = None
        for attempt in range(self.retries + 1):
            try:
                socket.create_connection(address, timeout=self.connect_timeout_s).close()
                break
            except OSError as exc:
                error = exc
            if attempt < self.retries:
                time.sleep(self._backoff(attempt))
        else:
            raise AgentError(f"cannot connect to {self.base_url} ({error or 'timed out'}; {self.retries + 1} "
                             f"attempt(s), {self.connect_timeout_s:g} s each): is the server running? "
                             "(--connect-timeout, --retries, --retry-backoff set this policy)")
        object.__setattr__(self, "served_model", self._served_model())

    def _served_model(self) -> dict[str, Any]:
        """This model's entry in the server's ``/models`` (its id and, where the server gives
        them, owner and metadata, never the volatile ``created``): the one named like the
        request's model, else the only one served; ``{"listed": [...]}`` otherwise, and
        ``{"error": ...}`` when the server has no such list."""
        request = urllib.request.Request(f"{self.base_url.rstrip('/')}/models", headers=self._headers(), method="GET")
        try:
            with _OPENER.open(request, timeout=self.connect_timeout_s + 20) as response:
                entries = [entry for entry in json.loads(response.read()).get("data") or [] if isinstance(entry, dict)]
        except (urllib.error.URLError, OSError, ValueError, AttributeError) as exc:
            return {"error": f"{request.full_url}: {exc}"[:300]}
        named = [entry for entry in entries if entry.get("id") == self.model]
        chosen = named or (entries if len(entries) == 1 else [])
        if not chosen:
            return {"listed": sorted(str(entry.get("id")) for entry in entries)[:20]}
        return {key: value for key, value in chosen[0].items() if key in ("id", "owned_by", "meta", "root")}

    def _backoff(self, attempt: int) -> float:
        return min(self.retry_backoff_s * 2.0**attempt, 30.0)

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

    def request_body(self, turn: Turn) -> dict[str, Any]:
        messages = turn.messages()
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return {"model": self.model, "messages": messages, **self.sampling(turn)}

    def act(self, turn: Turn) -> str:
        return self.reply(turn).text

    def reply(self, turn: Turn) -> Reply:
        """The first choice's text with the turn's record: the sampling fields sent, the
        response's id and model, ``finish_reason``, ``usage``, ``latency_s`` (the answering
        attempt), ``wait_s`` (for a request slot), ``attempts`` and each retry's error and wait."""
        body = self.request_body(turn)
        shared = self._shared_choice(turn, body) if turn.index == 0 and (self.choices_per_request or 1) > 1 else None
        if shared is not None:
            return shared
        with self.limiter.slot() as waited:
            reply, latency, retries = self._post(body)
        return self._reply(reply, 0, latency, waited, retries, self.sampling(turn))

    def _reply(self, reply: Mapping[str, Any], index: int, latency: float, waited: float,
               retries: list[dict[str, Any]], sampling: Mapping[str, Any]) -> Reply:
        try:
            choice = next(c for c in reply["choices"] if c.get("index", 0) == index) if index else reply["choices"][0]
            content = choice["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError, StopIteration) as exc:
            raise AgentError(f"unexpected chat-completions reply: {json.dumps(reply)[:300]}") from exc
        record = {"id": reply.get("id"), "model": reply.get("model"), "finish_reason": choice.get("finish_reason"),
                  "usage": reply.get("usage"), "latency_s": round(latency, 6), "wait_s": round(waited, 6),
                  "attempts": len(retries) + 1, "retries": retries, "request": dict(sampling)}
        if reply.get("system_fingerprint"):
            record["system_fingerprint"] = reply["system_fingerprint"]
        return Reply(content or "", record)

    def _shared_choice(self, turn: Turn, body: dict[str, Any]) -> Reply | None:
        """A first turn's reply from the request its block of rollouts shares (``n`` =
        ``choices_per_request``), made by whichever rollout of the block asks first; rollout
        ``r`` takes choice ``r % n``. The request's ``usage`` is recorded on choice 0's turn
        alone (the others: ``usage`` None, ``shared_usage`` True), so totals count it once.
        None (ask alone) when that request failed or the server returned fewer choices (one
        that ignores ``n``)."""
        count = self.choices_per_request or 1
        index = turn.rollout % count
        key = (turn.env_id, turn.task_id, turn.rollout // count,
               hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest())
        with _LIMITERS_LOCK:
            table = self.__dict__.setdefault("_shared", {})
            entry = table.get(key)
            owner = entry is None
            if owner:
                entry = table[key] = {"ready": threading.Event(), "taken": 0}
        if owner:
            try:
                with self.limiter.slot() as waited:
                    entry["answer"] = (*self._post({**body, "n": count}), waited)
            except AgentError:  # each rollout then asks alone, and meets the error itself
                pass
            finally:
                entry.setdefault("answer", None)
                entry["ready"].set()
        entry["ready"].wait()
        with _LIMITERS_LOCK:
            entry["taken"] += 1
            if entry["taken"] >= count:
                table.pop(key, None)
        if entry["answer"] is None:
            return None
        reply, latency, retries, waited = entry["answer"]
        if not isinstance(reply.get("choices"), list) or not any(
                isinstance(c, dict) and c.get("index", 0) == index for c in reply["choices"]):
            return None
        sampling = {**self.sampling(turn), "n": count}
        answer = self._reply(reply, index, latency, waited if owner else 0.0, retries if owner else [], sampling)
        answer.record["choice"] = index  # type: ignore[index]
        if index:
            answer.record.update(usage=None, shared_usage=True)  # type: ignore[union-attr]
        return answer

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_variable or "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], float, list[dict[str, Any]]]:
        """The decoded reply, the answering attempt's latency, and the retries before it
        (each: the error and the seconds waited after it)."""
        request = urllib.request.Request(f"{self.base_url.rstrip('/')}/chat/completions",
                                         data=json.dumps(body).encode(), headers=self._headers(), method="POST")
        retries: list[dict[str, Any]] = []
        for attempt in range(self.retries + 1):
            started = time.perf_counter()
            asked: float | None = None
            try:
                with _OPENER.open(request, timeout=self.timeout_s) as response:
                    data = response.read()
                latency = time.perf_counter() - started
                try:
                    return json.loads(data), latency, retries
                except json.JSONDecodeError as exc:
                    raise AgentError(f"{request.full_url} did not answer JSON: {exc}") from None
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:600].decode(errors="replace") if exc.fp else ""
                message = f"HTTP {exc.code} from {request.full_url}: {detail or exc.reason}"
                if exc.code in (400, 413, 422) and CONTEXT_OVERFLOW.search(detail):
                    raise ContextOverflow(message) from None
                headers = {key.lower(): value for key, value in (exc.headers or {}).items()}
                retryable = exc.code in RETRYABLE_STATUS and headers.get("x-should-retry") != "false"
                asked = retry_after_s(headers)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                kind = "timed out" if isinstance(reason, TimeoutError) else "unreachable"
                retryable = True
                message = f"{request.full_url} {kind} after {time.perf_counter() - started:.1f} s: {reason}"
            if not retryable or attempt == self.retries:
                raise AgentError(f"{message} (after {attempt + 1} attempt(s))") from None
            wait = self._backoff(attempt) if asked is None else min(asked, self.retry_max_wait_s)
            retries.append({"error": message[:300], "wait_s": round(wait, 3),
                            **({"retry_after_s": asked} if asked is not None else {})})
            time.sleep(wait)
        raise AssertionError("unreachable")


class PythonAgent(Agent):
    """Your callable ``(observation: str, history: list[dict], info: dict) -> str``.

    Imported by name (``package.module:function``), so it pickles by name into Ray workers;
    the module must be importable there too. With ``-c`` above 1 it is called from several
    threads at once, so it should keep no per-episode state of its own (``history`` has it).
    """

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


def make_agent(spec: str, argument: str | None = None, **openai_options: Any) -> Agent:
    """An agent from its ``--agent`` spec: ``reference``, ``random``, ``openai`` (with
    ``openai_options``: ``model`` and the ``OpenAIAgent`` fields), ``python:MODULE:FUNCTION``
    or ``responses:FILE`` (the part after the kind may come as ``argument`` instead)."""
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
