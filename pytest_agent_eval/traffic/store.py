"""Where the run's pace lives, shared by every thread, event loop and xdist worker.

A JSON file under a file lock in the run's cache directory (one machine), or a Redis hash (across
machines).

The state is a flat map of numbers, read and written in one atomic step. ``reserve`` hands out the
next permit (virtual scheduling, GCRA with no burst: each request gets its own slot ``step`` seconds
after the previous one, so the budget is reached and never exceeded, and no waiter polls) and
``update`` applies a few operations (a cool-down from a 429, a pace learned from headers, a token
debit). Times are the store's own clock: the machine's for the file, Redis's ``TIME`` for Redis, so
that a machine whose clock is off stamps its permits like every other; a caller only ever gets back
how long to wait.

Fields: ``tat``/``step`` the written request budget (next free slot, seconds per request);
``ttat``/``tstep`` the written token budget (seconds per token); per host ``h`` the found pace
``tat:h``/``step:h`` (requests) and ``ttat:h``/``tstep:h`` (tokens), ``cool:h`` no request before
this time, ``gap:h`` the recent mean gap between permits (what the run sent when a 429 came, for the
multiplicative decrease); ``est`` tokens per request (a moving mean).
"""

from __future__ import annotations

import json
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pytest_agent_eval.secrets import scrub_text, scrub_url
from pytest_agent_eval.traffic.private import open_private

T = TypeVar("T")
FORGET_S = 600.0
"""A pace left untouched this long is forgotten (Redis: the key expires), so a later run learns its
own.
"""
WAIT_S = 5.0
"""The longest a store call may take: the file's lock (held by a live process for a read and a
write, well under a millisecond) or a Redis call (connecting, answering). Past it, the store has
failed (a holder stopped with Ctrl-Z or hung, Redis down or frozen) and says so; it never hangs the
run.
"""
LATE = 0.25
"""A paced request sent at most this part of a step after its turn (a loaded machine wakes its
sleepers late) is recorded as sent at its turn, so that the next one keeps its own: the lateness of
each wake-up does not add up over the run (it did: 1.06-1.10x the budget's time at load 7). Sends
stay at least three quarters of a step apart, and their rate over a window is the budget's.
"""
MAX_STEP_S = 10.0
"""The slowest pace 429s alone can set for a host (a request every 10 s): each 429 doubles the step,
and without a cap a provider that answers only 429 would stand the run still (16 s, 33 s, 66 s, 131
s between requests); with it the case's retries end and the case is an infrastructure error in a
bounded time.
"""


class StoreError(Exception):
    """The store cannot be used.

    The message names it (the file, the URL without its password) and what to do.
    """


class StoreWarning(UserWarning):
    """The file store's state could not be read and was started afresh."""


Op = tuple[str, str, float]
"""``(operation, field, value)``: ``cool`` (field = max(field, now + value)), ``set``, ``add``,
``slower`` (the step doubled, or the recent gap doubled when none is known yet; value is the age of
the request that got the 429: a request sent before the last slow-down says nothing new, so a burst
of 429s halves the pace once, not once each), ``faster`` (rate + value / rate).
"""


class Store(Protocol):
    def reserve(self, host: str, tokens: float, sent: int = 1) -> float:
        """Take the next permit for a request to ``host`` (with ``tokens`` expected).

        Returns -1 when nothing paces the host (no budget, no known rate, no cool-down): the caller
        may go on without permits for a moment; 0 when the permit is due and the request may go (its
        send recorded, as ``send`` does: one store call); else the seconds to wait, then ``send``.
        ``sent``: the requests to ``host`` since this process's last permit, this one included (for
        the recent gap).
        """
        ...

    def send(self, host: str) -> float:
        """Record that a paced request to ``host`` is sent now; or the seconds it must still wait.

        Permits are slots; a process that wakes late (a loaded machine) would send its late
        requests together with the ones on time. So each request is sent at least one step after
        the last one sent (the written budget's and the host's; see ``LATE``), across processes: 0
        when it may go (recorded), else how long to wait before asking again.
        """
        ...

    def update(self, ops: Sequence[Op]) -> None: ...

    def close(self) -> None: ...


def reserve_state(
    state: dict[str, float], now: float, host: str, tokens: float, sent: int = 1
) -> float:
    """The permit's slot (``reserve`` of the file store).

    ``_RESERVE`` is the same in Lua for Redis.
    """

    def get(name: str) -> float:
        return state.get(name, 0.0)

    slot = max(
        now, get("tat"), get("ttat"), get(f"cool:{host}"), get(f"tat:{host}"), get(f"ttat:{host}")
    )
    if get("step") > 0:
        state["tat"] = slot + get("step")
    if get("tstep") > 0:
        state["ttat"] = slot + tokens * get("tstep")
    if get(f"step:{host}") > 0:
        state[f"tat:{host}"] = slot + get(f"step:{host}")
    if get(f"tstep:{host}") > 0:
        state[f"ttat:{host}"] = slot + tokens * get(f"tstep:{host}")
    last = get(f"last:{host}")
    if last > 0:
        state[f"gap:{host}"] = 0.8 * get(f"gap:{host}") + 0.2 * max(slot - last, 0.0) / sent
    state[f"last:{host}"] = slot
    paced = any(get(name) > 0 for name in ("step", "tstep", f"step:{host}", f"tstep:{host}"))
    if not paced and get(f"cool:{host}") <= now:
        return -1.0
    return slot - now if slot > now else send_state(state, now, host)


def send_state(state: dict[str, float], now: float, host: str) -> float:
    """``send`` of the file store (``_SEND`` in Lua for Redis).

    A gate ``sent`` is the turn of the last request sent; the next one's turn is a step after it.
    """
    gates = (("sent", state.get("step", 0.0)), (f"sent:{host}", state.get(f"step:{host}", 0.0)))
    wait = max(state.get(gate, 0.0) + step - now for gate, step in gates)
    if wait > 0:
        return wait
    for gate, step in gates:
        turn = state.get(gate, 0.0) + step
        state[gate] = turn if now - turn <= LATE * step else now
    return 0.0


def update_state(state: dict[str, float], now: float, ops: Sequence[Op]) -> None:
    """``update`` of the file store (``_UPDATE`` in Lua for Redis)."""
    for op, name, value in ops:
        current = state.get(name, 0.0)
        if op == "cool":
            state[name] = max(current, now + value)
        elif op == "set":
            state[name] = value
        elif op == "add":
            state[name] = current + value
        elif (
            op == "slower"
        ):  # name is step:<host>; its gap is gap:<host>, its last slow-down slowed:<host>
            host = name.partition(":")[2]
            if now - value >= state.get("slowed:" + host, 0.0):
                slower = (
                    current * 2.0
                    if current > 0
                    else max(state.get("gap:" + host, 0.0), 0.001) * 2.0
                )
                state[name] = min(slower, MAX_STEP_S)
                state["slowed:" + host] = now
        elif op == "faster" and current > 0:
            rate = 1.0 / current
            state[name] = 1.0 / (rate + value / rate)


_GATE = f"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key, host = KEYS[1], ARGV[1]
local function get(name) return tonumber(redis.call('HGET', key, name) or '0') or 0 end
local function put(name, value) redis.call('HSET', key, name, string.format('%.6f', value)) end
local function wait_text(wait) return string.format('%.6f', math.max(wait, 0.000001)) end
local function send()
  local gates = {{{{'sent', get('step')}}, {{'sent:' .. host, get('step:' .. host)}}}}
  local wait = 0
  for _, gate in ipairs(gates) do wait = math.max(wait, get(gate[1]) + gate[2] - now) end
  if wait > 0 then return wait_text(wait) end
  for _, gate in ipairs(gates) do
    local turn = get(gate[1]) + gate[2]
    if now - turn > {LATE} * gate[2] then turn = now end
    put(gate[1], turn)
  end
  return '0'
end
"""
"""The start of ``_RESERVE`` and ``_SEND``: Redis's clock, the hash, and ``send_state`` in Lua (a
wait under a microsecond is written as one, never as ``0``, which means sent).
"""

_RESERVE = (
    _GATE
    + """
local tokens, sent = tonumber(ARGV[2]), tonumber(ARGV[3])
local slot = math.max(now, get('tat'), get('ttat'), get('cool:' .. host), get('tat:' .. host),
  get('ttat:' .. host))
if get('step') > 0 then put('tat', slot + get('step')) end
if get('tstep') > 0 then put('ttat', slot + tokens * get('tstep')) end
if get('step:' .. host) > 0 then put('tat:' .. host, slot + get('step:' .. host)) end
if get('tstep:' .. host) > 0 then put('ttat:' .. host, slot + tokens * get('tstep:' .. host)) end
local last = get('last:' .. host)
if last > 0 then
  put('gap:' .. host, 0.8 * get('gap:' .. host) + 0.2 * math.max(slot - last, 0) / sent)
end
put('last:' .. host, slot)
redis.call('EXPIRE', key, 600)
local paced = get('step') > 0 or get('tstep') > 0 or get('step:' .. host) > 0
  or get('tstep:' .. host) > 0
if not paced and get('cool:' .. host) <= now then return '-1' end
if slot > now then return wait_text(slot - now) end
return send()
"""
)
"""``reserve_state`` in Lua."""

_SEND = (
    _GATE
    + """
local result = send()
redis.call('EXPIRE', key, 600)
return result
"""
)

_UPDATE = f"""
local MAX_STEP_S = {MAX_STEP_S}
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local key = KEYS[1]
local function get(name) return tonumber(redis.call('HGET', key, name) or '0') or 0 end
local function put(name, value) redis.call('HSET', key, name, string.format('%.6f', value)) end
for i = 1, #ARGV, 3 do
  local op, name, value = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local current = get(name)
  if op == 'cool' then put(name, math.max(current, now + value))
  elseif op == 'set' then put(name, value)
  elseif op == 'add' then put(name, current + value)
  elseif op == 'slower' then
    local host = string.sub(name, 6)
    if now - value >= get('slowed:' .. host) then
      if current > 0 then put(name, math.min(current * 2, MAX_STEP_S))
      else put(name, math.min(math.max(get('gap:' .. host), 0.001) * 2, MAX_STEP_S)) end
      put('slowed:' .. host, now)
    end
  elseif op == 'faster' and current > 0 then
    local rate = 1 / current
    put(name, 1 / (rate + value / rate))
  end
end
redis.call('EXPIRE', key, 600)
return 0
"""


class RedisStore:
    """The pace in a Redis hash, stamped with Redis's own clock (``TIME`` inside the scripts).

    Every call gives up after ``WAIT_S`` (no retries: the next request asks again), raising
    ``StoreError``.
    """

    def __init__(self, url: str, key: str) -> None:
        from redis import Redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._url = scrub_url(url)
        self._client: Any = Redis.from_url(
            url, socket_timeout=WAIT_S, socket_connect_timeout=WAIT_S, retry=Retry(NoBackoff(), 0)
        )
        self._key = key
        self._reserve = self._client.register_script(_RESERVE)
        self._update = self._client.register_script(_UPDATE)
        self._send = self._client.register_script(_SEND)

    def _call(self, call: Callable[[], T]) -> T:
        from redis import AuthenticationError, RedisError, ResponseError

        try:
            return call()
        except RedisError as exc:
            text = scrub_text(str(exc) or type(exc).__name__)
            where = "--agent-eval-rate-limit-url (ini agent_eval_rate_limit_url)"
            if isinstance(exc, AuthenticationError) or (
                isinstance(exc, ResponseError)
                and any(w in text for w in ("WRONGPASS", "NOAUTH", "NOPERM"))
            ):
                why = f"refused the password ({text}): fix the user and password in {where}"
            else:
                why = (
                    f"cannot be reached ({type(exc).__name__}: {text}): start Redis there or fix "
                    f"{where}; without it, the budgets are kept on this machine"
                )
            raise StoreError(f"the rate-limit store {self._url} {why}") from None

    def reserve(self, host: str, tokens: float, sent: int = 1) -> float:
        args = [host, f"{tokens:.3f}", str(sent)]
        return float(self._call(lambda: self._reserve(keys=[self._key], args=args)))

    def send(self, host: str) -> float:
        return float(self._call(lambda: self._send(keys=[self._key], args=[host])))

    def update(self, ops: Sequence[Op]) -> None:
        if ops:
            args = [str(part) for op in ops for part in op]
            self._call(lambda: self._update(keys=[self._key], args=args))

    def close(self) -> None:
        self._client.close()


class FileStore:
    """The pace in a JSON file, read and written under an exclusive lock.

    The lock is ``fcntl``'s (``filelock``'s where there is none); times are the machine's clock.
    """

    forget_s = FORGET_S
    """A state untouched this long is an earlier run's, started afresh."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(_cannot_open(path, exc)) from None
        self._path = path
        self._threads = (
            threading.Lock()
        )  # flock is per open file: threads of one process take turns first

    @contextmanager
    def _state(self) -> Iterator[tuple[dict[str, float], float]]:
        if not self._threads.acquire(
            timeout=WAIT_S
        ):  # another thread waits for a lock that is not given back
            raise _locked_error(self._path)
        try:
            with _locked(self._path) as handle:
                yield from self._read_write(handle)
        finally:
            self._threads.release()

    def _read_write(self, handle: Any) -> Iterator[tuple[dict[str, float], float]]:
        """The state read, then written back whole.

        It is started afresh, with a warning, when unreadable.
        """
        handle.seek(0)
        text = handle.read()
        state = read_state(text)
        if (
            state is None
        ):  # a run killed mid-write, or another program's file: start afresh, saying so
            warnings.warn(
                StoreWarning(
                    f"the run's rate-limit state {self._path} was unreadable (not a JSON object "
                    f"of numbers: {text[:40]!r}): started afresh"
                ),
                stacklevel=1,
            )
            state = {}
        now = time.time()
        if state.get("at", 0.0) < now - self.forget_s:  # an earlier run's pace: learned anew
            state = {}
        state["at"] = now
        yield state, now
        handle.seek(0)
        handle.write(json.dumps(state))
        # cut after the text, never to 0 before it: ext4 writes a file emptied and written again
        # to disk when it is closed (auto_da_alloc), 1.4-2.8 ms a store call instead of 0.1-0.15
        handle.truncate()
        handle.flush()

    def reserve(self, host: str, tokens: float, sent: int = 1) -> float:
        with self._state() as (state, now):
            return reserve_state(state, now, host, tokens, sent)

    def send(self, host: str) -> float:
        with self._state() as (state, now):
            return send_state(state, now, host)

    def update(self, ops: Sequence[Op]) -> None:
        if ops:
            with self._state() as (state, now):
                update_state(state, now, ops)

    def close(self) -> None:
        pass


def read_state(text: str) -> dict[str, float] | None:
    """The state written in ``text`` (none yet when empty).

    ``None`` when it is not a JSON object of finite numbers (truncated, garbage, wrong types).
    """
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    numbers = [v for v in data.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) != len(data) or not all(math.isfinite(v) for v in numbers):
        return None
    return {str(k): float(v) for k, v in data.items()}


def _cannot_open(path: Path, exc: OSError) -> str:
    if path.is_symlink():
        return f"the run's rate-limit state {path} is a symlink, which is never followed: remove it"
    if path.is_dir():
        return f"the run's rate-limit state {path} is a directory, not a file: remove it"
    return (
        f"the run's rate-limit state {path} cannot be opened ({exc.strerror or exc}): make its "
        "folder writable, or give pytest another cache directory (-o cache_dir=...)"
    )


def _locked_error(path: Path) -> StoreError:
    return StoreError(
        f"the run's rate-limit state {path} is locked by another process for more than {WAIT_S:g} "
        "s (a pytest stopped with Ctrl-Z, or hung): end that process or resume it (fg), or "
        "delete the file if no run is left"
    )


@contextmanager
def _locked(path: Path) -> Iterator[Any]:
    """The state file, open and locked.

    ``WAIT_S`` at most: ``StoreError`` past it, naming the file.
    """
    # never through a symlink (SPEC §22); bytes that are not UTF-8 are read as such, and found
    # unreadable
    try:
        fd = open_private(path)
        handle = open(fd, "r+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise StoreError(_cannot_open(path, exc)) from None
    try:
        try:
            import fcntl
        except ImportError:  # Windows: filelock's lock file beside the state
            from filelock import FileLock, Timeout

            try:
                lock = FileLock(str(path) + ".lock", timeout=WAIT_S)
                lock.acquire()
            except Timeout:
                raise _locked_error(path) from None
            try:
                yield handle
            finally:
                lock.release()
        else:
            _flock(handle, path, fcntl)
            try:
                yield handle
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


def _flock(handle: Any, path: Path, fcntl: Any) -> None:
    """Take the file's lock, trying again until ``WAIT_S`` has passed.

    Tries are half a millisecond apart, doubling to 5 ms: a run holds it well under a millisecond,
    and a longer pause delays the permit.
    """
    deadline, pause = time.monotonic() + WAIT_S, 0.0005
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _locked_error(path) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.005)


def require_redis(what: str) -> None:
    """``ImportError`` saying what to install when ``redis`` is not installed.

    ``what`` needs it.
    """
    try:
        import redis  # noqa: F401
    except ImportError:
        raise ImportError(
            f"{what} needs redis: pip install 'pytest-agent-evalset[redis]' (or pip install redis)"
        ) from None


def open_store(folder: Path, url: str | None, name: str) -> Store:
    """Redis when a URL is given, else the file ``folder/name.json``."""
    if url:
        require_redis("the rate limit's Redis store")
        return RedisStore(url, f"agent_eval:{name}")
    return FileStore(folder / f"{name}.json")
