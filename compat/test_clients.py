"""Stock clients against both servers: redis-py (hiredis and pure-Python parsers, RESP2 and
RESP3, sync and asyncio, pipelines, blocking reads), redis-cli scripted, redis-benchmark."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.connection
from compat_harness import Ids  # type: ignore[import-not-found]

PARSERS = {
    "hiredis": None,  # redis-py's default when hiredis is installed (it is: pyproject)
    "python": "python",
}


def client(port: int, protocol: int, parser: str) -> redis.Redis:
    kw: dict[str, Any] = {"port": port, "protocol": protocol, "socket_timeout": 10}
    if parser == "python":
        kw["parser_class"] = redis.connection._RESP3Parser if protocol == 3 else redis.connection._RESP2Parser
    r = redis.Redis(connection_pool=redis.ConnectionPool(**kw))
    conn = r.connection_pool.get_connection()
    want = "_HiredisParser" if parser == "hiredis" else kw["parser_class"].__name__
    assert type(conn._parser).__name__ == want
    r.connection_pool.release(conn)
    return r


def test_hiredis_is_the_default_parser() -> None:
    assert redis.connection.DefaultParser.__name__ == "_HiredisParser"


def scenario(r: redis.Redis, k: str) -> list[Any]:
    """A consumer-group workload through redis-py's high-level API; returns every result with
    time-dependent fields removed."""
    out: list[Any] = []
    a = r.xadd(k, {"f": "1", "g": b"\x00\xff"})
    b = r.xadd(k, {"f": "2"})
    r.xadd(k, {"f": "3"})
    out.append(r.xlen(k))
    out.append(r.xrange(k, "-", "+", count=2))
    out.append(r.xrevrange(k, "+", "-", count=1))
    out.append(r.xread({k: 0}, count=2))
    out.append(r.xread({k: a}))
    out.append(r.xgroup_create(k, "g", id="0"))
    out.append(r.xreadgroup("g", "c1", {k: ">"}, count=2))
    out.append(r.xreadgroup("g", "c1", {k: "0"}))
    out.append(r.xack(k, "g", a))
    out.append(r.xpending(k, "g"))
    rng = r.xpending_range(k, "g", "-", "+", 10)
    out.append([{x: v for x, v in row.items() if x != "time_since_delivered"} for row in rng])
    out.append(r.xclaim(k, "g", "c2", 0, [b]))
    out.append(r.xautoclaim(k, "g", "c3", 0, "0-0", count=5, justid=True))
    groups = r.xinfo_groups(k)
    out.append(groups)
    out.append([{x: v for x, v in c.items() if x not in ("idle", "inactive")} for c in r.xinfo_consumers(k, "g")])
    out.append(r.xgroup_delconsumer(k, "g", "c3"))
    out.append(r.xdel(k, a))
    out.append(r.xtrim(k, maxlen=1, approximate=False))
    out.append(r.xlen(k))
    with pytest.raises(redis.ResponseError) as err:
        r.xreadgroup("nope", "c", {k: ">"})
    out.append(str(err.value))
    pipe = r.pipeline(transaction=False)
    pipe.xadd(k, {"p": "1"})
    pipe.xadd(k, {"p": "2"})
    pipe.xlen(k)
    pipe.xrange(k, "-", "+")
    out.append(pipe.execute())
    out.append(r.delete(k))
    return out


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_redis_py_scenario(targets: list[Any], key: str, protocol: int, parser: str) -> None:
    results = []
    for t in targets:
        r = client(t.port, protocol, parser)
        try:
            results.append(Ids().norm_py(scenario(r, f"{key}"))
                           )
        finally:
            r.close()
    for got in results[1:]:
        for i, (w, g) in enumerate(zip(results[0], got, strict=True)):
            assert g == w, f"step {i}: redis {w!r} != topicsrv {g!r}"


def test_blocking_reads_wake_on_append(targets: list[Any], key: str) -> None:
    for t in targets:
        r = client(t.port, 2, "python")
        w = client(t.port, 2, "hiredis")
        r.xgroup_create(key, "g", id="$", mkstream=True)
        got: dict[str, Any] = {}

        def reader(r: redis.Redis = r, got: dict[str, Any] = got) -> None:
            got["xread"] = r.xread({key: "$"}, block=5000)
            got["group"] = r.xreadgroup("g", "c", {key: ">"}, block=5000)
            got["group2"] = r.xreadgroup("g", "c", {key: ">"}, block=5000)

        th = threading.Thread(target=reader)
        th.start()
        time.sleep(0.2)
        w.xadd(key, {"a": "1"})
        time.sleep(0.2)
        w.xadd(key, {"a": "2"})
        th.join(10)
        assert not th.is_alive(), t.name
        assert [e[1] for e in got["xread"][0][1]] == [{b"a": b"1"}], (t.name, got)
        assert [e[1] for e in got["group"][0][1]] == [{b"a": b"1"}], (t.name, got)
        assert [e[1] for e in got["group2"][0][1]] == [{b"a": b"2"}], (t.name, got)
        t0 = time.monotonic()
        assert not r.xreadgroup("g", "c", {key: ">"}, block=100)  # times out: nil
        assert time.monotonic() - t0 >= 0.09
        r.delete(key)
        r.close()
        w.close()


@pytest.mark.parametrize("protocol", [2, 3])
async def test_asyncio_client(targets: list[Any], key: str, protocol: int) -> None:
    import trio

    results = []
    for t in targets:
        def run(port: int = t.port) -> Any:
            import asyncio

            async def main() -> Any:
                r = redis.asyncio.Redis(port=port, protocol=protocol)
                try:
                    await r.xadd(key, {"x": "1"})
                    await r.xgroup_create(key, "g", id="0")
                    res = await r.xreadgroup("g", "c", {key: ">"})
                    pend = await r.xpending(key, "g")
                    await r.delete(key)
                    return [res, pend]
                finally:
                    await r.aclose()

            return asyncio.run(main())

        results.append(Ids().norm_py(await trio.to_thread.run_sync(run)))
    assert all(r == results[0] for r in results), results


# ---- redis-cli and redis-benchmark ------------------------------------------------------------


def cli(port: int, *args: str) -> str:
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli is not installed (scripts/ensure-tools.sh installs it with root)")
    out = subprocess.run([exe, "-p", str(port), *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def norm_text(s: str) -> str:
    ids = Ids()
    return re.sub(r"\b\d{1,20}-\d{1,20}\b", lambda m: ids.ph(m.group(0).encode()), s)


def test_redis_cli_scripted(targets: list[Any], key: str) -> None:
    outputs = []
    for t in targets:
        p = t.port
        steps = [
            cli(p, "XADD", key, "*", "a", "1"),
            cli(p, "XADD", key, "*", "b", "two words"),
            cli(p, "XRANGE", key, "-", "+"),
            cli(p, "--raw", "XRANGE", key, "-", "+"),
            cli(p, "-3", "--no-raw", "XRANGE", key, "-", "+"),
            cli(p, "XGROUP", "CREATE", key, "g", "0"),
            cli(p, "-3", "--no-raw", "XREADGROUP", "GROUP", "g", "c", "STREAMS", key, ">"),
            cli(p, "-3", "--no-raw", "XINFO", "GROUPS", key),
            cli(p, "--raw", "XPENDING", key, "g"),
            cli(p, "XLEN", key),
            cli(p, "--raw", "XLEN", "no:such"),
            cli(p, "NOSUCHCMD"),
            cli(p, "DEL", key),
        ]
        outputs.append([norm_text(s) for s in steps])
    assert outputs[0][0].strip() == "<ID 1>"
    for got in outputs[1:]:
        for w, g in zip(outputs[0], got, strict=True):
            assert g == w


def test_redis_cli_reads_stdin_pipe(targets: list[Any], key: str) -> None:
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli is not installed")
    for t in targets:
        script = f"XADD {key} * a 1\nXADD {key} * a 2\nXLEN {key}\nDEL {key}\n"
        out = subprocess.run([exe, "-p", str(t.port)], input=script, capture_output=True,
                             text=True, timeout=30)
        lines = out.stdout.split()
        assert lines[2:] == ["2", "1"], (t.name, out.stdout, out.stderr)


@pytest.mark.parametrize("args", [["-t", "ping"], ["XADD", "bench:s", "*", "f", "v"]],
                         ids=["ping", "xadd"])
def test_redis_benchmark_completes(targets: list[Any], args: list[str]) -> None:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        pytest.skip("redis-benchmark is not installed (scripts/ensure-tools.sh installs it)")
    for t in targets:
        out = subprocess.run([exe, "-p", str(t.port), "-n", "2000", "-c", "10", "-q", *args],
                             capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, (t.name, out.stderr)
        assert "requests per second" in out.stdout, (t.name, out.stdout, out.stderr)
    if args[0] == "XADD":
        for t in targets:
            r = redis.Redis(port=t.port)
            assert r.xlen("bench:s") == 2000
            r.delete("bench:s")
            r.close()
