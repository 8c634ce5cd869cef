"""Command line: `python -m topicsrv serve ...` (and, with storage, `check`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import trio

from topicsrv import __version__
from topicsrv.bus.limits import OutputLimits
from topicsrv.errors import StartupError
from topicsrv.http.guards import parse_allowed_hosts
from topicsrv.memory import auto_limit, parse_size
from topicsrv.server import ServerConfig, run


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is 0-65535 (0 picks a free port)")
    return value


def _port_or_off(text: str) -> int | None:
    """A port, or `off` (no listener)."""
    return None if text.strip().lower() == "off" else _port(text)


def _size(text: str) -> int:
    """A byte size as Redis writes them: 1048576, 512mb, 64k."""
    value = parse_size(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 1048576, 64kb, 512mb)")
    if value < 1:
        raise argparse.ArgumentTypeError("a size must be at least 1 byte")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return value


def _max_memory(text: str) -> int:
    """`auto` (a share of the machine's or cgroup's memory), `0` (no limit) or a size."""
    raw = text.strip().lower()
    if raw == "auto":
        return auto_limit()
    if raw == "0":
        return 0
    return _size(text)


def _pubsub_limits(text: str) -> OutputLimits:
    """`<hard> <soft> <soft-seconds>`, as Redis's pubsub class, with Redis's CONFIG texts."""
    words = text.split()
    if len(words) != 3:
        raise argparse.ArgumentTypeError("Wrong number of arguments in buffer limit "
                                         "configuration.")
    hard, soft = parse_size(words[0]), parse_size(words[1])
    secs = int(words[2]) if words[2].isdigit() else -1
    if hard is None or soft is None or secs < 0:
        raise argparse.ArgumentTypeError("Error in hard, soft or soft_seconds setting in "
                                         "buffer limit configuration.")
    return OutputLimits(hard, soft, secs)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, _port(port)


def _yes_no(text: str) -> bool:
    raw = text.strip().lower()
    if raw not in ("yes", "no"):
        raise argparse.ArgumentTypeError("expected yes or no")
    return raw == "yes"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="topicsrv",
        description="topicsrv: an event-log server speaking RESP (Redis streams) and HTTP/SSE. "
        "Consumers are told, in band, whenever data they had not read was lost.",
    )
    parser.add_argument("--version", action="version", version=f"topicsrv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the server", description="Run the server.")
    serve.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TOPICS_DATA_DIR", "./data")),
                       help="directory for the WAL, segments and checkpoints (default ./data; env TOPICS_DATA_DIR)")
    serve.add_argument("--bind", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: loopback only)")
    serve.add_argument("--http-port", type=_port, default=7070,
                       help="HTTP/SSE port (default 7070; 0 picks a free port)")
    serve.add_argument("--resp-port", type=_port_or_off, default=6379,
                       help="Redis protocol port (default 6379; 0 picks a free port; 'off': "
                            "no plain RESP listener, e.g. to serve RESP over --tls-port only)")
    serve.add_argument("--token", default=os.environ.get("TOPICS_TOKEN"),
                       help="require 'Authorization: Bearer TOKEN' on every /v0 route (env TOPICS_TOKEN)")
    serve.add_argument("--token-file", type=Path, default=_env_path("TOPICS_TOKEN_FILE"),
                       metavar="PATH", help="read --token from this file (its first line; "
                       "env TOPICS_TOKEN_FILE): keeps the secret out of the process's "
                       "arguments, which every local user can read (docs/security.md)")
    serve.add_argument("--allowed-hosts", default=os.environ.get("TOPICS_ALLOWED_HOSTS", ""),
                       metavar="NAMES",
                       help="extra HTTP Host names to accept, comma-separated ('*' = any); "
                       "localhost, 127.0.0.1, [::1] and the bound address are always accepted, "
                       "other names are refused with 403 (DNS rebinding protection) "
                       "(env TOPICS_ALLOWED_HOSTS)")
    serve.add_argument("--requirepass", default=os.environ.get("TOPICS_REQUIREPASS"),
                       help="password RESP clients must AUTH with, as Redis's requirepass (env TOPICS_REQUIREPASS)")
    serve.add_argument("--requirepass-file", type=Path,
                       default=_env_path("TOPICS_REQUIREPASS_FILE"), metavar="PATH",
                       help="read --requirepass from this file (its first line; env "
                       "TOPICS_REQUIREPASS_FILE)")
    serve.add_argument("--read-token-file", type=Path,
                       default=_env_path("TOPICS_READ_TOKEN_FILE"), metavar="PATH",
                       help="read --read-token from this file (its first line; env "
                       "TOPICS_READ_TOKEN_FILE)")
    serve.add_argument("--read-token", default=os.environ.get("TOPICS_READ_TOKEN"),
                       help="a second, read-only credential (env TOPICS_READ_TOKEN): HTTP "
                            "'Authorization: Bearer READ_TOKEN' may read, watch and diff "
                            "topics and routers but not write, delete, claim/ack or configure "
                            "(403); RESP 'AUTH reader READ_TOKEN' may run the commands that "
                            "neither write nor administer (NOPERM). Needs --token")
    serve.add_argument("--tls-cert", type=Path, default=_env_path("TOPICS_TLS_CERT"),
                       metavar="PEM", help="TLS certificate (chain), with --tls-key: the HTTP "
                       "port then speaks HTTPS only, and --tls-port serves RESP over TLS "
                       "(env TOPICS_TLS_CERT)")
    serve.add_argument("--tls-key", type=Path, default=_env_path("TOPICS_TLS_KEY"),
                       metavar="PEM", help="private key of --tls-cert (env TOPICS_TLS_KEY)")
    serve.add_argument("--tls-ca", type=Path, default=_env_path("TOPICS_TLS_CA"),
                       metavar="PEM", help="CA bundle: clients of both TLS fronts must present "
                       "a certificate it signed, as redis-server's tls-auth-clients "
                       "(env TOPICS_TLS_CA)")
    serve.add_argument("--tls-port", type=_port, default=None, metavar="PORT",
                       help="serve RESP over TLS on this port too (0 picks a free port; needs "
                            "--tls-cert/--tls-key; TLS clients use one task each whatever "
                            "--resp-io says)")
    serve.add_argument("--heartbeat-ms", type=int, default=15000,
                       help="SSE heartbeat interval in ms (default 15000)")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                       help="logging level (default INFO)")
    serve.add_argument("--wal-shards", type=int, default=4,
                       help="WAL shards, one writer each; a topic's shard is a hash of its name (default 4)")
    serve.add_argument("--cold-dir", type=Path, default=_env_path("TOPICS_COLD_DIR"),
                       help="relocate older sealed segments to this dir (env TOPICS_COLD_DIR; default: none)")
    serve.add_argument("--checkpoint-interval-ms", type=int, default=60_000,
                       help="how often to seal segments and trim the WAL (default 60000)")
    serve.add_argument("--checkpoint-fork", choices=("yes", "no"), default="yes",
                       help="write the checkpoint's keyspace from a forked child, as Redis's "
                       "BGSAVE ('yes'), or in parts on the server's loop ('no', also what a "
                       "refused fork falls back to) (default yes; docs/storage.md)")
    serve.add_argument("--resp-io", choices=["reactor", "tasks"],
                       default=os.environ.get("TOPICS_RESP_IO", "reactor"),
                       help="RESP I/O path: 'reactor' (one task serving every idle connection "
                       "through epoll; Linux) or 'tasks' (one task per connection) (default "
                       "reactor; env TOPICS_RESP_IO)")
    serve.add_argument("--keyspace-durability", choices=("memory", "disk", "fsync"), default="disk",
                       help="durability class of every string key and key TTL: 'fsync' acks "
                       "after fdatasync, 'disk' on enqueue to the WAL, 'memory' writes nothing "
                       "(default disk; docs/storage.md)")
    serve.add_argument("--proto-max-bulk-len", type=_size, default=512 << 20, metavar="BYTES",
                       help="largest RESP bulk argument accepted, as Redis's proto-max-bulk-len "
                            "(default 512mb; accepts k/kb/m/mb/g/gb suffixes)")
    serve.add_argument("--client-output-limit", type=_size, default=64 << 20, metavar="BYTES",
                       help="pending reply bytes after which a RESP client that does not read is "
                            "disconnected (default 64mb)")
    serve.add_argument("--client-output-buffer-limit-pubsub", type=_pubsub_limits,
                       default=OutputLimits(), metavar='"HARD SOFT SECONDS"',
                       help="as Redis's client-output-buffer-limit pubsub: a subscriber past "
                            "HARD pending bytes, or past SOFT for more than SECONDS, is "
                            "disconnected (default \"32mb 8mb 60\"; 0 = no limit)")
    serve.add_argument("--maxclients", type=_positive, default=10000, metavar="N",
                       help="client connections served at once over both fronts, as Redis's "
                            "maxclients; the next one is refused in words (default 10000, "
                            "lowered to fit the open-file limit)")
    serve.add_argument("--protected-mode", type=_yes_no, default=True, metavar="yes|no",
                       help="as Redis's protected-mode: a front with no credential (RESP without "
                            "--requirepass, HTTP without --token) serves loopback clients only "
                            "(default yes)")
    serve.add_argument("--max-memory", type=_max_memory, default="auto", metavar="BYTES",
                       help="refuse writes once the server's resident memory passes this, as "
                            "Redis's maxmemory with noeviction (reads and deletes still work); "
                            "'auto' (default) = 80%% of the memory the process may use (cgroup "
                            "limit or RAM), 0 = no limit; accepts k/kb/m/mb/g/gb suffixes")
    serve.add_argument("--forward-share", type=_share, default=0.1, metavar="F",
                       help="while clients are writing, router forwarding takes at most this "
                            "fraction of the server's time and catches up when writes pause "
                            "(0 < F <= 1; default 0.1; 1 = forward as fast as possible)")
    serve.add_argument("--shutdown-grace", type=float, default=5.0, metavar="SECONDS",
                       help="on SIGTERM/SIGINT/SHUTDOWN: stop accepting, give requests in flight "
                            "(a write waiting for its fsync, a reply being sent) this long to "
                            "finish, then close the rest and flush (default 5; blocked reads and "
                            "streams do not hold the stop)")
    serve.add_argument("--top-topics", type=int, default=100, metavar="N",
                       help="/metrics gives the N most active topics (and N routers) series of "
                            "their own and sums the rest under topic=\"_other\" (default 100)")
    serve.add_argument("--replicaof", type=_host_port, default=None, metavar="HOST:PORT",
                       help="start as a replica of the primary whose RESP port this is "
                            "(docs/replication.md); REPLICAOF changes it at run time, and what "
                            "REPLICAOF or CONFIG REWRITE last decided (DATA_DIR/replication.json) "
                            "wins over this flag")
    serve.add_argument("--masteruser", default=os.environ.get("TOPICS_MASTERUSER"),
                       help="the user a replica authenticates as on its primary (env TOPICS_MASTERUSER)")
    serve.add_argument("--masterauth", default=os.environ.get("TOPICS_MASTERAUTH"),
                       help="the password a replica gives its primary (env TOPICS_MASTERAUTH)")
    serve.add_argument("--repl-backlog-size", type=_size, default=1 << 20, metavar="BYTES",
                       help="journal bytes a primary keeps for replicas that reconnect "
                            "(default 1mb; a replica further behind needs a full sync)")
    serve.add_argument("--replica-priority", type=int, default=100, metavar="N",
                       help="Sentinel promotes the replica with the lowest non-zero priority "
                            "first; 0 = never (default 100)")
    serve.add_argument("--min-replicas-to-write", type=int, default=0, metavar="N",
                       help="refuse writes (-NOREPLICAS) unless N replicas acknowledged within "
                            "--min-replicas-max-lag seconds (default 0: off)")
    serve.add_argument("--min-replicas-max-lag", type=int, default=10, metavar="SECONDS")
    serve.add_argument("--min-replicas-to-ack", type=int, default=0, metavar="N",
                       help="synchronous replication: a RESP write is acknowledged only once N "
                            "replicas hold it (-NOREPLICAS past --min-replicas-max-lag seconds; "
                            "docs/replication.md)")
    serve.add_argument("--no-storage", action="store_true",
                       help="keep everything in memory only: nothing is written, nothing survives a restart")
    check = sub.add_parser("check", help="verify a data dir (fsck): every frame and index",
                           description="Verify every WAL frame, segment frame and index of a data dir "
                           "(read-only; run it on a stopped server). Exit 0 = clean, 1 = damage found.")
    check.add_argument("--data-dir", type=Path, default=Path(os.environ.get("TOPICS_DATA_DIR", "./data")),
                       help="the data dir to check (default ./data; env TOPICS_DATA_DIR)")
    check.add_argument("--cold-dir", type=Path, default=_env_path("TOPICS_COLD_DIR"),
                       help="the cold dir, if the server used one (env TOPICS_COLD_DIR)")
    return parser


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


class SecretError(Exception):
    pass


SECRETS = (("token", "--token"), ("requirepass", "--requirepass"), ("read_token", "--read-token"))


def resolve_secrets(args: argparse.Namespace, argv: list[str]) -> list[str]:
    """Each secret from its flag (or environment variable) or from its `-file` twin, never
    both; the file's first line, without its line break. The warnings to log: a secret
    given as an argument is visible to every local user (ps, /proc/PID/cmdline)."""
    warnings = []
    for attr, flag in SECRETS:
        path = getattr(args, f"{attr}_file")
        if path is None:
            if any(a == flag or a.startswith(flag + "=") for a in argv):
                warnings.append(f"{flag} given on the command line is visible to every local "
                                f"user (ps); prefer {flag}-file or the environment "
                                "(docs/security.md)")
            continue
        if getattr(args, attr) is not None:
            raise SecretError(f"both {flag} (or its environment variable) and {flag}-file "
                              "are set; give one")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SecretError(f"{flag}-file {path}: {e}") from None
        value = text.splitlines()[0] if text else ""
        if not value:
            raise SecretError(f"{flag}-file {path} is empty")
        setattr(args, attr, value)
    return warnings


def _startup_error(exc: BaseException) -> StartupError | None:
    """The StartupError behind `exc` (trio wraps it in an exception group), or None."""
    if isinstance(exc, StartupError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _startup_error(inner)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        logging.basicConfig(level=args.log_level, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            for warning in resolve_secrets(args, sys.argv[1:] if argv is None else argv):
                logging.getLogger("topicsrv").warning("%s", warning)
        except SecretError as e:
            print(f"topicsrv: {e}", file=sys.stderr)
            return 1
        config = ServerConfig(
            data_dir=args.data_dir,
            bind=args.bind,
            http_port=args.http_port,
            resp_port=args.resp_port,
            token=args.token,
            allowed_hosts=parse_allowed_hosts(args.allowed_hosts),
            requirepass=args.requirepass,
            read_token=args.read_token,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_ca=args.tls_ca,
            tls_port=args.tls_port,
            heartbeat_s=args.heartbeat_ms / 1000.0,
            wal_shards=max(1, args.wal_shards),
            cold_dir=args.cold_dir,
            checkpoint_interval_s=max(args.checkpoint_interval_ms, 10) / 1000.0,
            checkpoint_fork=args.checkpoint_fork == "yes",
            storage=not args.no_storage,
            resp_io=args.resp_io,
            proto_max_bulk_len=args.proto_max_bulk_len,
            keyspace_durability=args.keyspace_durability,
            client_output_limit=args.client_output_limit,
            pubsub_limits=args.client_output_buffer_limit_pubsub,
            maxclients=args.maxclients,
            protected_mode=args.protected_mode,
            max_memory=args.max_memory,
            forward_share=args.forward_share,
            shutdown_grace_s=max(0.0, args.shutdown_grace),
            top_topics=max(1, args.top_topics),
            replicaof=args.replicaof,
            masteruser=args.masteruser,
            masterauth=args.masterauth,
            repl_backlog_size=args.repl_backlog_size,
            replica_priority=max(0, args.replica_priority),
            min_replicas_to_write=max(0, args.min_replicas_to_write),
            min_replicas_max_lag=max(0, args.min_replicas_max_lag),
            min_replicas_to_ack=max(0, args.min_replicas_to_ack),
        )
        try:
            trio.run(run, config)
        except KeyboardInterrupt:
            pass
        except Exception as exc:
            startup = _startup_error(exc)
            if startup is None:
                raise
            print(f"topicsrv: {startup}", file=sys.stderr)  # one clear message, no traceback
            return 1
        return 0
    if args.command == "check":
        from topicsrv.storage.fsck import main as check_main

        return check_main(args.data_dir, args.cold_dir)
    return 2
