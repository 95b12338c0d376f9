"""The ``openai.OpenAI`` client an eval's ``openai`` agent speaks through.

openai-python sends the requests and does the retries, their waits (``Retry-After`` or its
backoff) and the timeouts. Under it sits an httpx client that follows no redirect (so the key
goes to ``base_url`` and nowhere else) and notes every attempt it carries, so that a turn's
record can say what was retried and how long was waited. Imported only when an ``openai``
agent is made: ``openai`` is the ``[openai]`` extra.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai


class AttemptWatchingClient(httpx.Client):
    """An httpx client that refuses redirects and notes each request it sends in the calling
    thread's list (see ``watch``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs, follow_redirects=False)
        self._watched = threading.local()

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        """Collects the attempts this thread sends meanwhile: ``started`` and ``ended``
        (``perf_counter`` seconds), ``outcome`` (the status or the error) and the server's
        ``retry_after`` / ``retry_after_ms`` headers when it sent them."""
        attempts: list[dict[str, Any]] = []
        self._watched.attempts = attempts
        try:
            yield attempts
        finally:
            self._watched.attempts = None

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        kwargs["follow_redirects"] = False  # whoever asks: a redirect would carry the key elsewhere
        attempt: dict[str, Any] = {"started": time.perf_counter()}
        attempts = getattr(self._watched, "attempts", None)
        if attempts is not None:
            attempts.append(attempt)
        try:
            response = super().send(request, **kwargs)
        except httpx.TimeoutException:
            attempt["ended"] = time.perf_counter()
            attempt["outcome"] = f"{request.url} timed out after {attempt['ended'] - attempt['started']:.1f} s"
            raise
        except httpx.HTTPError as exc:
            attempt.update(ended=time.perf_counter(), outcome=f"{request.url} unreachable: {exc}")
            raise
        attempt.update(ended=time.perf_counter(), outcome=f"HTTP {response.status_code} from {request.url}")
        if not response.is_success and not kwargs.get("stream"):
            attempt["outcome"] += f": {response.text[:300]}"
        for header in ("retry-after", "retry-after-ms"):
            if header in response.headers:
                attempt[header.replace("-", "_")] = response.headers[header]
        return response


def chat_client(base_url: str, api_key: Callable[[], str], *, timeout_s: float, connect_timeout_s: float,
                retries: int, openai_host: bool) -> tuple[openai.OpenAI, AttemptWatchingClient]:
    """The openai client (``retries`` more attempts, ``timeout_s`` each, ``connect_timeout_s``
    to connect; ``api_key`` read before each attempt) and the httpx client under it. Off
    OpenAI's own host, the organization and project openai-python would read from
    ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` are not sent either."""
    timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
    http = AttemptWatchingClient(timeout=timeout)
    headers: dict[str, Any] = {} if openai_host else {name: openai.Omit() for name in ("OpenAI-Organization",
                                                                                       "OpenAI-Project")}
    client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=retries, timeout=timeout,
                           http_client=http, default_headers=headers)
    return client, http
