"""The durability policy table (storage/policy.py) is complete and says what docs/storage.md says."""

from __future__ import annotations

import re
from pathlib import Path

from topicsrv.engine.config import DURABILITY_CLASSES, TopicConfig
from topicsrv.storage.policy import POLICIES, policy_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "storage.md"


def _doc_section() -> str:
    text = DOC.read_text()
    start = text.index("## Durability classes")
    return text[start:text.index("\n## ", start + 1)]


def _doc_rows() -> dict[str, list[str]]:
    """The class table: class name -> [write acknowledged, after a crash, after a clean stop]."""
    rows = {}
    for line in _doc_section().splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_every_class_has_one_row() -> None:
    assert set(POLICIES) == set(DURABILITY_CLASSES)
    assert all(name == p.name for name, p in POLICIES.items())
    assert policy_of(TopicConfig(durable=True)).name == "fsync"
    assert policy_of(TopicConfig()).name == "disk"
    assert policy_of(TopicConfig(durability_explicit="memory")).name == "memory"


def test_table_matches_the_docs() -> None:
    rows = _doc_rows()
    assert set(rows) == set(POLICIES)
    for name, (acked, crash, clean) in rows.items():
        p = POLICIES[name]
        assert ("fdatasync" in acked) == (p.ack == "fdatasync"), name
        assert ("queued" in acked) == (p.ack == "enqueue"), name
        assert acked.startswith("at once") == (p.ack == "at_once"), name
        assert ("never touch the WAL" in acked) == (not p.wal), name
        assert ("no tombstone" in crash) == (p.crash_gap is None), name
        assert ("restored just after readiness" in clean) == (p.recovery == "after_ready"), name
        assert (p.recovery == "config_only") == crash.startswith("config; the topic exists empty"), name
    section = _doc_section()
    gated = re.search(r"Deletes are fsync-gated for\s+([^.]*)\.", section)
    assert gated is not None
    assert set(re.findall(r"`(\w+)`", gated.group(1))) == {n for n, p in POLICIES.items() if p.deletes_gated}
    readable = re.search(r"Records of an `(\w+)` topic become readable when their batch is\s+durable", section)
    assert readable is not None
    assert {readable.group(1)} == {n for n, p in POLICIES.items() if p.readable == "durable"}
