"""Sans-IO request parser: bytes in, command argv lists (or one protocol error) out.

Accepts what redis-server accepts: multibulk frames (`*N\\r\\n$len\\r\\narg\\r\\n...`) and inline
commands (`PING\\r\\n`, with Redis's quoting rules). Never touches a socket.

Rule 1: a complete frame is parsed by `hiredis.Reader` (C speed); a frame that is incomplete,
malformed, or in a chunk that might make hiredis allocate a huge array is parsed by the strict
Python parser below, which mirrors redis-server's `processMultibulkBuffer` (same checks, same
error texts) and is resumable, so a large bulk arriving in many chunks costs O(1) per chunk.
Rule 2: limits are Redis's: bulk length <= `max_bulk_len` (proto-max-bulk-len), multibulk
count <= 1M, header lines and inline requests <= 64 KiB; before authentication a multibulk
count > 10 or a bulk > 16 KiB is refused.
Rule 3: a protocol error is terminal: `feed` returns the commands parsed before it and the
error text (`Protocol error: ...`); the caller replies `-ERR <text>` and closes, like Redis;
whatever is fed after it is not parsed.
Rule 4 (cross-protocol attacks, issue 23): bytes no Redis client sends are not commands. A
connection whose first bytes are a TLS record header (0x16 0x03: a ClientHello, whose session
ticket may hold `\r\nFLUSHALL\r\n`) or an inline line holding a NUL byte ends the parse
with an error text in `ATTACKS`: the caller answers nothing, runs nothing after it, logs it
and closes (like the `POST` / `Host:` guard, topicsrv/resp/dispatch.py Rule 3). A NUL is
looked for as soon as it arrives, before the line's newline does.
Rule 5 (the common read): with nothing buffered, a read of whole frames is parsed straight
from the bytes read (`_whole`): no copy into the buffer, no slice for hiredis. Only where
those frames stop (a frame cut by the read, an inline command, anything hiredis or Rule 2
would refuse) does the rest go to the buffer and the path of Rule 1, from that frame on.
"""

from __future__ import annotations

import re
from typing import Any, Final

import hiredis

from topicsrv.engine.log.entries import digits
from topicsrv.splitargs import split_args

INLINE_MAX: Final = 64 * 1024
MULTIBULK_MAX: Final = 1024 * 1024
UNAUTH_MULTIBULK_MAX: Final = 10
UNAUTH_BULK_MAX: Final = 16384
# A header hiredis would allocate hugely for is an aggregate type byte and 7 digits (regex
# [*~>%|][0-9]{7}). Mapping every digit to "0" and every aggregate type byte to "*" turns the
# search into one translate and one substring search (a regex search cost 13% of a pipelined
# SET whose random keys hold 12-digit runs).
_AGGREGATES: Final = b"*~>%|"
_SUSPECT_MAP: Final = bytes(0x30 if 0x30 <= c <= 0x39 else 0x2A if c in _AGGREGATES else c
                     for c in range(256))
_SUSPECT: Final = b"*0000000"
_BULK_HEADER: Final = re.compile(rb"\$(0|[1-9][0-9]{0,17})\r\n")

_DIGITS: Final = frozenset(b"0123456789")
TLS_RECORD: Final = 0x16  # a TLS handshake record starts 0x16 0x03 (the version's major byte)
ATTACK_TLS: Final = "a TLS handshake was sent to the plain RESP port"
ATTACK_NUL: Final = "an inline command holds a NUL byte (binary data sent to the RESP port)"
ATTACKS: Final = frozenset({ATTACK_TLS, ATTACK_NUL})


class ProtocolError(Exception):
    pass


class ProtocolAttack(ProtocolError):
    """Rule 4: the input is another protocol's (its text is one of ATTACKS)."""


def string2ll(s: bytes) -> int | None:
    """Redis's string2ll: an optional '-', no leading zeros, no spaces, fits in int64."""
    if not s or len(s) > 20:
        return None
    neg = s[:1] == b"-"
    digits = s[1:] if neg else s
    if not digits or not _DIGITS.issuperset(digits):
        return None
    if digits[:1] == b"0" and (len(digits) > 1 or neg):
        return None
    v = -int(digits) if neg else int(digits)
    if not -(1 << 63) <= v < (1 << 63):
        return None
    return v


def _frame_size(frame: list[Any], buf: bytes | bytearray, start: int, max_bulk_len: int) -> int:
    """The encoded size of a hiredis frame of bulks that starts at `buf[start]`, -1 when it is
    not a list of bulk strings each at most `max_bulk_len` long (the strict parser then gives
    Redis's verdict). One pass: the frame's checks and its size. hiredis also returns bytes for
    a simple string (`+x`) or a verbatim string inside the array, whose encoding is shorter,
    so each element's header byte is checked to be '$' where a bulk would start."""
    p = start + 3 + digits(len(frame))
    for a in frame:
        if type(a) is not bytes:
            return -1
        n = len(a)
        if n > max_bulk_len or p >= len(buf) or buf[p] != 0x24:  # a bulk starts with "$"
            return -1
        p += n + 5 + digits(n)
    return p - start


class RequestParser:
    """Feed bytes, get complete commands. One instance per connection."""

    def __init__(
        self, max_bulk_len: int = 512 << 20, authenticated: bool = True, use_hiredis: bool = True
    ) -> None:
        self.max_bulk_len = max_bulk_len
        self.use_hiredis = use_hiredis
        self.authenticated = authenticated
        self._buf = bytearray()
        self._pos = 0  # start of the first unconsumed frame in _buf
        self._fed = 0  # _buf[:_fed] has been given to the current hiredis reader
        self._reader: hiredis.Reader | None = None
        self._strict_until = 0  # frames starting before this index use the strict parser
        # resumable strict-parser state for the frame starting at _pos
        self._want = -1  # args still expected (-1: count line not read yet)
        self._argv: list[bytes] = []
        self._scan = 0  # next header position in _buf
        self._bulk = -1  # length of the bulk whose header was read, -1 if none
        self._started = False  # the first two bytes were checked for a TLS record (Rule 4)
        self._failed = False  # a protocol error was returned: nothing more is parsed (Rule 3)

    def pending(self) -> int:
        """Bytes buffered but not yet parsed into commands."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> tuple[list[list[bytes]], str | None]:
        """Parse `data`; returns (commands, protocol error text or None)."""
        if self._failed:  # Rule 3: terminal
            return [], None
        buf = self._buf
        # the second search covers a header split across reads; with nothing buffered it
        # would only look at data[:8] again
        # find(), not `in`: bytes.__contains__ first tries its argument as an int, and the
        # TypeError it formats and clears was ~1% of a P1 request's CPU (perf)
        if data.translate(_SUSPECT_MAP).find(_SUSPECT) >= 0 or (
                buf and (bytes(buf[-8:]) + data[:8]).translate(_SUSPECT_MAP).find(_SUSPECT) >= 0):
            self._strict_until = len(buf) + len(data)
        cmds: list[list[bytes]] = []
        if not buf and self._started and not self._strict_until and self.authenticated \
                and self.use_hiredis:
            done = self._whole(data, cmds)  # Rule 5
            if done == len(data):
                return cmds, None
            buf = self._buf = bytearray(data[done:])
        else:
            buf += data
        if not self._started:
            if len(buf) < 2 and (not buf or buf[0] == TLS_RECORD):
                return cmds, None  # the first two bytes decide (Rule 4)
            self._started = True
            if buf[0] == TLS_RECORD and buf[1] == 0x03:
                self._failed = True
                self._buf = bytearray()
                return cmds, ATTACK_TLS
        try:
            self._parse(cmds)
        except ProtocolError as e:
            self._failed = True
            self._buf = bytearray()
            self._pos = self._fed = 0
            self._reader = None
            return cmds, str(e)
        if self._pos:
            del buf[: self._pos]
            self._fed -= self._pos
            self._scan -= self._pos
            self._strict_until = max(0, self._strict_until - self._pos)
            self._pos = 0
        return cmds, None

    def _parse(self, cmds: list[list[bytes]]) -> None:
        buf = self._buf
        n = len(buf)
        fast = self.authenticated and self.use_hiredis
        while self._pos < n:
            if self._want >= 0 or self._scan > self._pos:
                if not self._strict(cmds):
                    return
                continue
            if buf[self._pos] != 0x2A:  # not '*': an inline command
                self._drop_reader()
                if not self._inline(cmds):
                    return
                continue
            if not fast or self._pos < self._strict_until:
                self._drop_reader()
                if not self._strict(cmds):
                    return
                continue
            reader = self._reader
            if reader is None:
                reader = self._reader = hiredis.Reader()
                self._fed = self._pos
            if self._fed < n:
                reader.feed(bytes(buf[self._fed :]))
                self._fed = n
            start = self._pos
            try:
                frame = reader.gets()
            except (hiredis.ProtocolError, TypeError, ValueError):
                frame = None  # e.g. a RESP3 map with an aggregate key: TypeError in hiredis
            if frame is False:  # incomplete: the strict parser takes this frame over
                self._drop_reader()
                if not self._strict(cmds):
                    return
                continue
            # hiredis does not say where the frame ended; its encoding is canonical (hiredis
            # rejects leading zeros and signs), so the size follows from the contents.
            size = _frame_size(frame, buf, start, self.max_bulk_len) if type(frame) is list else -1
            if size < 0:
                self._drop_reader()  # malformed or over a limit: get Redis's exact verdict
                if not self._strict(cmds):
                    return
                continue
            self._pos = start + size
            if frame:
                cmds.append(frame)

    def _whole(self, data: bytes, cmds: list[list[bytes]]) -> int:
        """Rule 5: the frames of `data` (nothing buffered before it) read straight from it;
        returns how far they went. Where they stop (a partial, inline or malformed frame) the
        reader is dropped: the caller buffers the rest for `_parse`, which reads that frame
        again as Rule 1 says."""
        reader = self._reader
        if reader is None:
            reader = self._reader = hiredis.Reader()
        reader.feed(data)
        n = len(data)
        pos = 0
        while pos < n and data[pos] == 0x2A:  # '*': a multibulk
            try:
                frame = reader.gets()
            except (hiredis.ProtocolError, TypeError, ValueError):
                break
            if type(frame) is not list:  # False (incomplete) or not an array
                break
            size = _frame_size(frame, data, pos, self.max_bulk_len)
            if size < 0:
                break
            pos += size
            if frame:
                cmds.append(frame)
        if pos < n:
            self._reader = None
            self._fed = 0
        return pos

    def _drop_reader(self) -> None:
        self._reader = None
        self._fed = self._pos

    def _inline(self, cmds: list[list[bytes]]) -> bool:
        buf = self._buf
        nl = buf.find(b"\n", self._pos)
        if buf.find(b"\0", self._pos, nl if nl >= 0 else len(buf)) >= 0:
            raise ProtocolAttack(ATTACK_NUL)
        if nl < 0:
            if len(buf) - self._pos > INLINE_MAX:
                raise ProtocolError("Protocol error: too big inline request")
            return False
        end = nl - 1 if nl > self._pos and buf[nl - 1] == 0x0D else nl
        argv = split_args(bytes(buf[self._pos : end]))
        if argv is None:
            raise ProtocolError("Protocol error: unbalanced quotes in request")
        self._pos = nl + 1
        if argv:
            cmds.append(argv)
        return True

    def _line(self, at: int, too_big: str) -> tuple[bytes, int] | None:
        buf = self._buf
        cr = buf.find(b"\r", at)
        if cr < 0:
            if len(buf) - at > INLINE_MAX:
                raise ProtocolError(f"Protocol error: too big {too_big} count string")
            return None
        if cr + 1 >= len(buf):  # the '\n' has not arrived yet
            return None
        return bytes(buf[at + 1 : cr]), cr + 2

    def _strict(self, cmds: list[list[bytes]]) -> bool:
        """Advance the frame at _pos as far as the data goes; True when it completed."""
        buf = self._buf
        if self._want < 0:
            got = self._line(self._pos, "mbulk")
            if got is None:
                return False
            text, nxt = got
            count = string2ll(text)
            if count is None or count > MULTIBULK_MAX:
                raise ProtocolError("Protocol error: invalid multibulk length")
            if not self.authenticated and count > UNAUTH_MULTIBULK_MAX:
                raise ProtocolError("Protocol error: unauthenticated multibulk length")
            self._scan = nxt
            if count <= 0:
                self._finish(nxt, cmds)
                return True
            self._want = count
            self._argv = []
            self._bulk = -1
        while self._want > 0:
            if self._bulk < 0 and self._fast_bulks():
                break
            if self._bulk < 0:
                if self._scan >= len(buf):
                    return False
                if buf[self._scan] != 0x24:  # '$'
                    got_char = chr(buf[self._scan])
                    raise ProtocolError(f"Protocol error: expected '$', got '{got_char}'")
                got = self._line(self._scan, "bulk")
                if got is None:
                    return False
                text, nxt = got
                size = string2ll(text)
                if size is None or size < 0 or size > self.max_bulk_len:
                    raise ProtocolError("Protocol error: invalid bulk length")
                if not self.authenticated and size > UNAUTH_BULK_MAX:
                    raise ProtocolError("Protocol error: unauthenticated bulk length")
                self._bulk = size
                self._scan = nxt
            if len(buf) - self._scan < self._bulk + 2:
                return False
            self._argv.append(bytes(buf[self._scan : self._scan + self._bulk]))
            self._scan += self._bulk + 2  # like Redis, the CRLF after a bulk is not checked
            self._bulk = -1
            self._want -= 1
        argv = self._argv
        self._argv = []
        self._finish(self._scan, cmds)
        cmds.append(argv)
        return True

    def _fast_bulks(self) -> bool:
        """Take the run of complete, canonical bulks at _scan in one tight loop (a command
        of 1M arguments parses ~3x faster); anything unusual (over a limit, incomplete, not
        `$<digits>\\r\\n`) is left to the checks of `_strict`. True when no arg is missing."""
        buf = self._buf
        scan, want, argv = self._scan, self._want, self._argv
        limit = self.max_bulk_len if self.authenticated else min(self.max_bulk_len, UNAUTH_BULK_MAX)
        n = len(buf)
        match = _BULK_HEADER.match
        with memoryview(buf) as view:
            while want:
                m = match(buf, scan)
                if m is None:
                    break
                size = int(m.group(1))
                start = m.end()
                if size > limit or start + size + 2 > n:
                    break
                argv.append(bytes(view[start : start + size]))
                scan = start + size + 2
                want -= 1
        self._scan, self._want = scan, want
        return want == 0

    def _finish(self, end: int, cmds: list[list[bytes]]) -> None:
        self._pos = end
        self._scan = end
        self._want = -1
        self._fed = end
