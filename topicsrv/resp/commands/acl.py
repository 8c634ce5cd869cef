"""ACL: WHOAMI USERS LIST GETUSER CAT DRYRUN GENPASS HELP, over the fixed users of
topicsrv/resp/acl.py; SETUSER DELUSER LOAD SAVE LOG are refused.

Rule 1: replies and error texts are redis-server 7.0's; the subcommands' flags are Redis's
(USERS, LIST, GETUSER, DRYRUN, SETUSER, DELUSER, LOAD, SAVE, LOG are `admin`, so the `reader`
user may run only WHOAMI, CAT, GENPASS and HELP).
Rule 2: what the ACL subcommands show is exactly what is enforced: the users that exist and
the rules the dispatcher applies (acl.py Rule 2); passwords only as SHA-256.
Rule 3: users cannot be changed at run time: the subcommands that would (or that need an ACL
file or log topicsrv does not keep) answer an error naming the flags that set the users.
"""

from __future__ import annotations

import secrets
from typing import Any

from topicsrv.resp import acl
from topicsrv.resp.commands.base import (
    REGISTRY,
    CommandContext,
    CommandSpec,
    Err,
    Simple,
    command,
    container,
    lookup,
    parse_int,
)

container("acl", "server", "A container for Access List Control commands.", "6.0.0")

FIXED = ("topicsrv's users are fixed by its command line: 'default' (password --requirepass) "
         "and 'reader' (password --read-token, read-only commands)")


def _sub(sub: str, arity: int, admin: bool, summary: str, syntax: str = "") -> Any:
    flags = ["noscript", "loading", "stale"]
    if admin:
        flags.insert(0, "admin")
    return command(f"acl|{sub}", arity, flags, 0, 0, 0, "server", summary, "6.0.0",
                   syntax=syntax)


@_sub("whoami", 2, False, "Return the name of the user associated to the current connection")
def acl_whoami(ctx: CommandContext, args: list[bytes]) -> Any:
    return ctx.client.user


@_sub("users", 2, True, "List the username of all the configured ACL rules")
def acl_users(ctx: CommandContext, args: list[bytes]) -> Any:
    return [u.name for u in acl.users(ctx.server.config)]


@_sub("list", 2, True, "List the current ACL rules in ACL config file format")
def acl_list(ctx: CommandContext, args: list[bytes]) -> Any:
    return [u.describe() for u in acl.users(ctx.server.config)]


@_sub("getuser", 3, True, "Get the rules for a specific ACL user", "username:string")
def acl_getuser(ctx: CommandContext, args: list[bytes]) -> Any:
    user = acl.find_user(ctx.server.config, args[0])
    if user is None:
        return None
    flags = ["on"] if user.password is not None else ["on", "nopass"]
    passwords = [] if user.password is None else [acl.password_hash(user.password)]
    return {"flags": flags, "passwords": passwords, "commands": user.rule, "keys": "~*",
            "channels": "&*", "selectors": []}


def _all_specs() -> list[CommandSpec]:
    out: list[CommandSpec] = []
    for spec in REGISTRY.values():
        if spec.handler is not None:
            out.append(spec)
        out.extend(s for s in spec.subcommands.values() if s.handler is not None)
    return out


@_sub("cat", -2, False, "List the ACL categories or the commands inside a category",
      "[category:string]")
def acl_cat(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1:
        raise Err("ERR wrong number of arguments for 'acl|cat' command")
    if not args:
        return list(acl.CATEGORIES)
    name = args[0].decode("utf-8", "replace").lower()
    if name not in acl.CATEGORIES:
        raise Err(f"ERR Unknown category '{args[0].decode('utf-8', 'replace')}'")
    return [s.name for s in _all_specs() if f"@{name}" in acl.categories(s)]


@_sub("dryrun", -4, True, "Returns whether the user can execute the given command without "
      "executing the command.", "username:string command:string [arg:string...]")
def acl_dryrun(ctx: CommandContext, args: list[bytes]) -> Any:
    user = acl.find_user(ctx.server.config, args[0])
    if user is None:
        raise Err(f"ERR User '{args[0].decode('utf-8', 'replace')}' not found")
    spec, _ = lookup(args[1:])
    if spec is None:
        raise Err(f"ERR Command '{args[1].decode('utf-8', 'replace')}' not found")
    if acl.permitted(user.name, spec):
        return Simple("OK")
    return f"This user has no permissions to run the '{spec.name}' command"


@_sub("genpass", -2, False, "Generate a pseudorandom secure password to use for ACL users",
      "[bits:integer]")
def acl_genpass(ctx: CommandContext, args: list[bytes]) -> Any:
    if len(args) > 1:
        raise Err("ERR wrong number of arguments for 'acl|genpass' command")
    bits = parse_int(args[0]) if args else 256
    if not 0 < bits <= 4096:
        raise Err("ERR ACL GENPASS argument must be the number of bits for the output "
                  "password, a positive number up to 4096")
    chars = (bits + 3) // 4
    return secrets.token_hex((chars + 1) // 2)[:chars]


def _fixed(name: str) -> Any:
    def refuse(ctx: CommandContext, args: list[bytes]) -> Any:
        raise Err(f"ERR ACL {name.upper()} is not supported: {FIXED}")
    return refuse


for _name, _arity, _syntax in (("setuser", -3, "username:string [rule:string...]"),
                               ("deluser", -3, "username:string [username:string...]"),
                               ("load", 2, ""), ("save", 2, ""),
                               ("log", -2, "[count:integer|RESET]")):
    _sub(_name, _arity, True, f"ACL {_name.upper()} (not supported: fixed users)",
         _syntax)(_fixed(_name))


HELP = [
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
    "(SETUSER, DELUSER, LOAD, SAVE and LOG are not supported: " + FIXED + ".)",
]


@_sub("help", 2, False, "Show helpful text about the different subcommands")
def acl_help(ctx: CommandContext, args: list[bytes]) -> Any:
    return [Simple(line) for line in HELP]
