"""Helpers of the replication tests: a whole-dataset dump to compare servers, and waits."""

from __future__ import annotations

import time
from typing import Any

import redis


def dump(r: redis.Redis) -> dict[bytes, Any]:
    """Every key as a client sees it: type and content; streams with their groups (cursor,
    entries read, pending entries and their consumers)."""
    out: dict[bytes, Any] = {}
    for k in r.scan_iter(count=1000):
        t = r.type(k)
        if t == b"string":
            v: Any = r.get(k)
        elif t == b"list":
            v = r.lrange(k, 0, -1)
        elif t == b"hash":
            v = r.hgetall(k)
        elif t == b"set":
            v = sorted(r.smembers(k))
        elif t == b"zset":
            v = r.zrange(k, 0, -1, withscores=True)
        elif t == b"stream":
            groups: list[Any] = []
            try:
                infos = r.xinfo_groups(k)
            except redis.ResponseError:  # a lease queue: no groups (tests compare its state)
                infos = []
            for g in infos:
                pending = r.xpending_range(k, g["name"], "-", "+", 10_000)
                groups.append((g["name"], g["last-delivered-id"], g["entries-read"], g["pending"],
                               [(p["message_id"], p["consumer"], p["times_delivered"])
                                for p in pending]))
            v = (r.xrange(k), groups)
        else:
            v = None
        out[k] = (t, v, r.pttl(k) > 0)
    return out


def offsets_equal(primary: redis.Redis, replica: redis.Redis) -> bool:
    try:
        rep = replica.info("replication")
        return bool(rep.get("master_link_status") == "up" and
                    rep["slave_repl_offset"] == primary.info("replication")["master_repl_offset"])
    except (redis.ConnectionError, redis.TimeoutError, KeyError):
        return False


def wait_until(pred: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def caught_up(primary: redis.Redis, replica: redis.Redis, timeout: float = 30.0) -> None:
    try:
        wait_until(lambda: offsets_equal(primary, replica), timeout, "the replica to catch up")
    except AssertionError as e:
        raise AssertionError(f"{e}: primary {primary.info('replication')}, replica "
                             f"{replica.info('replication')}") from None
