"""Every shell example in README.md and docs/*.md runs as written against a fresh server.

Rule 1 (what an example is): a fenced ```sh / ```bash / ```console block is one script; in an
untagged or ```text block, each `$ <command>` line (continued while a quote is open or a line
ends in `\\`) is one command and the lines under it are its output as the doc shows it, and
each `127.0.0.1:6379> <command>` line is a redis-cli command; ```http-request blocks
(docs/http-api.md) are replayed as requests, so later examples see the state they made.
Rule 2 (where): one fresh server per document, on free ports; the examples run in document
order in one bash session per document, as a reader types them into one terminal (a variable
one example sets is there for the next). The docs' default ports are rewritten to the test's: `localhost:7070` and
`127.0.0.1:7070` become the HTTP port, `:6379` and `redis-cli -p 6379` the RESP port, and a
bare `redis-cli` gets `-p <port>` (a shell function, with --no-raw so replies read as in a
terminal). A stream a user stops with Ctrl-C (`curl -N`) is given `--max-time 2`, and that
timeout counts as success.
Rule 3 (success): no command of the example exits non-zero, no HTTP response is >= 400, no
reply is an `(error)` and no queue reply skips a job (a stale or foreign lease), unless the doc shows an error as the expected output (an `(error)` or an
`"error"` in the output or comments the doc prints with it).
Rule 4 (skips): an example that needs what a test cannot have (Spark, TLS certificates, a
remote host) is preceded by `<!-- example: skip (why) -->` in the doc; the marker is visible
in the source, and skipped examples are counted in the test's output.
"""

from __future__ import annotations

import http.client
import os
import re
import shlex
import shutil
import signal
import subprocess
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^[ \t]*```([\w-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)  # list items indent
SKIP = re.compile(r"<!--\s*example:\s*skip\b[^>]*-->")
SCRIPT_LANGS = {"sh", "bash", "shell", "console"}
OUTPUT_LANGS = {"", "text"}
PROMPT = "127.0.0.1:6379> "
TIMEOUT_S = 60

PREAMBLE = r"""
redis-cli() { command redis-cli --no-raw -p "$DOC_RESP_PORT" "$@"; }
curl() {
  local extra=()
  case " $* " in
    *" -N "*|*" -sN "*|*" -Ns "*|*" --no-buffer "*)
      case " $* " in *" --max-time "*|*" -m "*) ;; *) extra=(--max-time 2) ;; esac ;;
  esac
  command curl -w '%{stderr}[[http %{http_code}]]\n' "${extra[@]}" "$@"
  local rc=$?
  if [ $rc -eq 28 ]; then return 0; fi  # a stream cut by --max-time (Rule 2)
  return $rc
}
trap 'echo "[[exit $?]]" >&2' ERR
"""

@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    kind: str  # "script" | "cmd" | "prompt" | "http"
    text: str
    shown: str  # the output or comments the doc shows with it
    skip: bool

    @property
    def allows_error(self) -> bool:
        return "(error)" in self.shown or '"error"' in self.shown

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _commands(body: str) -> list[tuple[int, str, str, str]]:
    """(line offset, kind, command, shown output) of the `$ ` and prompt lines of a block."""
    lines = body.split("\n")
    out: list[tuple[int, str, str, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kind = "cmd" if line.startswith("$ ") else "prompt" if line.startswith(PROMPT) else ""
        if not kind:
            i += 1
            continue
        start = i
        cmd = line[2:] if kind == "cmd" else line[len(PROMPT):]
        while i + 1 < len(lines) and (cmd.endswith("\\") or not _closed(cmd)):
            i += 1
            cmd += "\n" + lines[i]
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith(("$ ", PROMPT)):
            shown.append(lines[i])
            i += 1
        out.append((start, kind, cmd, "\n".join(shown)))
    return out


def _closed(cmd: str) -> bool:
    try:
        shlex.split(cmd, comments=True)
    except ValueError:
        return False
    return True


def examples(path: Path) -> list[Example]:
    text = path.read_text()
    out: list[Example] = []
    prev_end = 0
    blocks = list(FENCE.finditer(text))
    for n, m in enumerate(blocks):
        lang, body = m.group(1).lower(), textwrap.dedent(m.group(2))
        line = text.count("\n", 0, m.start()) + 2  # the first line inside the fence
        skip = bool(SKIP.search(text, prev_end, m.start()))
        prev_end = m.end()
        after = textwrap.dedent(blocks[n + 1].group(2)) if n + 1 < len(blocks) else ""
        between = text[m.end():blocks[n + 1].start()] if n + 1 < len(blocks) else ""
        doc = str(path.relative_to(ROOT))
        if lang in SCRIPT_LANGS:
            if lang == "console" or any(x.startswith(("$ ", PROMPT)) for x in body.split("\n")):
                for off, kind, cmd, shown in _commands(body):
                    out.append(Example(doc, line + off, kind, cmd, shown, skip))
            else:
                # the output block printed right under a script is what it shows
                shown = body + (after if not between.strip() else "")
                out.append(Example(doc, line, "script", body, shown, skip))
        elif lang == "http-request":
            out.append(Example(doc, line, "http", body, "", skip))
        elif lang in OUTPUT_LANGS:
            for off, kind, cmd, shown in _commands(body):
                out.append(Example(doc, line + off, kind, cmd, shown, skip))
    return out


def _ports(text: str, http_port: int, resp_port: int) -> str:
    text = re.sub(r"\b(?:localhost|127\.0\.0\.1):7070\b", f"127.0.0.1:{http_port}", text)
    text = re.sub(r"redis-cli -p 6379\b", "redis-cli", text)
    return re.sub(r"\b(?:localhost|127\.0\.0\.1):6379\b", f"127.0.0.1:{resp_port}", text)


def _http(port: int, body: str) -> str:
    """Replay one ```http-request block; the response is checked by tests/httpapi."""
    head, _, payload = body.partition("\n\n")
    first, *header_lines = head.strip().split("\n")
    method, target = first.split()[:2]
    headers = dict(h.split(": ", 1) for h in header_lines if ": " in h)
    if payload.strip() and "Content-Type" not in headers:
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, target, body=payload.strip().encode() or None, headers=headers)
        resp = conn.getresponse()
        if resp.getheader("content-type", "").startswith("text/event-stream"):
            resp.close()  # a watch or a job stream: its first frames are not needed here
            return f"[[http {resp.status}]]"
        resp.read()
        return f"[[http {resp.status}]]"
    finally:
        conn.close()


class Session:
    """One bash for a document (Rule 2): each example's output goes to its own files."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.dir = workdir
        self.n = 0
        self.proc = subprocess.Popen(["bash"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, text=True, env=env,
                                     cwd=workdir, start_new_session=True)
        self._send(PREAMBLE)

    def _send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def run(self, script: str) -> tuple[int, str, str]:
        self.n += 1
        out, err, rc = (self.dir / f"{self.n}.{x}" for x in ("out", "err", "rc"))
        self._send(f"{{\n{script}\n}} >{out} 2>{err} </dev/null; echo $? >{rc}.tmp; "
                   f"mv {rc}.tmp {rc}")
        deadline = time.monotonic() + TIMEOUT_S
        while not rc.exists():  # the shell is another process: poll for its answer
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return -1, _read(out), _read(err) + f"\n(no answer within {TIMEOUT_S} s)"
            time.sleep(0.02)
        return int(rc.read_text() or -1), _read(out), _read(err)

    def close(self) -> None:
        try:  # the session and what its examples left in the background (`cmd &`)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def run(ex: Example, http_port: int, resp_port: int, shell: Session) -> str | None:
    """The failure of one example (Rule 3), or None."""
    if ex.kind == "http":
        return None if _http(http_port, ex.text) else "no response"
    text = _ports(ex.text, http_port, resp_port)
    if ex.kind == "prompt":
        text = "redis-cli " + shlex.join(shlex.split(text))  # redis-cli's words, unglobbed
    code, out, err = shell.run(text)
    statuses = [int(s) for s in re.findall(r"\[\[http (\d+)\]\]", err)]
    problems = [f"exit {c}" for c in re.findall(r"\[\[exit (\d+)\]\]", err)]
    if code != 0 and not problems:
        problems.append(f"exit {code}")
    if not ex.allows_error:
        problems += [f"HTTP {s}" for s in statuses if s >= 400]
        if "(error)" in out:
            problems.append("an (error) reply")
    if _skipped(out) and not any(w in ex.shown for w in SKIP_WORDS):
        problems.append("a queue operation was skipped (not_held / stale_lease ...)")
    if not problems:
        return None
    return (f"{ex.where()}: {', '.join(problems)}\n--- example\n{ex.text}\n--- stdout\n{out}"
            f"--- stderr\n{err}")


SKIP_WORDS = ("not_held", "not_holder", "stale_lease")


def _skipped(out: str) -> bool:
    """Did an ack/nack/extend reply skip a job (HTTP JSON or redis-cli's RESP2/RESP3 view)?"""
    if re.search(r'"skipped":\s*\[\s*\{', out):
        return True
    lines = out.split("\n")
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.rstrip().endswith('"skipped"') and re.search(r"\d\) 1\) ", nxt):
            return True  # a list of skipped jobs (a router's `skipped` is a count)
        if re.search(r'"skipped" => \d\) ', line):
            return True
    return False


def _doc_ids() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in DOCS if examples(p)]


def test_the_runner_finds_the_examples() -> None:
    found = {d: examples(ROOT / d) for d in _doc_ids()}
    assert {"README.md", "docs/queues.md", "docs/routers.md", "docs/resp.md"} <= set(found)
    assert sum(len(v) for v in found.values()) >= 49  # issue 41 tried 49 as a new user
    skipped = [e for v in found.values() for e in v if e.skip]
    assert len(skipped) <= 6, [e.where() for e in skipped]  # a few, each marked in its doc


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("redis-cli")),
                    reason="the doc examples use curl and redis-cli (make test installs them)")
@pytest.mark.parametrize("doc", _doc_ids())
def test_doc_examples_run_as_written(doc: str, server_factory, tmp_path: Path) -> None:
    srv = server_factory()
    shell = Session({**os.environ, "DOC_RESP_PORT": str(srv.resp_port)}, tmp_path)
    failures = []
    try:
        for ex in examples(ROOT / doc):
            if not ex.skip:
                failure = run(ex, srv.http_port, srv.resp_port, shell)
                if failure:
                    failures.append(failure)
    finally:
        shell.close()
    assert not failures, "\n\n".join(failures)
