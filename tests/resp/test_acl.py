"""Users on the RESP front (issue 17, roles): `default` (--requirepass) and the read-only
`reader` (--read-token), Redis 7.0's AUTH/HELLO/ACL texts, NOPERM for what a reader may not
run, on both I/O paths."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
import redis

from .conftest import RESP_IO, InProc, frame, read_to_eof, start_inproc

PW, RT = "s3cret", "read-only-token"


@pytest.fixture(params=RESP_IO, scope="module")
def srv(request: pytest.FixtureRequest) -> Iterator[InProc]:
    s, stop = start_inproc(resp_io=request.param, requirepass=PW, read_token=RT)
    yield s
    stop()


def client(srv: InProc, user: str | None, password: str | None) -> redis.Redis:
    return redis.Redis(port=srv.port, username=user, password=password, socket_timeout=5)


def raw(srv: InProc, *cmds: list[bytes]) -> bytes:
    """Send `cmds` pipelined on one connection, then QUIT; every reply byte until the close."""
    s = srv.connect()
    try:
        s.sendall(b"".join(frame(*c) for c in cmds) + frame(b"QUIT"))
        out = read_to_eof(s)
    finally:
        s.close()
    assert out.endswith(b"+OK\r\n"), out
    return out[:-5]


def noperm(name: str) -> str:
    return f"NOPERM this user has no permissions to run the '{name}' command"


def test_reader_runs_reads_and_gets_redis_noperm_text_for_writes(srv: InProc) -> None:
    admin = client(srv, None, PW)
    admin.xadd("ev", {"a": "1"})
    admin.xgroup_create("ev", "g", id="0")
    r = client(srv, "reader", RT)
    assert r.acl_whoami() == "reader"
    assert r.ping() is True
    assert r.xlen("ev") == 1
    assert len(r.xrange("ev")) == 1
    assert len(r.xread({"ev": "0"})[0][1]) == 1
    assert r.xinfo_stream("ev")["length"] == 1
    assert r.xinfo_groups("ev")[0]["name"] == b"g"
    assert r.xpending("ev", "g")["pending"] == 0
    assert r.execute_command("TOPIC.DIFF", "ev", "0")
    assert "redis_version" in r.info()
    assert b"ev" in r.keys("*")
    for argv, name in (
        (("XADD", "ev", "*", "a", "2"), "xadd"),
        (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "ev", ">"), "xreadgroup"),
        (("XACK", "ev", "g", "0-1"), "xack"),
        (("XGROUP", "CREATE", "ev", "g2", "0"), "xgroup|create"),
        (("XTRIM", "ev", "MAXLEN", "0"), "xtrim"),
        (("DEL", "ev"), "del"),
        (("FLUSHALL",), "flushall"),
        (("TOPIC.DELETE", "ev", "1"), "topic.delete"),
        (("TOPIC.CLAIM", "ev", "w"), "topic.claim"),
        (("CONFIG", "GET", "maxmemory"), "config|get"),
        (("CLIENT", "KILL", "ID", "999"), "client|kill"),
        (("CLIENT", "LIST"), "client|list"),
        (("ACL", "LIST"), "acl|list"),
        (("SHUTDOWN",), "shutdown"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError) as e:
            r.execute_command(*argv)
        assert f"NOPERM {e.value}" == noperm(name), argv
    assert admin.xlen("ev") == 1  # nothing the reader sent changed anything
    assert [g["name"] for g in admin.xinfo_groups("ev")] == [b"g"]
    assert admin.xpending("ev", "g")["pending"] == 0


def test_the_exact_reply_bytes_and_a_pipelined_xadd_run_is_refused_too(srv: InProc) -> None:
    """A run of plain XADDs is coalesced into one write for `default` (batch.py): a reader's
    run must be refused command by command all the same."""
    xadd = [b"XADD", b"piped", b"*", b"f", b"v"]
    out = raw(srv, [b"AUTH", b"reader", RT.encode()], xadd, xadd, xadd, [b"XLEN", b"piped"])
    err = b"-" + noperm("xadd").encode() + b"\r\n"
    assert out == b"+OK\r\n" + err * 3 + b":0\r\n"


def test_multi_as_reader_aborts_on_a_write(srv: InProc) -> None:
    out = raw(srv, [b"AUTH", b"reader", RT.encode()], [b"MULTI"],
              [b"XADD", b"tx", b"*", b"f", b"v"], [b"EXEC"])
    assert out == (b"+OK\r\n+OK\r\n-" + noperm("xadd").encode() + b"\r\n"
                   b"-EXECABORT Transaction discarded because of previous errors.\r\n")
    assert client(srv, "default", PW).xlen("tx") == 0


def test_auth_hello_reset_and_wrong_passwords(srv: InProc) -> None:
    wrong = "WRONGPASS invalid username-password pair or user is disabled."
    for user, pw in (("reader", PW), ("reader", "nope"), ("default", RT), ("nobody", PW)):
        out = raw(srv, [b"AUTH", user.encode(), pw.encode()], [b"ACL", b"WHOAMI"])
        assert out == f"-{wrong}\r\n-NOAUTH Authentication required.\r\n".encode(), (user, pw)
    out = raw(srv, [b"AUTH", PW.encode()], [b"ACL", b"WHOAMI"])
    assert out == b"+OK\r\n$7\r\ndefault\r\n"
    out = raw(srv, [b"HELLO", b"2", b"AUTH", b"reader", RT.encode()], [b"ACL", b"WHOAMI"],
              [b"RESET"], [b"ACL", b"WHOAMI"])
    assert out.endswith(b"$6\r\nreader\r\n+RESET\r\n-NOAUTH Authentication required.\r\n")
    # a logged-in default user can become the reader (and loses its rights)
    out = raw(srv, [b"AUTH", PW.encode()], [b"AUTH", b"reader", RT.encode()],
              [b"XADD", b"x", b"*", b"f", b"v"])
    assert out == b"+OK\r\n+OK\r\n-" + noperm("xadd").encode() + b"\r\n"


def test_acl_commands_tell_what_exists(srv: InProc) -> None:
    admin = client(srv, "default", PW)
    sha = hashlib.sha256
    assert admin.acl_users() == ["default", "reader"]
    assert admin.acl_list() == [
        f"user default on #{sha(PW.encode()).hexdigest()} ~* &* +@all",
        f"user reader on #{sha(RT.encode()).hexdigest()} ~* &* +@all -@write -@admin "
        "-publish -spublish -@scripting +eval_ro +evalsha_ro +fcall_ro +script|exists "
        "+script|help +function|list +function|stats +function|help",
    ]
    user = admin.acl_getuser("reader")
    assert user["flags"] == ["on"] and user["passwords"] == [sha(RT.encode()).hexdigest()]
    assert admin.acl_getuser("nobody") is None
    assert admin.acl_dryrun("reader", "XADD", "s", "*", "a", "1") == (
        b"This user has no permissions to run the 'xadd' command")
    assert admin.acl_dryrun("reader", "XRANGE", "s", "-", "+") == b"OK"
    reads = admin.acl_cat("read")
    assert "xrange" in reads and "xinfo|stream" in reads and "xadd" not in reads
    assert "xreadgroup" in admin.acl_cat("write")
    assert "stream" in admin.acl_cat()
    # redis-server 7.0's `ACL CAT scripting` but SCRIPT DEBUG (not implemented)
    assert sorted(admin.acl_cat("scripting")) == [
        "eval", "eval_ro", "evalsha", "evalsha_ro", "fcall", "fcall_ro", "function|delete",
        "function|dump", "function|flush", "function|help", "function|kill", "function|list",
        "function|load", "function|restore", "function|stats", "script|exists",
        "script|flush", "script|help", "script|kill", "script|load"]
    assert admin.acl_dryrun("reader", "EVAL", "return 1", "0") == (
        b"This user has no permissions to run the 'eval' command")
    assert admin.acl_dryrun("reader", "EVAL_RO", "return 1", "0") == b"OK"
    with pytest.raises(redis.ResponseError, match="Unknown category 'nope'"):
        admin.acl_cat("nope")
    for argv in (("ACL", "SETUSER", "bob", "on"), ("ACL", "DELUSER", "reader"),
                 ("ACL", "LOAD"), ("ACL", "SAVE"), ("ACL", "LOG")):
        with pytest.raises(redis.ResponseError, match="not supported: topicsrv's users are fixed"):
            admin.execute_command(*argv)
    assert admin.acl_users() == ["default", "reader"]
    assert len(admin.acl_genpass()) == 64
    assert "user=reader" in raw(srv, [b"AUTH", b"reader", RT.encode()],
                                [b"CLIENT", b"INFO"]).decode()


def test_without_read_token_there_is_no_reader_and_default_is_nopass() -> None:
    s, stop = start_inproc(resp_io="tasks")
    try:
        c = client(s, None, None)
        assert c.acl_users() == ["default"]
        assert c.acl_list() == ["user default on nopass ~* &* +@all"]
        assert c.acl_whoami() == "default"
        with pytest.raises(redis.AuthenticationError):
            client(s, "reader", "x").ping()
        assert client(s, "default", "anything").acl_whoami() == "default"  # nopass
    finally:
        stop()


def test_reader_runs_read_only_scripts_only(srv: InProc) -> None:
    """The reader may run EVAL_RO, EVALSHA_RO and FCALL_RO (and look at the caches); every
    other scripting command is refused with Redis's NOPERM text before it runs."""
    admin = client(srv, None, PW)
    admin.set("acl:s", "v")
    admin.function_load("#!lua name=acl_lib\n"
                        "redis.register_function{function_name='acl_ro', callback="
                        "function(keys) return redis.call('get', keys[1]) end, "
                        "flags={'no-writes'}}\n"
                        "redis.register_function('acl_rw', function(keys) "
                        "return redis.call('set', keys[1], 'w') end)", replace=True)
    sha = admin.script_load("return redis.call('get', KEYS[1])")
    r = client(srv, "reader", RT)
    assert r.execute_command("EVAL_RO", "return redis.call('get', KEYS[1])", 1, "acl:s") == b"v"
    assert r.execute_command("EVALSHA_RO", sha, 1, "acl:s") == b"v"
    assert r.execute_command("FCALL_RO", "acl_ro", 1, "acl:s") == b"v"
    assert r.script_exists(sha) == [True]
    assert [lib[1] for lib in r.function_list()] == [b"acl_lib"]
    refused = [
        (["EVAL", "return 1", "0"], "eval"), (["EVALSHA", sha, "0"], "evalsha"),
        (["FCALL", "acl_ro", "0"], "fcall"), (["FCALL", "acl_rw", "1", "acl:s"], "fcall"),
        (["SCRIPT", "LOAD", "return 2"], "script|load"), (["SCRIPT", "FLUSH"], "script|flush"),
        (["SCRIPT", "KILL"], "script|kill"), (["FUNCTION", "KILL"], "function|kill"),
        (["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('x', function() end)"],
         "function|load"),
        (["FUNCTION", "DELETE", "acl_lib"], "function|delete"),
        (["FUNCTION", "FLUSH"], "function|flush"),
    ]
    out = raw(srv, [b"AUTH", b"reader", RT.encode()], *[[a.encode() for a in argv]
                                                        for argv, _ in refused])
    assert out == b"+OK\r\n" + b"".join(b"-" + noperm(name).encode() + b"\r\n"
                                        for _, name in refused)
    assert admin.get("acl:s") == b"v"  # nothing ran
    assert admin.script_exists(sha) == [True]
    assert [lib[1] for lib in admin.function_list()] == [b"acl_lib"]
    assert admin.execute_command("EVALSHA", admin.script_load("return 2"), 0) == 2


def test_commands_a_script_calls_are_checked_against_the_calling_user(srv: InProc) -> None:
    """`redis.call` runs with the caller's permissions: the reader's read-only script calling
    SET gets Redis's ACL error (checked before the read-only rule, as redis-server does), the
    default user's the read-only error; redis.acl_check_cmd answers for the caller too."""
    admin = client(srv, None, PW)
    r = client(srv, "reader", RT)
    body = b"return redis.pcall('set', KEYS[1], 'x')"
    out = raw(srv, [b"AUTH", b"reader", RT.encode()], [b"EVAL_RO", body, b"1", b"acl:w"],
              [b"AUTH", PW.encode()], [b"EVAL_RO", body, b"1", b"acl:w"])
    assert out == (b"+OK\r\n-ERR The user executing the script can't run this command or "
                   b"subcommand\r\n+OK\r\n-ERR Write commands are not allowed from read-only "
                   b"scripts.\r\n")
    with pytest.raises(redis.ResponseError, match=r"^The user executing the script can't run "
                       r"this command or subcommand script: [0-9a-f]{40}, on @user_script:1\.$"):
        r.execute_command("EVAL_RO", "return redis.call('xadd', KEYS[1], '*', 'a', '1')",
                          1, "acl:w")
    check = ("return {redis.acl_check_cmd('set', 'k', 'v') and 1 or 0, "
             "redis.acl_check_cmd('xadd', 'k', '*', 'a', 'b') and 1 or 0, "
             "redis.acl_check_cmd('get', 'k') and 1 or 0, "
             "redis.acl_check_cmd('eval', 'return 1', '0') and 1 or 0}")
    assert r.execute_command("EVAL_RO", check, 0) == [0, 0, 1, 0]
    assert admin.execute_command("EVAL_RO", check, 0) == [1, 1, 1, 1]
    assert admin.exists("acl:w") == 0
