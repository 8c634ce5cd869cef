"""A script past busy-reply-threshold on a running server (topicsrv/scripting/runner.py Rule
2): other RESP clients read BUSY, the HTTP front answers 503 `busy` (http/app.py Rule 5)
except health/metrics, SCRIPT KILL ends a script that wrote nothing and answers UNKILLABLE to
one that wrote, and a reader blocked on a topic the script writes wakes only when the script
ended (engine/core.py Rule 3), seeing all of its writes.

The threshold is real time (the script's count hook measures it with time.monotonic); the tests
wait for states (a BUSY reply, a reply arriving), never for a duration."""

from __future__ import annotations

import hashlib
import http.client
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from tests.resp.conftest import InProc, start_inproc

LOOP = "local n = 0 while true do n = n + 1 end"
SHA = hashlib.sha1(LOOP.encode()).hexdigest()
# writes, then spins until ARGV[1] (unix ms) without looking at anything else
WRITE_THEN_SPIN = """
redis.call('set', KEYS[1], 'done')
redis.call('xadd', KEYS[2], '*', 'step', '1')
redis.call('xadd', KEYS[2], '*', 'step', '2')
local deadline = tonumber(ARGV[1])
while true do
  local t = redis.call('time')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= deadline then break end
end
return 'finished'
"""


@pytest.fixture
def srv() -> Iterator[InProc]:
    s, stop = start_inproc(http=True)
    redis.Redis(port=s.port).config_set("busy-reply-threshold", 50)
    yield s
    stop()


def wait_for(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while not cond():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["reply"] = fn()
        except redis.RedisError as e:
            box["error"] = str(e)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, box


def busy(r: redis.Redis) -> bool:
    try:
        r.ping()
    except redis.exceptions.BusyLoadingError:
        return False
    except redis.ResponseError as e:
        return str(e).startswith("BUSY ")
    return False


def http_get(s: InProc, path: str) -> tuple[int, dict[str, str], bytes]:
    assert s.http_port is not None
    c = http.client.HTTPConnection("127.0.0.1", s.http_port, timeout=10)
    c.request("GET", path)
    resp = c.getresponse()
    out = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    c.close()
    return out


def test_a_runaway_script_answers_busy_and_script_kill_ends_it(srv: InProc) -> None:
    other = redis.Redis(port=srv.port, socket_timeout=10)
    t, box = in_thread(lambda: redis.Redis(port=srv.port, socket_timeout=20).eval(LOOP, 0))
    wait_for(lambda: busy(other), "another client reads BUSY")
    with pytest.raises(redis.ResponseError, match=r"^BUSY Redis is busy running a script\. "
                       r"You can only call SCRIPT KILL or SHUTDOWN NOSAVE\.$"):
        other.get("k")
    status, headers, body = http_get(srv, "/v0/topics")
    assert status == 503 and headers["retry-after"] == "1" and b'"code":"busy"' in body
    assert http_get(srv, "/v0/health")[0] == 200
    assert other.script_kill() is True
    t.join(10)
    assert box == {"error": f"Script killed by user with SCRIPT KILL... script: {SHA}, on "
                            "@user_script:1."}
    assert other.ping() is True
    assert http_get(srv, "/v0/topics")[0] == 200
    with pytest.raises(redis.ResponseError, match="^NOTBUSY No scripts in execution right now"):
        other.script_kill()


def test_a_script_that_wrote_is_unkillable_and_nobody_sees_it_half_done(srv: InProc) -> None:
    other = redis.Redis(port=srv.port, socket_timeout=30)
    other.xadd("busy:log", {"step": "0"})
    reader = redis.Redis(port=srv.port, socket_timeout=30)
    rt, read = in_thread(lambda: reader.xread({"busy:log": "$"}, block=0))
    wait_for(lambda: any(c.get("cmd") == "xread" for c in other.client_list()),
             "the reader is blocked")
    until = int(time.time() * 1000) + 1500
    st, box = in_thread(lambda: redis.Redis(port=srv.port, socket_timeout=30).eval(
        WRITE_THEN_SPIN, 2, "busy:s", "busy:log", until))
    wait_for(lambda: busy(other), "another client reads BUSY")
    with pytest.raises(redis.ResponseError, match=r"^UNKILLABLE Sorry the script already "
                       r"executed write commands"):
        other.script_kill()
    assert "reply" not in read  # the blocked reader has not seen the first XADD alone
    st.join(20)
    rt.join(20)
    assert box == {"reply": b"finished"}
    # woken once the script ended, the reader's one XREAD sees both of the script's entries
    ((name, entries),) = read["reply"]
    assert name == b"busy:log" and [f[b"step"] for _, f in entries] == [b"1", b"2"]
    assert other.get("busy:s") == b"done"


def test_a_script_past_the_threshold_keeps_calling_and_ends(srv: InProc) -> None:
    """Past the threshold the script's redis.calls still run (runner.py Rule 2): all 20,000
    INCRs land, the reply arrives, and the server answers again afterwards."""
    r = redis.Redis(port=srv.port)
    script = """
    local t = redis.call('time')
    local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 200000
    repeat t = redis.call('time') until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop
    for i = 1, 20000 do redis.call('incr', KEYS[1]) end
    return 'ok'"""
    assert r.eval(script, 1, "counter") == b"ok"
    assert r.get("counter") == b"20000"
    assert r.ping() is True


def test_function_stats_names_the_running_call_and_function_kill_ends_it(srv: InProc) -> None:
    r = redis.Redis(port=srv.port)
    r.function_load("#!lua name=spin\nredis.register_function('spin', function(k, a) "
                    "local n = 0 while true do n = n + 1 end end)", replace=True)
    t, box = in_thread(lambda: redis.Redis(port=srv.port).fcall("spin", 0, "x"))
    wait_for(lambda: busy(r), "BUSY while the function runs")
    stats = r.execute_command("FUNCTION", "STATS")
    running = stats[b"running_script"]
    assert running[b"name"] == b"spin"
    assert running[b"command"] == [b"fcall", b"spin", b"0", b"x"]
    with pytest.raises(redis.ResponseError, match=r"^BUSY .* You can only call FUNCTION KILL"):
        r.script_kill()
    assert r.execute_command("FUNCTION", "KILL") == b"OK"
    t.join(20)
    assert box["error"].startswith("Script killed by user with FUNCTION KILL")
    assert r.ping() is True


def test_a_pipelined_run_of_writes_reads_busy_and_writes_nothing(srv: InProc) -> None:
    """A run of plain XADDs (or SETs) is written as one batch (resp/batch.py) without going
    through the dispatcher: past the threshold it must read BUSY like any other command."""
    other = redis.Redis(port=srv.port, socket_timeout=10)
    t, box = in_thread(lambda: redis.Redis(port=srv.port, socket_timeout=20).eval(LOOP, 0))
    wait_for(lambda: busy(other), "another client reads BUSY")
    xadds = other.pipeline(transaction=False)
    for i in range(3):
        xadds.xadd("busy:run", {"i": str(i)})
    sets = other.pipeline(transaction=False)
    for i in range(3):
        sets.set(f"busy:k{i}", "v")
    for pipe in (xadds, sets):
        replies = pipe.execute(raise_on_error=False)
        assert [str(r).split(" ", 1)[0] for r in replies] == ["BUSY"] * 3, replies
    assert other.script_kill() is True
    t.join(10)
    assert other.exists("busy:run", "busy:k0", "busy:k1", "busy:k2") == 0
