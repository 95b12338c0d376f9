"""The results log: ``results.jsonl``, one JSON line per finished sample, flushed as it lands,
and ``run.json`` beside it holding the run's fingerprint (``run_fingerprint``: the agent's
configuration, env ids and arguments, seed, rollouts, sandbox backend). With ``resume`` the
samples already logged are skipped (a ``failed`` row is played again and its new row, later
in the file, wins), and ``bind_run_header`` refuses a log that another configuration wrote.
``sessions.jsonl`` gets one line per ``evaluate`` call on the directory (its wall time, how
many samples it logged, whether it was interrupted), so a resumed run's time is the whole
of it.

A run directory has one writer: ``one_writer`` holds ``eval.lock`` there (an ``flock``, which
dies with its process, so a killed eval leaves no stale lock; the file names the holder for
the message), and a second eval on the directory stops before it touches a file. A log that
two writers filled anyway (before the lock, or by hand) is read with its ``duplicate_rows``
counted: rows for a key that already had a row, other than the replay of a ``failed`` one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import inspect
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_sysmath.agents import Agent
from gym_sysmath.env import SysmathEnv
from gym_sysmath.evaluation.plan import EvalError
from gym_sysmath.evaluation.run import RowVerdict, SampleResult, _jsonable

#: The run header beside ``results.jsonl``: the fingerprint ``resume`` checks.
RUN_HEADER = "run.json"
RUN_HEADER_FORMAT = 1
#: One line per session that wrote to the directory.
SESSIONS = "sessions.jsonl"
#: Held (``flock``) by the eval writing the directory; it names its holder. Removed when released.
RUN_LOCK = "eval.lock"


def duplicate_rows(results: Iterable[SampleResult]) -> int:
    """The rows, in log order, whose key already had a row that was not ``failed``: the same
    sample logged twice (two evals writing one directory). A ``failed`` row followed by its
    replay is how ``--resume`` works, not a duplicate."""
    last: dict[tuple[str, str, int], SampleResult] = {}
    count = 0
    for result in results:
        earlier = last.get(result.key)
        if earlier is not None and earlier.verdict is not RowVerdict.FAILED:
            count += 1
        last[result.key] = result
    return count


class ResultsLog:
    """``results.jsonl``: appended one flushed line per sample, read back for ``--resume``."""

    def __init__(self, path: Path, *, resume: bool = False, overwrite: bool = False):
        self.path = path
        self._lock = threading.Lock()
        #: What ``load`` found: rows logged again for a sample already scored (``duplicate_rows``).
        self.duplicate_rows = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size and not resume:
            if not overwrite:
                raise EvalError(f"{path} exists: pass --resume to continue it, --overwrite to replace it, "
                                "or choose another --out")
            path.unlink()
        if not resume:  # a new run's time is its own: an earlier run's sessions in this directory are not
            path.with_name(SESSIONS).unlink(missing_ok=True)

    def load(self) -> dict[tuple[str, str, int], SampleResult]:
        """The samples logged so far, each key's last row; a line cut short by a crash is
        dropped from the file. Sets ``duplicate_rows``."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            with self.path.open("r+b") as handle:
                handle.truncate(len(data))
        rows: list[SampleResult] = []
        for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(SampleResult.from_record(json.loads(line)))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise EvalError(f"{self.path}:{number}: not a result line ({exc})") from exc
        self.duplicate_rows = duplicate_rows(rows)
        return {result.key: result for result in rows}

    def append(self, result: SampleResult) -> None:
        line = json.dumps(result.to_record(), default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote in the lock file."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        holder = json.loads(os.read(fd, 4096).decode("utf-8"))
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder["started"])))
        return f"pid {int(holder['pid'])} on host {holder['host']}, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its holder is still starting"


def _busy(out_dir: Path, fd: int) -> EvalError:
    """The refusal of a directory another eval holds, naming the holder from its lock file ``fd``."""
    return EvalError(f"{out_dir} is being written by another eval ({_holder(fd)}); wait for it to end or use "
                     "another --out")


def _take(out_dir: Path) -> int:
    """The locked lock file's descriptor, with this process written in it; ``EvalError`` naming
    the holder when another eval holds it, or saying the directory cannot be written."""
    path = out_dir / RUN_LOCK
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        while True:
            # never through a link: a planted eval.lock -> some file would be truncated and overwritten
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise EvalError(f"{path} is not a regular file: remove it, or use another --out")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy = _busy(out_dir, fd)
                os.close(fd)
                raise busy from None
            except BaseException:
                os.close(fd)
                raise
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break  # not the file a holder removed as we opened it: ours
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode())
        return fd
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symbolic link
            raise EvalError(f"{path} is a symbolic link: remove it, or use another --out") from None
        raise EvalError(f"cannot write --out {out_dir}: {exc.strerror or exc}; choose a directory you can write"
                        ) from exc


@contextlib.contextmanager
def one_writer(out_dir: Path) -> Iterator[None]:
    """Hold ``out_dir``'s lock while the block runs (``EvalError`` at once when another eval
    holds it); released when the block ends, raises or is interrupted, and by the OS when the
    process dies."""
    made = [directory for directory in (out_dir, *out_dir.parents) if not directory.exists()]
    fd = _take(out_dir)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # removed while held, so a waiting opener sees it is stale
            if os.stat(out_dir / RUN_LOCK).st_ino == os.fstat(fd).st_ino:
                os.unlink(out_dir / RUN_LOCK)
        os.close(fd)
        with contextlib.suppress(OSError):  # an eval that wrote nothing leaves no directory behind
            for directory in made:
                directory.rmdir()


def run_fingerprint(env_ids: Sequence[str], agent: Agent, *, rollouts: int, seed: int,
                    make_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What decides a run's samples and their outcomes, as JSON: the agent's configuration
    (``Agent.fingerprint``: a responses file's sha256, a python target, an endpoint's model,
    URL and sampling arguments, never a key), the env ids and their ``gym.make`` arguments,
    the seed, the rollouts and the sandbox backend. Not ``-n`` (a larger ``-n`` extends a run),
    concurrency or Ray, which change no outcome."""
    env_args = dict(make_kwargs)
    sandbox = env_args.pop("sandbox", _DEFAULT_SANDBOX)
    # a task_set pin changes no outcome (only the installed set is accepted); the rows name the set they were played on
    env_args.pop("task_set", None)
    return _jsonable({"agent": agent.fingerprint(), "env_ids": sorted(set(env_ids)), "env_args": env_args,
                      "sandbox": sandbox, "seed": seed, "rollouts": rollouts})


#: The backend an env uses when ``make_kwargs`` names none.
_DEFAULT_SANDBOX = inspect.signature(SysmathEnv.__init__).parameters["sandbox"].default
_UNSET = object()


def _show(value: Any, limit: int = 80) -> str:
    text = "unset" if value is _UNSET else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _differences(logged: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``name: logged X, this run Y`` for each field that differs, nested fields by dotted name."""
    lines = []
    for key in sorted(set(logged) | set(current), key=str):
        old, new = logged.get(key, _UNSET), current.get(key, _UNSET)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            lines += _differences(old, new, f"{prefix}{key}.")
        else:
            lines.append(f"{prefix}{key}: logged {_show(old)}, this run {_show(new)}")
    return lines


def bind_run_header(log: ResultsLog, fingerprint: Mapping[str, Any]) -> None:
    """Write ``run.json`` for a log with no samples yet; for one with samples, check that
    ``run.json`` holds this run's fingerprint, and raise ``EvalError`` naming what differs."""
    header = log.path.with_name(RUN_HEADER)
    if not (log.path.exists() and log.path.stat().st_size):
        temporary = header.with_name(f".{RUN_HEADER}.tmp")
        temporary.write_text(json.dumps({"format": RUN_HEADER_FORMAT, "fingerprint": fingerprint},
                                        indent=2, sort_keys=True) + "\n", encoding="utf-8")
        temporary.replace(header)
        return
    _check_header(log.path, fingerprint)


def _check_header(path: Path, fingerprint: Mapping[str, Any]) -> None:
    """Raise ``EvalError`` unless ``run.json`` beside the log ``path`` (which holds samples)
    holds ``fingerprint``, naming what differs."""
    header = path.with_name(RUN_HEADER)
    advice = "use another --out, or --overwrite to start it again"
    try:
        logged = json.loads(header.read_text(encoding="utf-8"))["fingerprint"]
        if not isinstance(logged, dict):
            raise TypeError("fingerprint is not an object")
    except FileNotFoundError as exc:
        raise EvalError(f"{path} has no {RUN_HEADER} beside it, so nothing shows which run wrote it; "
                        f"{advice}") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EvalError(f"{header} is unreadable ({exc}); {advice}") from exc
    differences = _differences(logged, fingerprint)
    if differences:
        raise EvalError(f"{path} was written by another run; " + "; ".join(differences) + f". To resume, "
                        f"run it as it was first run, or {advice}")


def check_can_open(out_dir: Path, fingerprint: Mapping[str, Any], *, resume: bool, overwrite: bool) -> None:
    """Raise ``EvalError`` for what opening ``out_dir`` for this run would refuse (another eval
    writing it, a log there without ``resume`` or ``overwrite``, another run's log to resume),
    writing nothing: an eval of several agents checks every agent's directory before the first plays."""
    lock = out_dir / RUN_LOCK
    if lock.is_file() and not lock.is_symlink():
        with contextlib.suppress(OSError):
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _busy(out_dir, fd) from None
            finally:
                os.close(fd)  # closing releases the probe's shared lock
    path = out_dir / "results.jsonl"
    if not (path.is_file() and path.stat().st_size):
        return
    if not resume and not overwrite:
        raise EvalError(f"{path} exists: pass --resume to continue it, --overwrite to replace it, "
                        "or choose another --out")
    if resume:
        _check_header(path, fingerprint)


def record_session(out_dir: Path, seconds: float, logged: int, interrupted: bool) -> None:
    """Append this session's line to ``sessions.jsonl``."""
    line = {"ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(seconds, 3),
            "logged": logged, "interrupted": interrupted}
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / SESSIONS).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def sessions_time(out_dir: Path) -> dict[str, Any]:
    """The sessions' whole wall time and their count (unreadable lines are skipped)."""
    seconds, count = 0.0, 0
    path = out_dir / SESSIONS
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                seconds += float(json.loads(line)["seconds"])
                count += 1
            except (ValueError, KeyError, TypeError):
                continue
    return {"seconds": round(seconds, 3), "sessions": count}
