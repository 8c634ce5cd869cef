"""File names on disk and checkpoint isolation (issue 10, item 5): a valid topic name never
makes a file name too long, and one topic whose checkpoint fails never stops the others."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import orjson
import pytest

from topicsrv.storage.fsck import check
from topicsrv.storage.fsops import OsOps
from topicsrv.storage.images import CHECKPOINT
from topicsrv.storage.state import topic_dir
from topicsrv.storage.walread import wal_files

from .harness import live, running, write

LONGEST = "n" + "x" * 253 + "z"  # 255 characters: the longest valid topic name


def test_dir_names_stay_short_and_distinct() -> None:
    assert topic_dir("orders", 3) == "topics/orders@3"  # the old layout, unchanged
    long_a, long_b = LONGEST, LONGEST[:-1] + "y"
    da, db = topic_dir(long_a, 1), topic_dir(long_b, 1)
    assert da != db and da.startswith("topics/" + LONGEST[:64] + "~")
    assert max(len(Path(da).name), len(Path(db).name)) <= 110
    assert len(Path(topic_dir(LONGEST, 2**64 - 1)).name) <= 110


async def test_a_max_length_name_checkpoints_and_restarts_without_false_losses(tmp_path: Path) -> None:
    async with running(tmp_path, crash=True) as (e, st):
        for name in ("a", "b", LONGEST, LONGEST[:200]):
            e.put_topic(name, {"durability": "disk"})
            await write(e, name, [1, 2, 3])
        await st.checkpoint()
        assert st.last_checkpoint_error is None
        for name in ("a", "b", LONGEST):
            await write(e, name, [4])
        await st.checkpoint()  # the WAL is trimmed: every topic made it into segments
        before = {n: live(e, n) for n in ("a", "b", LONGEST, LONGEST[:200])}
    assert len(wal_files(tmp_path / "wal")) == 4  # one generation left (4 shards)
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    assert {t["name"] for t in ck["topics"]} == {"a", "b", LONGEST, LONGEST[:200]}
    async with running(tmp_path) as (e, _):
        for name, recs in before.items():
            assert live(e, name) == recs
            res = e.diff(name, 0, 100)
            assert res.tombstone is None, name  # no false `lost` tombstone anywhere
    assert check(tmp_path).problems == []


class FailOneTopic(OsOps):
    """Segment appends under one topic dir fail (ENAMETOOLONG, as the old layout got)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.failing = True

    def open_append(self, path: Path) -> int:
        if self.failing and self.marker in str(path) and path.suffix == ".data":
            raise OSError(errno.ENAMETOOLONG, "File name too long", str(path))
        return super().open_append(path)


async def test_one_topics_checkpoint_failure_never_stops_the_others(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ops = FailOneTopic("bad@")
    with caplog.at_level(logging.ERROR, logger="topicsrv.storage"):
        async with running(tmp_path, crash=True, shards=1, ops=ops) as (e, st):
            for name in ("good", "bad"):
                e.put_topic(name, {"durability": "fsync"})
                await write(e, name, list(range(5)))
            await st.checkpoint()
            assert st.last_checkpoint_error is not None and "bad" in st.last_checkpoint_error
            await write(e, "good", ["g"])
            await write(e, "bad", ["b"])
            await st.checkpoint()
            before = {n: live(e, n) for n in ("good", "bad")}
    msgs = " ".join(r.getMessage() for r in caplog.records)
    assert "topic bad could not be checkpointed" in msgs
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    entries = {t["name"]: t for t in ck["topics"]}
    assert entries["good"]["files"] and "replay_from" not in entries["good"]
    assert entries["bad"]["files"] == [] and "replay_from" in entries["bad"]
    assert list((tmp_path / "topics").glob("good@1/*.data"))
    # after a crash: both topics whole, nothing reported lost
    async with running(tmp_path, shards=1, ops=ops) as (e, st):
        for name, recs in before.items():
            assert live(e, name) == recs
            assert e.diff(name, 0, 100).tombstone is None
        ops.failing = False  # the problem is fixed: the next checkpoint catches up, trims the WAL
        await st.checkpoint()
        assert st.last_checkpoint_error is None
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    assert all("replay_from" not in t and t["files"] for t in ck["topics"])
    async with running(tmp_path, shards=1) as (e, _):
        for name, recs in before.items():
            assert live(e, name) == recs
    assert check(tmp_path).problems == []


async def test_a_data_dir_in_the_old_layout_still_recovers(tmp_path: Path) -> None:
    """Before, every dir was NAME@EPOCH; a 150-character name now gets a hashed dir, but the
    checkpoint names each topic's dir, so the old one is found and kept."""
    name = "o" * 150
    async with running(tmp_path) as (e, _):
        e.put_topic(name, {"durability": "fsync"})
        await write(e, name, [1, 2])
        before = live(e, name)
    ck = orjson.loads((tmp_path / CHECKPOINT).read_bytes())
    (entry,) = ck["topics"]
    old = f"topics/{name}@1"
    assert entry["dir"] != old
    shutil.move(tmp_path / entry["dir"], tmp_path / old)
    entry["dir"] = old
    (tmp_path / CHECKPOINT).write_bytes(orjson.dumps(ck))
    async with running(tmp_path) as (e, st):
        assert live(e, name) == before
        await write(e, name, [3])
        await st.checkpoint()
    assert (tmp_path / old).is_dir()
    async with running(tmp_path) as (e, _):
        assert len(live(e, name)) == 3
