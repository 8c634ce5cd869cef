"""The status page in a real browser: Playwright driving Debian's chromium against an
in-process server. The page's numbers change as records are written, without a reload, and
behind --token the page asks for the token, keeps it in sessionStorage and never puts it in a
URL (topicsrv/http/status.py Rule 1).

Skips (saying why) only when chromium or the playwright package is missing; `make test` installs
chromium through scripts/ensure-tools.sh. TOPICSRV_SCREENSHOT=path also saves the screenshot
there (docs/status-page.png is made that way)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import run_in_thread
from topicsrv.context import ServerConfig, ServerContext

CHROMIUM = os.environ.get("TOPICSRV_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "browser-s3cret"
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"no chromium at {CHROMIUM}: install the Debian package `chromium` "
                    "(scripts/ensure-tools.sh does, as root with apt-get)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def serve(tmp: Path, **extra: Any) -> tuple[ServerContext, Any]:
    cfg = ServerConfig(http_port=0, resp_port=0, data_dir=tmp / "data", status_slot_s=0.25,
                       **extra)
    return run_in_thread(cfg)


def post(port: int, path: str, body: dict[str, Any], token: str | None = None,
         method: str = "POST") -> None:
    import http.client
    import json

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=json.dumps(body), headers=headers)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status in (200, 201), (path, resp.status)


def write(port: int, topic: str, n: int, token: str | None = None) -> None:
    post(port, f"/v0/topics/{topic}", {"records": [{"data": {"i": i}} for i in range(n)]}, token)


def field(topic: str, name: str) -> str:
    return f'#topics tr[data-topic="{topic}"] [data-field="{name}"]'


def wait_text(page: Any, selector: str, text: str) -> None:
    page.wait_for_function(
        "([s, t]) => { const e = document.querySelector(s); return e && e.textContent === t; }",
        arg=[selector, text], timeout=WAIT_MS)


def test_the_page_follows_writes_without_a_reload(browser: Any, tmp_path: Path) -> None:
    ctx, stop = serve(tmp_path)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        port, resp_port = ctx.addresses["http"][1], ctx.addresses["resp"][1]
        post(port, "/v0/topics/orders", {"durability": "fsync"}, method="PUT")
        write(port, "orders", 3)
        post(port, "/v0/topics/jobs", {"type": "queue", "priority": 500}, method="PUT")
        write(port, "jobs", 4)
        r = redis.Redis(port=resp_port)
        r.xadd("events", {"kind": "signup"})
        r.xgroup_create("events", "mailer", id="0")
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#state.live", timeout=WAIT_MS)
        wait_text(page, field("orders", "head_seq"), "3")
        assert page.text_content(field("orders", "durability")) == "fsync"
        assert page.text_content(field("jobs", "type")) == "queue"
        assert page.text_content('#queues tr[data-topic="jobs"] [data-field="ready"]') == "4"
        assert page.text_content('#groups tr[data-group="mailer"] [data-field="lag"]') == "1"
        page.evaluate("window.__sameDocument = true")
        # writes over both fronts: the numbers move, the document stays the same
        write(port, "orders", 5)
        for i in range(6):
            r.xadd("events", {"n": i})
        r.close()
        wait_text(page, field("orders", "head_seq"), "8")
        wait_text(page, field("orders", "count"), "8")
        wait_text(page, '#groups tr[data-group="mailer"] [data-field="lag"]', "7")
        # the sparkline of writes rises above its zero line (y = 17 in an 18 px box)
        page.wait_for_function(
            "() => { const p = document.querySelector("
            "'#topics tr[data-topic=\"events\"] [data-field=\"write_rate\"] polyline');"
            " return p && p.getAttribute('points').split(' ')"
            ".some(xy => parseFloat(xy.split(',')[1]) < 17); }", timeout=WAIT_MS)
        page.wait_for_function(
            "() => document.querySelector('[data-field=\"fsync\"]') !== null "
            "&& !document.querySelector('[data-field=\"fsync\"]').textContent.startsWith('\\u2013')",
            timeout=WAIT_MS)
        assert page.evaluate("window.__sameDocument") is True
        shot = page.screenshot(full_page=True)
        assert len(shot) > 10_000
        target = os.environ.get("TOPICSRV_SCREENSHOT")
        if target:
            Path(target).write_bytes(shot)
    finally:
        page.close()
        stop()


def test_behind_a_token_the_page_asks_for_it_and_keeps_it_out_of_urls(
        browser: Any, tmp_path: Path) -> None:
    ctx, stop = serve(tmp_path, token=TOKEN)
    context = browser.new_context()
    page = context.new_page()
    urls: list[str] = []
    page.on("request", lambda req: urls.append(req.url))
    try:
        port = ctx.addresses["http"][1]
        write(port, "guarded", 2, TOKEN)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#auth.shown", timeout=WAIT_MS)
        assert page.text_content("#state") == "token needed"
        assert page.query_selector(field("guarded", "head_seq")) is None  # no data without it
        page.fill("#token", "wrong")
        page.click("#connect")
        page.wait_for_function("() => document.querySelector('#auth-why').textContent"
                               ".includes('refused')", timeout=WAIT_MS)
        page.fill("#token", TOKEN)
        page.click("#connect")
        page.wait_for_selector("#state.live", timeout=WAIT_MS)
        wait_text(page, field("guarded", "head_seq"), "2")
        write(port, "guarded", 3, TOKEN)
        wait_text(page, field("guarded", "head_seq"), "5")
        assert page.evaluate("sessionStorage.getItem('topicsrv.token')") == TOKEN
        page.reload()  # the same tab keeps the token for the session
        page.wait_for_selector("#state.live", timeout=WAIT_MS)
        page.click("#forget")
        page.wait_for_selector("#auth.shown", timeout=WAIT_MS)
        assert page.evaluate("sessionStorage.getItem('topicsrv.token')") is None
        assert urls and not [u for u in urls if TOKEN in u or "wrong" in u]
        assert TOKEN not in page.url
    finally:
        context.close()
        stop()


def test_an_eventsource_in_the_browser_gets_messages_published_over_resp(
        browser: Any, tmp_path: Path) -> None:
    """A page served by topicsrv opens an EventSource on /v0/channels/{ch}/subscribe (same
    origin) and receives, in order, what a RESP client PUBLISHes: JSON payloads as values,
    other bytes as text; the PUBLISH reply counts the browser as a receiver."""
    ctx, stop = serve(tmp_path)
    page = browser.new_page()
    try:
        port, resp_port = ctx.addresses["http"][1], ctx.addresses["resp"][1]
        page.goto(f"http://127.0.0.1:{port}/")
        page.evaluate("""() => {
            window.__got = []; window.__opened = false;
            const es = new EventSource('/v0/channels/browser-ch/subscribe');
            es.onopen = () => { window.__opened = true; };
            es.addEventListener('message', e => window.__got.push(JSON.parse(e.data)));
            window.__es = es;
        }""")
        r = redis.Redis(port=resp_port, socket_timeout=10)
        page.wait_for_function("() => window.__opened", timeout=WAIT_MS)
        for _ in range(100):  # the stream is open; its subscription is on the bus right after
            if r.pubsub_numsub("browser-ch") == [(b"browser-ch", 1)]:
                break
            page.wait_for_timeout(50)
        assert r.pubsub_numsub("browser-ch") == [(b"browser-ch", 1)]
        replies = [r.publish("browser-ch", f'{{"n": {i}}}') for i in range(20)]
        replies.append(r.publish("browser-ch", "plain text"))
        assert replies == [1] * 21
        page.wait_for_function("() => window.__got.length >= 21", timeout=WAIT_MS)
        got = page.evaluate("window.__got")
        assert got == [{"channel": "browser-ch", "pattern": None, "message": {"n": i}}
                       for i in range(20)] + [
            {"channel": "browser-ch", "pattern": None, "message": "plain text"}]
        page.evaluate("window.__es.close()")
        r.close()
    finally:
        page.close()
        stop()
