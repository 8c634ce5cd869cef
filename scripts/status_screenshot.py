"""Regenerate docs/status-page.png: an in-process server with a few topics, a queue, consumer
groups and a router under a varying load, photographed by Playwright driving Debian's chromium.
Run from the repository root: `.venv/bin/python scripts/status_screenshot.py`."""

from __future__ import annotations

import http.client
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from conftest import run_in_thread  # noqa: E402
from topicsrv.context import ServerConfig  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main(out: str = "docs/status-page.png") -> None:
    tmp = Path(tempfile.mkdtemp())
    ctx, stop = run_in_thread(ServerConfig(http_port=0, resp_port=0, data_dir=tmp / "data",
                                           status_slot_s=0.25))
    port, rport = ctx.addresses["http"][1], ctx.addresses["resp"][1]

    def call(method: str, path: str, body: Any = None) -> None:
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        c.getresponse().read()
        c.close()

    call("PUT", "/v0/topics/orders", {"durability": "fsync", "priority": 800})
    call("PUT", "/v0/topics/clicks", {"durability": "memory", "cap_records": 5000})
    call("PUT", "/v0/topics/jobs", {"type": "queue", "max_deliveries": 1,
                                    "dead_letter": "jobs.dead", "lease_ms": 60000})
    call("PUT", "/v0/topics/audit", {"durability": "disk"})
    call("PUT", "/v0/routers/orders-eu", {"source": "orders", "dest": "orders.eu",
                                          "filter": ["tag", "Eq", "eu"]})
    r = redis.Redis(port=rport)
    r.xadd("signups", {"user": "ann"})
    r.xgroup_create("signups", "mailer", id="0")
    r.xgroup_create("signups", "crm", id="$")
    for i in range(40):
        call("POST", "/v0/topics/audit", {"records": [{"data": {"i": i}}]})
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/")
        for k in range(90):
            n = int(20 + 15 * math.sin(k / 5))
            call("POST", "/v0/topics/orders", {"records": [
                {"data": {"k": k, "j": j}, "tag": "eu" if j % 3 == 0 else "us"}
                for j in range(max(1, n // 4))]})
            call("POST", "/v0/topics/clicks", {"records": [{"data": {"k": k}}] * (n * 3)})
            if k % 3 == 0:
                call("POST", "/v0/topics/jobs", {"records": [{"data": {"job": k}}]})
            if k % 4 == 0:
                r.xadd("signups", {"user": f"u{k}"})
                r.xreadgroup("crm", "c1", {"signups": ">"}, count=1)
            if k % 7 == 0:
                call("POST", "/v0/topics/clicks/diff", {"from_seq": 0, "limit": 500})
                call("POST", "/v0/topics/jobs/claim", {"node": "worker-1", "max": 2})
            time.sleep(0.1)
        time.sleep(0.3)
        page.screenshot(path=out, full_page=True)
        browser.close()
    r.close()
    stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
