"""Users, their passwords and what they may run: the minimum of Redis's ACL, with fixed users.

Sans-IO policy only: no sockets, no engine. The ACL commands (topicsrv/resp/commands/acl.py)
render it, the dispatcher (topicsrv/resp/dispatch.py) enforces it.

Rule 1: at most two users exist, fixed by the command line: `default` (password
`--requirepass`; without it `nopass`: any password, and every connection starts as it), which
may run every command; and `reader` (password `--read-token`; the user exists only when the
flag is set), which may run every command that is neither `write` nor `admin`, nor
PUBLISH/SPUBLISH (it may subscribe, not publish), and of the `@scripting` commands only the
read-only runs and the inspecting subcommands (READER_RULE, in Redis's ACL syntax): EVAL,
EVALSHA, FCALL and SCRIPT LOAD could run writes or fill the script cache. Both users have every
channel (`&*`, Redis's `allchannels`): with fixed users there is no `resetchannels`. There is no
way to add, change or remove a user at run time.
Rule 2: a command's ACL categories derive from its flags and its group (`categories`), as
redis-server derives @read/@write/@admin/@fast/@slow/@blocking from command flags; the same
function feeds COMMAND INFO, ACL CAT and the permission check, so they never disagree.
Rule 3: a command a user may not run is refused after the arity check, before it runs, with
Redis 7.0's exact text: `NOPERM this user has no permissions to run the '<name>' command`
(`<name>` is `parent|sub` for a subcommand).
Rule 4: passwords are compared in constant time and shown only as SHA-256 hex (ACL LIST /
GETUSER), as Redis does; never logged.
Rule 5: a command called from a script (`redis.call`) is checked against the permissions of
the user who runs the script, as Redis does (topicsrv/resp/commands/scripts.py Rule 1).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from topicsrv.context import ServerConfig
    from topicsrv.resp.commands.base import CommandSpec

DEFAULT: Final = "default"  # a Final literal: compiled callers read it as a constant
READER = "reader"
READER_DENIES = frozenset({"@write", "@admin"})
ALL_RULE = "+@all"
READER_DENIED_COMMANDS = frozenset({"publish", "spublish"})  # subscribe: yes; publish: no
# The scripting commands a reader may run; every other @scripting command is refused.
READER_SCRIPTING = ("eval_ro", "evalsha_ro", "fcall_ro", "script|exists", "script|help",
                    "function|list", "function|stats", "function|help")
READER_RULE = ("+@all -@write -@admin -publish -spublish -@scripting "
               + " ".join(f"+{c}" for c in READER_SCRIPTING))
_READER_SCRIPTING = frozenset(READER_SCRIPTING)

# Redis 7.0's categories, in ACL CAT's order; those no topicsrv command has list nothing.
CATEGORIES = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
)
GROUP_CATEGORIES = {"stream": ("@stream",), "string": ("@string",), "topic": ("@stream",),
                    "list": ("@list",), "hash": ("@hash",), "connection": ("@connection",),
                    "generic": ("@keyspace",), "transactions": ("@transaction",),
                    "scripting": ("@scripting",), "pubsub": ("@pubsub",)}
GROUP_CATEGORIES["sortedset"] = ("@sortedset",)
GROUP_CATEGORIES["set"] = ("@set",)
# commands whose categories are not their group's (Redis's own command table)
COMMAND_CATEGORIES: dict[str, tuple[str, ...]] = {"sort": ("@set", "@sortedset", "@list"),
                                                  "sort_ro": ("@set", "@sortedset", "@list")}
_DANGEROUS = frozenset({"keys", "sort", "sort_ro"})  # @dangerous without being admin


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password: str | None  # None: nopass (any password is accepted)
    rule: str  # the command rule, in Redis ACL syntax

    def describe(self) -> str:
        """The user as one ACL LIST line (Redis's config-file format)."""
        secret = "nopass" if self.password is None else f"#{password_hash(self.password)}"
        return f"user {self.name} on {secret} ~* &* {self.rule}"


def password_hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def users(config: ServerConfig) -> list[User]:
    """The users that exist under this configuration (Rule 1)."""
    out = [User(DEFAULT, config.requirepass or None, ALL_RULE)]
    if config.read_token:
        out.append(User(READER, config.read_token, READER_RULE))
    return out


def find_user(config: ServerConfig, name: bytes | str) -> User | None:
    text = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
    return next((u for u in users(config) if u.name == text), None)


def authenticate(config: ServerConfig, name: bytes, password: bytes) -> User | None:
    """The user `name` if `password` is its password (constant time), else None."""
    user = find_user(config, name)
    if user is None:
        return None
    if user.password is None:
        return user  # nopass
    return user if hmac.compare_digest(password, user.password.encode()) else None


def categories(spec: CommandSpec) -> list[str]:
    """A command's ACL categories (Rule 2)."""
    flags = spec.flags
    cats: list[str] = []
    if "write" in flags:
        cats.append("@write")
    elif "readonly" in flags:
        cats.append("@read")
    cats.extend(COMMAND_CATEGORIES.get(spec.name) or GROUP_CATEGORIES.get(spec.group) or ())
    if "admin" in flags:
        cats += ["@admin", "@dangerous"]
    elif spec.name in _DANGEROUS:  # KEYS scans the keyspace, SORT reads keys by pattern
        cats.append("@dangerous")
    if "fast" in flags:
        cats.append("@fast")
    else:
        cats.append("@slow")
    if "blocking" in flags:
        cats.append("@blocking")
    return cats


def permitted(user: str, spec: CommandSpec) -> bool:
    """Whether `user` may run the command `spec` (Rule 1)."""
    if user == DEFAULT:
        return True
    if spec.name in READER_DENIED_COMMANDS:
        return False
    cats = categories(spec)
    if READER_DENIES.intersection(cats):
        return False
    return "@scripting" not in cats or spec.name in _READER_SCRIPTING


def noperm(spec: CommandSpec) -> str:
    """The error text of Rule 3."""
    return f"NOPERM this user has no permissions to run the '{spec.name}' command"
