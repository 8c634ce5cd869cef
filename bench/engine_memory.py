"""Resident bytes per record in the engine: N records of 100-byte data (issue 2 target).

Target: at most 2 x the record's encoded size + 64 bytes. Run:
    .venv/bin/python -m bench.engine_memory [--records 1000000] [--form json|fields]
Reports both the RSS delta of this process and tracemalloc's count of live bytes.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tracemalloc

from topicsrv.clock import FakeClock
from topicsrv.engine import Engine
from topicsrv.engine.log.records import prepare_fields, prepare_json


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(n: int, form: str = "json", trace: bool = False, batch: int = 1000) -> dict[str, float]:
    payload = "x" * 100
    engine = Engine(clock=FakeClock())
    engine.put_topic("mem", {})
    if form == "json":
        recs = [prepare_json({"data": payload}) for _ in range(batch)]
    else:
        recs = [prepare_fields([b"f", payload.encode()]) for _ in range(batch)]
    gc.collect()
    if trace:
        tracemalloc.start()
    base_rss = rss_bytes()
    base_traced = tracemalloc.get_traced_memory()[0] if trace else 0
    for _ in range(n // batch):
        engine.write("mem", recs)
    gc.collect()
    used_rss = rss_bytes() - base_rss
    used_traced = (tracemalloc.get_traced_memory()[0] - base_traced) if trace else 0
    if trace:
        tracemalloc.stop()
    topic = engine.get("mem")
    encoded = sum(len(b) for b in topic.segs[len(topic.segs) // 2].blobs[:100]) / 100  # type: ignore[arg-type]
    count = topic.count
    return {
        "records": count,
        "encoded_bytes_per_record": encoded,
        "rss_bytes_per_record": used_rss / count,
        "traced_bytes_per_record": used_traced / count if trace else float("nan"),
        "target_bytes_per_record": 2 * encoded + 64,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--form", choices=["json", "fields"], default="json",
                        help="json = HTTP-written records, fields = XADD-written records")
    parser.add_argument("--trace", action="store_true", help="also count with tracemalloc (slower)")
    args = parser.parse_args(argv)
    r = measure(args.records, args.form, args.trace)
    print(f"records={r['records']} form={args.form} encoded={r['encoded_bytes_per_record']:.0f} B "
          f"rss/record={r['rss_bytes_per_record']:.1f} B traced/record={r['traced_bytes_per_record']:.1f} B "
          f"target<={r['target_bytes_per_record']:.0f} B "
          f"{'OK' if r['rss_bytes_per_record'] <= r['target_bytes_per_record'] else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
