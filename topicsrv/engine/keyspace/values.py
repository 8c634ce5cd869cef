"""String values as Redis keeps them: size limit, integer and float forms, OBJECT ENCODING.

Rule 1: a value is `bytes`; its Redis encoding is derived from the bytes (`int` for a canonical
64-bit integer of at most 20 characters, `embstr` up to 44 bytes, `raw` beyond), except where
Redis keeps another one: APPEND and SETRANGE leave `raw`, INCRBYFLOAT leaves `embstr` (the
caller records that override).
Rule 2: integers parse as Redis's string2ll (no spaces, no '+', no leading zeros, no "-0");
floats as string2ld and print as ld2string(LD_STR_HUMAN): the arithmetic is done on x87 80-bit
long doubles (64-bit mantissa, round half to even) emulated exactly with fractions, so
`INCRBYFLOAT k 0.1` answers "0.1" as redis-server does, not Python's "0.10000000000000001".
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Final

MAX_STRING: Final = 512 * 1024 * 1024  # Redis's checkStringLength bound (proto-max-bulk-len default)
EMBSTR_MAX: Final = 44
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
ENC_INT, ENC_EMBSTR, ENC_RAW = "int", "embstr", "raw"
SHARED_INTEGERS: Final = 10_000  # redis-server shares the objects of 0..9999 (OBJECT REFCOUNT)

_FLOAT: Final = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INF: Final = {b"inf": math.inf, b"+inf": math.inf, b"-inf": -math.inf, b"infinity": math.inf,
        b"+infinity": math.inf, b"-infinity": -math.inf}


def parse_i64(raw: bytes) -> int | None:
    """Redis's string2ll: the integer, or None when `raw` is not one's canonical form."""
    n = len(raw)
    if n == 0 or n > 20:
        return None
    if raw == b"0":
        return 0
    if n <= 18 and 0x31 <= raw[0] <= 0x39:  # a positive number (a count, an index): no int()
        v = 0
        for c in raw:
            if not 0x30 <= c <= 0x39:
                return None
            v = v * 10 + c - 0x30
        return v
    body = raw[1:] if raw[:1] == b"-" else raw
    if not body or not body.isdigit() or body[:1] == b"0" or not body.isascii():
        return None
    v = int(raw)
    return v if I64_MIN <= v <= I64_MAX else None


def encoding(value: bytes) -> str:
    """OBJECT ENCODING of a value stored by SET (Rule 1)."""
    if len(value) <= 20 and parse_i64(value) is not None:
        return ENC_INT
    return ENC_EMBSTR if len(value) <= EMBSTR_MAX else ENC_RAW


def refcount(value: bytes, enc: str) -> int:
    """OBJECT REFCOUNT: redis-server's shared integers report INT_MAX, everything else 1."""
    if enc == ENC_INT:
        v = parse_i64(value)
        if v is not None and 0 <= v < SHARED_INTEGERS:
            return 2147483647
    return 1


# ---- long double emulation (Rule 2) ---------------------------------------------------------

_MANT: Final = 64
_EMIN: Final = -16445  # the smallest subnormal exponent of x87 extended precision
_EMAX: Final = 16384


def _round_ext(x: Fraction) -> Fraction | float:
    """`x` rounded to the nearest x87 long double (half to even); +-inf on overflow."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    if e >= _EMAX:
        return sign * math.inf
    shift = max(e - (_MANT - 1), _EMIN)
    scaled = a / (Fraction(2) ** shift)
    m = round(scaled)  # Fraction.__round__ rounds half to even
    if m.bit_length() > _MANT:
        m >>= 1
        shift += 1
    if shift + _MANT > _EMAX:
        return sign * math.inf
    return sign * Fraction(m) * (Fraction(2) ** shift)


_HEXFLOAT: Final = re.compile(rb"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?(?:[pP]([+-]?[0-9]+))?")
# Beyond these decimal / binary magnitudes a nonzero input overflows or rounds to zero for
# certain; between them the exact value is computed (an exponent of 1e9 would cost minutes).
_DEC_MAG: Final = (-4960, 4940)
_BIN_MAG: Final = (-16500, 16400)
LD_MAX_CHARS: Final = 5 * 1024  # MAX_LONG_DOUBLE_CHARS: string2ld refuses slen >= this


def parse_ld(raw: bytes) -> Fraction | float | None:
    """Redis's string2ld: a long double, or None (spaces, junk, NaN, too long, or out of
    range: strtold's ERANGE on an overflow or on a nonzero input that rounds to zero; a
    subnormal result is accepted). Only an explicit "inf" gives +-inf."""
    if not raw or len(raw) >= LD_MAX_CHARS or raw[:1].isspace():
        return None
    low = raw.lower()
    if low in _INF:
        return _INF[low]
    hexm = _HEXFLOAT.fullmatch(raw)
    if hexm is not None:
        sign, whole, frac, exp = hexm.groups()
        frac = frac or b""
        if not whole and not frac:
            return None  # "0x" alone: strtold reads the "0" and stops at the "x"
        mant = int(whole + frac, 16)
        if mant == 0:
            return Fraction(0)
        e_digits = (exp or b"0").lstrip(b"+-").lstrip(b"0") or b"0"
        e_neg = (exp or b"").startswith(b"-")
        if len(e_digits) > 9:  # far outside any long double
            return None
        shift = (-int(e_digits) if e_neg else int(e_digits)) - 4 * len(frac)
        mag = mant.bit_length() + shift
        if not _BIN_MAG[0] <= mag <= _BIN_MAG[1]:
            return None
        value = Fraction(mant) * (Fraction(2) ** shift)
        return _checked(_round_ext(-value if sign == b"-" else value))
    if not _FLOAT.fullmatch(raw):
        return None
    dec = Decimal(raw.decode("ascii"))  # exact, whatever the exponent
    if dec == 0:
        return Fraction(0)
    if not _DEC_MAG[0] <= dec.adjusted() <= _DEC_MAG[1]:
        return None
    return _checked(_round_ext(Fraction(dec)))


def _checked(v: Fraction | float) -> Fraction | None:
    """A nonzero input's rounded value: None when it overflowed or underflowed to zero."""
    if isinstance(v, float) or v == 0:
        return None
    return v


def add_ld(a: Fraction | float, b: Fraction | float) -> Fraction | None:
    """a + b as a long double; None when the sum is NaN or infinite (Redis refuses it)."""
    if isinstance(a, float) or isinstance(b, float):
        return None
    s = _round_ext(a + b)
    return None if isinstance(s, float) else s


def format_ld(v: Fraction) -> bytes:
    """ld2string(LD_STR_HUMAN): `%.17Lf`, trailing zeros and a trailing point removed."""
    text = f"{_exact(v):.17f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    return text.encode()


def _exact(v: Fraction) -> Decimal:
    """The exact decimal value of a dyadic fraction (its denominator is a power of two)."""
    from decimal import localcontext

    with localcontext() as ctx:
        ctx.prec = 20000
        return Decimal(v.numerator) / Decimal(v.denominator)


def _jemalloc(n: int) -> int:
    """jemalloc's size class of an n-byte allocation (8, 16, 32, 48, 64, 80, ... then 1/4
    steps of each power of two), as redis-server's zmalloc_size reports it."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) // 16 * 16
    step = 1 << (n.bit_length() - 3)
    return (n + step - 1) // step * step


def string_usage(name: str, value: bytes, enc: str) -> int:
    """MEMORY USAGE of a string key, estimated as redis-server 7 computes it (dict entry, key
    sds, object header and value); an estimate, like Redis's own."""
    key = _jemalloc(len(name) + 4)
    if enc == ENC_INT:
        obj = 16
    elif enc == ENC_EMBSTR:
        obj = _jemalloc(16 + 3 + len(value) + 1)
    else:
        obj = 16 + _jemalloc(9 + len(value) + 1)
    return 24 + key + obj
