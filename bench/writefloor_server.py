"""The floor servers of bench/writefloor.py (its Rule 1): the least a server written in Python
must do to answer the list, hash, set and sorted-set rows of `make bench` durably. Typed for
mypyc: bench/writefloor.py compiles this file at run time (as topicsrv's hot path is), so
that a floor is not slower than topicsrv for being interpreted.

Rule 1 (the loop): one thread, one epoll set, non-blocking sockets, hiredis parsing, replies
encoded by hand. A loop turn reads every ready client, answers its whole batch, writes the
turn's journal with one os.write (synced by the synced floors: Rule 2b), then sends each client
its replies (Redis's order: the AOF is written in beforeSleep, before the replies).
Rule 2 (the journal): every write is journaled as the command's own RESP, appended to a
buffer (an AOF; nothing is read back: no recovery, no checkpoint).
Rule 2b (`synced`, `bare-synced`: the disk class's window): `packed`'s (`bare`'s) store and
journal, and the journal is also made durable as topicsrv's `--keyspace-durability disk` makes
it (storage/wal.py Rule 4, docs/storage.md "Group commit and the `disk` window"): every write
is on disk within about 2 ms (LINGER_S, plus up to two sync times) of being written, and the
replies never wait for it (`disk` acknowledges on enqueue). The loop does no sync work itself:
a child process forked before the loop runs `fdatasync` on the journal every LINGER_S (no
thread to hand the GIL to, not even an event to set), and leaves once the server is gone. The
loop's `write` can still wait on writeback, and the sync competes for the machine's cores: that
is the promise's cost, which the floor measures.
Rule 3 (the stores): `bare` keeps Python's own containers (a deque, a dict, a set, and a dict
with a sorted list of (score, member) for a sorted set), as does `bare-synced`; `packed` and
`synced` keep topicsrv's own value classes (engine/keyspace: quicklist.ListValue,
hashvalue.HashValue, setvalue.SetValue, zsetvalue.ZsetValue), compiled, as the memory rows need
them. None checks expiry, ACLs, WATCH, blocked clients or memory, counts, notifies, or isolates
a transaction.
Rule 4: only the rows' commands, their preload's (RPUSH, HSET, SADD, ZADD of many), DBSIZE,
and the clients' start-ups (CONFIG answers an empty array, CLIENT and SELECT +OK, HELLO its
proto); a wrong kind answers WRONGTYPE, anything else an error, and the server goes on.
"""

from __future__ import annotations

import bisect
import os
import socket
import time
import traceback
from collections import deque
from typing import Any, NoReturn

import hiredis

from bench.epollio import accept_all, listen
from topicsrv.engine.keyspace.hashvalue import HashValue
from topicsrv.engine.keyspace.quicklist import ListValue
from topicsrv.engine.keyspace.setvalue import SetValue
from topicsrv.engine.keyspace.zsetvalue import ZsetValue

LINGER_S = 0.002  # Rule 2b: topicsrv's storage/wal.py LINGER_S
WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"


class WrongType(Exception):
    pass


def _bulk(v: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(v), v)


def _array(vs: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(vs) + b"".join([_bulk(v) for v in vs])


def _score(s: float) -> bytes:
    return (b"%.17g" % s) if s != int(s) else b"%d" % int(s)


class SortedSet:
    """Rule 3's bare sorted set."""

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: list[tuple[float, bytes]] = []


class Store:
    """The keyspace of one floor (Rule 3): each method answers one command's reply."""

    def __init__(self) -> None:
        self.data: dict[bytes, Any] = {}

    def _get(self, key: bytes, kind: type) -> Any:
        v = self.data.get(key)
        if v is not None and type(v) is not kind:
            raise WrongType()
        return v

    def _make(self, key: bytes, kind: type) -> Any:
        v = self.data.get(key)
        if v is None:
            v = self.data[key] = kind()
        elif type(v) is not kind:
            raise WrongType()
        return v

    def lpush(self, key: bytes, es: list[bytes]) -> bytes:
        raise NotImplementedError

    def rpush(self, key: bytes, es: list[bytes]) -> bytes:
        raise NotImplementedError

    def rpop(self, key: bytes) -> bytes:
        raise NotImplementedError

    def hset(self, key: bytes, fvs: list[bytes]) -> bytes:
        raise NotImplementedError

    def hget(self, key: bytes, field: bytes) -> bytes:
        raise NotImplementedError

    def sadd(self, key: bytes, ms: list[bytes]) -> bytes:
        raise NotImplementedError

    def sismember(self, key: bytes, m: bytes) -> bytes:
        raise NotImplementedError

    def zadd(self, key: bytes, sms: list[bytes]) -> bytes:
        raise NotImplementedError

    def zfirst(self, key: bytes, count: int) -> bytes:
        """ZRANGEBYSCORE key -inf +inf LIMIT 0 count."""
        raise NotImplementedError

    def zpopmin(self, key: bytes) -> bytes:
        raise NotImplementedError


class Bare(Store):
    def lpush(self, key: bytes, es: list[bytes]) -> bytes:
        v: deque[bytes] = self._make(key, deque)
        v.extendleft(es)
        return b":%d\r\n" % len(v)

    def rpush(self, key: bytes, es: list[bytes]) -> bytes:
        v: deque[bytes] = self._make(key, deque)
        v.extend(es)
        return b":%d\r\n" % len(v)

    def rpop(self, key: bytes) -> bytes:
        v: deque[bytes] | None = self._get(key, deque)
        if v is None:
            return b"$-1\r\n"
        e = v.pop()
        if not v:
            del self.data[key]
        return _bulk(e)

    def hset(self, key: bytes, fvs: list[bytes]) -> bytes:
        v: dict[bytes, bytes] = self._make(key, dict)
        n = len(v)
        for i in range(0, len(fvs) - 1, 2):
            v[fvs[i]] = fvs[i + 1]
        return b":%d\r\n" % (len(v) - n)

    def hget(self, key: bytes, field: bytes) -> bytes:
        v: dict[bytes, bytes] | None = self._get(key, dict)
        got = None if v is None else v.get(field)
        return b"$-1\r\n" if got is None else _bulk(got)

    def sadd(self, key: bytes, ms: list[bytes]) -> bytes:
        v: set[bytes] = self._make(key, set)
        n = len(v)
        v.update(ms)
        return b":%d\r\n" % (len(v) - n)

    def sismember(self, key: bytes, m: bytes) -> bytes:
        v: set[bytes] | None = self._get(key, set)
        return b":1\r\n" if v is not None and m in v else b":0\r\n"

    def zadd(self, key: bytes, sms: list[bytes]) -> bytes:
        v: SortedSet = self._make(key, SortedSet)
        n = 0
        for i in range(0, len(sms) - 1, 2):
            s, m = float(sms[i]), sms[i + 1]
            old = v.scores.get(m)
            if old is None:
                n += 1
            elif old == s:
                continue
            else:
                v.order.remove((old, m))
            v.scores[m] = s
            bisect.insort(v.order, (s, m))
        return b":%d\r\n" % n

    def zfirst(self, key: bytes, count: int) -> bytes:
        v: SortedSet | None = self._get(key, SortedSet)
        return _array([m for _, m in v.order[:count]] if v is not None else [])

    def zpopmin(self, key: bytes) -> bytes:
        v: SortedSet | None = self._get(key, SortedSet)
        if v is None:
            return b"*0\r\n"
        s, m = v.order.pop(0)
        del v.scores[m]
        if not v.order:
            del self.data[key]
        return _array([m, _score(s)])


class Packed(Store):
    def lpush(self, key: bytes, es: list[bytes]) -> bytes:
        v: ListValue = self._make(key, ListValue)
        for e in es:
            v.push_head(e)
        return b":%d\r\n" % len(v)

    def rpush(self, key: bytes, es: list[bytes]) -> bytes:
        v: ListValue = self._make(key, ListValue)
        for e in es:
            v.push_tail(e)
        return b":%d\r\n" % len(v)

    def rpop(self, key: bytes) -> bytes:
        v: ListValue | None = self._get(key, ListValue)
        if v is None:
            return b"$-1\r\n"
        e = v.pop_tail()
        if not len(v):
            del self.data[key]
        return _bulk(e)

    def hset(self, key: bytes, fvs: list[bytes]) -> bytes:
        v: HashValue = self._make(key, HashValue)
        n = 0
        for i in range(0, len(fvs) - 1, 2):
            n += v.set(fvs[i], fvs[i + 1])
        return b":%d\r\n" % n

    def hget(self, key: bytes, field: bytes) -> bytes:
        v: HashValue | None = self._get(key, HashValue)
        got = None if v is None else v.get(field)
        return b"$-1\r\n" if got is None else _bulk(got)

    def sadd(self, key: bytes, ms: list[bytes]) -> bytes:
        v: SetValue = self._make(key, SetValue)
        return b":%d\r\n" % v.add_many(ms)

    def sismember(self, key: bytes, m: bytes) -> bytes:
        v: SetValue | None = self._get(key, SetValue)
        return b":1\r\n" if v is not None and m in v else b":0\r\n"

    def zadd(self, key: bytes, sms: list[bytes]) -> bytes:
        v: ZsetValue = self._make(key, ZsetValue)
        n = 0
        for i in range(0, len(sms) - 1, 2):
            n += v.set(sms[i + 1], float(sms[i]))
        return b":%d\r\n" % n

    def zfirst(self, key: bytes, count: int) -> bytes:
        v: ZsetValue | None = self._get(key, ZsetValue)
        return _array(v.members_at(0, min(count, len(v))) if v is not None else [])

    def zpopmin(self, key: bytes) -> bytes:
        v: ZsetValue | None = self._get(key, ZsetValue)
        if v is None:
            return b"*0\r\n"
        m, s = v.end(False)
        v.drop_end(False, m)
        if not len(v):
            del self.data[key]
        return _array([m, _score(s)])


def _write(store: Store, c: bytes, req: list[bytes]) -> bytes | None:
    """A write's reply (Rule 2: the caller journals it), None when `c` is not a write."""
    if c == b"LPUSH" and len(req) > 2:
        return store.lpush(req[1], req[2:])
    if c == b"RPOP" and len(req) == 2:
        return store.rpop(req[1])
    if c == b"HSET" and len(req) > 3 and len(req) % 2 == 0:
        return store.hset(req[1], req[2:])
    if c == b"SADD" and len(req) > 2:
        return store.sadd(req[1], req[2:])
    if c == b"ZADD" and len(req) > 3 and len(req) % 2 == 0:
        return store.zadd(req[1], req[2:])
    if c == b"ZPOPMIN" and len(req) == 2:
        return store.zpopmin(req[1])
    if c == b"RPUSH" and len(req) > 2:
        return store.rpush(req[1], req[2:])
    return None


def _read(store: Store, c: bytes, req: list[bytes]) -> bytes:
    if c == b"PING":
        return b"+PONG\r\n"
    if c == b"HGET" and len(req) == 3:
        return store.hget(req[1], req[2])
    if c == b"SISMEMBER" and len(req) == 3:
        return store.sismember(req[1], req[2])
    if (c == b"ZRANGEBYSCORE" and len(req) == 7 and req[2] == b"-inf" and req[3] == b"+inf"
            and req[4].upper() == b"LIMIT" and req[5] == b"0"):
        return store.zfirst(req[1], int(req[6]))
    if c == b"DBSIZE":
        return b":%d\r\n" % len(store.data)
    if c == b"CONFIG":
        return b"*0\r\n"
    if c == b"CLIENT" or c == b"SELECT":
        return b"+OK\r\n"
    if c == b"HELLO":  # redis-py 8 asks for RESP3: these replies read the same in it
        return b"%1\r\n+proto\r\n:3\r\n"
    return b"-ERR unknown command or arguments on the floor server\r\n"


def _journal(buf: bytearray, req: list[bytes]) -> None:
    buf += b"*%d\r\n" % len(req)
    buf += b"".join([_bulk(a) for a in req])


def _sync_forever(jfd: int, parent: int) -> NoReturn:
    """Rule 2b, in the forked child: the journal synced every LINGER_S while `parent` lives.
    The child never returns into the parent's code (os._exit); a failure is printed to the
    floor's stderr (its err.log) and is exit status 1, and bench/writefloor.py checks after
    the rounds that every synced floor still has its child (`check_synced`)."""
    code = 0
    try:
        while os.getppid() == parent:
            time.sleep(LINGER_S)
            os.fdatasync(jfd)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def serve(port: int, mode: str, journal_path: str) -> None:
    """Rule 1's loop on 127.0.0.1:`port` until killed."""
    store: Store = Bare() if mode.startswith("bare") else Packed()
    jbuf = bytearray()
    jfd = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    parent = os.getpid()  # read before the fork: a child that read it after could see init's
    if mode.endswith("synced") and os.fork() == 0:  # Rule 2b
        _sync_forever(jfd, parent)
    srv, ep = listen(port)
    conns: dict[int, tuple[socket.socket, Any]] = {}
    while True:
        replies: list[tuple[socket.socket, list[bytes]]] = []
        for fd, _ in ep.poll():
            if fd == srv.fileno():
                for s in accept_all(srv, ep):
                    conns[s.fileno()] = (s, hiredis.Reader())
                continue
            s, reader = conns[fd]
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                s.close()
                del conns[fd]
                continue
            reader.feed(data)
            out: list[bytes] = []
            while True:
                req = reader.gets()
                if req is False:
                    break
                c = bytes(req[0]).upper()
                try:
                    got = _write(store, c, req)
                    if got is None:
                        got = _read(store, c, req)
                    else:
                        _journal(jbuf, req)
                except WrongType:
                    got = WRONGTYPE
                except (ValueError, IndexError) as e:
                    got = b"-ERR " + str(e).replace("\r", " ").replace("\n", " ").encode() + b"\r\n"
                out.append(got)
            if out:
                replies.append((s, out))
        if jbuf:  # Rule 1: the turn's journal, before its replies
            os.write(jfd, jbuf)
            del jbuf[:]
        for s, out in replies:
            try:
                s.sendall(b"".join(out))  # a blocking send is fine for a floor: it costs none here
            except OSError:
                pass
