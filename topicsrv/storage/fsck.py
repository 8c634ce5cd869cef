"""`python -m topicsrv check --data-dir DIR`: verify every frame and index, read-only.

Rule 1: check never writes; it reports what recovery would repair or lose.
Rule 2: exit status 0 = clean, 1 = damage found (any bad frame, header, index, a segment
the checkpoint lists but the disk lacks, a damaged keyspace snapshot or functions.json),
2 = not a data dir.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from topicsrv.engine.keyspace import ops as ks_ops
from topicsrv.engine.log.segments import DELETED, LOST, TRIMMED
from topicsrv.storage import (
    codec,
    frames,
    functions,
    images,
    keyspacelog,
    routerlog,
    segfiles,
    txgroup,
)
from topicsrv.storage.walread import wal_files


@dataclass
class Report:
    wal_files: int = 0
    wal_frames: int = 0
    segments: int = 0
    records: int = 0
    deleted: int = 0
    lost: int = 0
    trimmed: int = 0  # a router dest's source_trim slots
    topics: int = 0
    routers: int = 0  # router definitions in checkpoint.json
    router_frames: int = 0  # WAL: router definition changes and appends that carry a cursor
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # harmless: what recovery tidies up

    def lines(self) -> list[str]:
        out = [
            f"topics: {self.topics}",
            f"wal: {self.wal_files} files, {self.wal_frames} good frames",
            f"segments: {self.segments} files, {self.records} record slots "
            f"({self.deleted} deleted, {self.lost} lost, {self.trimmed} source_trim)",
            f"routers: {self.routers} in the checkpoint, {self.router_frames} router frames in the WAL",
        ]
        out += [f"note: {n}" for n in self.notes]
        out += [f"DAMAGE: {p}" for p in self.problems]
        out.append("ok" if not self.problems else f"{len(self.problems)} problem(s) found")
        return out


def check(data_dir: Path, cold_dir: Path | None = None) -> Report:
    rep = Report()
    wal_dir = data_dir / "wal"
    try:
        ck = images.read_checkpoint(data_dir)
    except ValueError as exc:
        rep.problems.append(f"checkpoint.json unreadable: {exc}")
        ck = {"topics": [], "wal_gen": 0}
    first_gen = min([int(ck.get("wal_gen", 0)), *images.replay_from(ck).values()])
    for gen, _shard, path in wal_files(wal_dir):
        if gen < first_gen:
            continue
        rep.wal_files += 1
        raw = path.read_bytes()
        buf = memoryview(raw)
        if not raw:
            continue
        if frames.parse_file_header(buf, frames.WAL_MAGIC) is None:
            rep.problems.append(f"{path.name}: bad file header")
            continue
        for got in frames.scan(buf, frames.FILE_HEADER_SIZE):
            if isinstance(got, frames.Damage):
                rep.problems.append(f"{path.name}: {got.reason} at offset {got.offset} "
                                    f"({len(raw) - got.offset} bytes recovery would cut)")
                break
            rep.wal_frames += 1
            problem = _check_body(got)
            if problem:
                rep.problems.append(f"{path.name}: frame at offset {got.offset}: {problem}")
            rep.router_frames += got.ftype in (frames.T_ROUTER, frames.T_APPEND_RC)
    fn_problem = functions.check(data_dir)
    if fn_problem is not None:
        rep.problems.append(f"{functions.NAME}: {fn_problem} (the server starts without function "
                            f"libraries; {functions.REPAIR} replaces it with an empty set)")
    ks_file = ck.get("keyspace")
    if isinstance(ks_file, str):
        try:
            keyspacelog.read_snapshot(data_dir / ks_file)
        except (OSError, ValueError, struct.error) as exc:
            rep.problems.append(f"checkpoint.json: keyspace file {ks_file}: {exc}")
    roots = [data_dir] + ([cold_dir] if cold_dir is not None else [])
    rep.routers = len(ck.get("routers", []))
    names = {t.get("name") for t in ck.get("topics", [])}
    for spec in ck.get("routers", []):
        for end in ("source", "dest"):
            if spec.get(end) not in names:
                rep.problems.append(f"checkpoint.json: router {spec.get('name')!r} names {end} "
                                    f"{spec.get(end)!r}, which the checkpoint does not list")
    for t in ck.get("topics", []):
        rep.topics += 1
        rel = t.get("dir") or f"topics/{t['name']}@{t['epoch']}"
        if not routerlog.valid_dels(t.get("dels", [])) or type(t.get("dfloor", 0)) is not int:
            rep.problems.append(f"checkpoint.json: topic {t.get('name')!r}: malformed `dels`/`dfloor` "
                                "(a router source's deleted slots not flipped on disk)")
        for base, count, _cold, dead in t.get("files", []):
            if dead:
                continue
            found = [r / rel for r in roots if segfiles.data_path(r / rel, base).exists()]
            if not found:
                rep.problems.append(f"{rel}: segment {base} listed in the checkpoint is missing")
                continue
            d = found[0]
            rep.segments += 1
            loaded = segfiles.load(segfiles.data_path(d, base), segfiles.idx_path(d, base), base)
            damage = [f"{rel}/{m}" for m in loaded.damage]
            if (loaded.truncate_at is not None and len(loaded.slots) >= count
                    and len(damage) == 1 and damage[0].endswith("(tail cut)")):
                # A torn tail past every slot the checkpoint vouches for: a segment append cut
                # short by a crash. Those records are still in the WAL; the next append (and
                # recovery) cut the torn bytes first. Not damage.
                rep.notes.append(damage[0].replace("(tail cut)", "(an unfinished append; "
                                                   "recovery cuts it, the WAL still has those records)"))
                damage = []
            rep.problems += damage
            if loaded.idx_problem is not None:
                rep.problems.append(f"{rel}/{loaded.idx_problem}")
            elif loaded.sf.count < count:
                rep.problems.append(f"{rel}/{segfiles.stem(base)}.idx: {loaded.sf.count} entries, "
                                    f"the checkpoint expects {count}")
            for slot in loaded.slots[:count]:
                rep.records += 1
                rep.deleted += slot[6] == DELETED
                rep.lost += slot[6] == LOST
                rep.trimmed += slot[6] == TRIMMED
    return rep


def _check_body(fr: frames.Frame) -> str | None:
    """What is wrong with a frame whose checksum holds but whose body recovery cannot read
    (a commit group's: each of its parts, storage/txgroup.py)."""
    return _check(fr.ftype, fr.body)


def _check(ftype: int, body: memoryview) -> str | None:
    try:
        if ftype in txgroup.TYPES:
            for _, t, b in txgroup.parts_of(ftype, body):
                problem = _check(t, b)
                if problem:
                    return f"in a commit group: {problem}"
        elif ftype in frames.RECORD_FRAMES:
            _, _, _, _, n, pos = codec.append_header(body)
            for _ in codec.append_items(body, pos, n):
                pass
            if ftype == frames.T_APPEND_RC:
                codec.append_rc(body)
        elif ftype == frames.T_KEYSPACE:
            ks_ops.decode(body)
        else:
            d = codec.decode_json(body)
            if ftype == frames.T_ROUTER and d["op"].get("op") not in ("put", "del"):
                return f"router frame with an unknown op {d['op'].get('op')!r}"
            if ftype in (frames.T_DELETE, frames.T_TRIM) and "oc" in d and not routerlog.valid_oc(d["oc"]):
                return "malformed `oc` (its routers' cursors) in a delete/trim frame"
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, struct.error) as exc:
        return f"unreadable body of a type {ftype} frame ({exc})"
    return None


def main(data_dir: Path, cold_dir: Path | None) -> int:
    if not data_dir.is_dir():
        print(f"{data_dir}: not a directory")
        return 2
    rep = check(data_dir, cold_dir)
    for line in rep.lines():
        print(line)
    return 1 if rep.problems else 0
