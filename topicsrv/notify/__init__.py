"""The delivery scheduler and the one blocking machinery: every waiting consumer is woken
through it, in effective-priority order, and a consumer only when there is work for it.

Users: SSE watches (`/watch`, `/v0/watch`), long-poll diffs and router workers (fan-out task
waiters); XREAD BLOCK (fan-out, served); XREADGROUP BLOCK, TOPIC.CLAIM BLOCK and a claim's
`wait_ms` (consumers, served); `/v0/work` streams and claims on cohort queues (consumers,
tasks). Modules: waiter.py (a waiter, a connection's Delivery), scheduler.py (passes, the
served waiters' admission), lines.py (per-key FIFO of consumers), runner.py (the end-of-step
service and the timers), blocks.py (a blocked command as a value, with no task of its own).
A fan-out task waiter:

    with notifier.waiter(topics) as w:
        while True:
            w.arm()                 # before the read (Rule 1)
            ... read ...
            ... send; w.delivered()  # a stream's turn ends when its output is handed over
            if not await w.wait(timeout_s): ...   # True once woken and admitted

Rule 1: arm *before* reading the engine, wait only if the read came back empty. The engine
never yields, so no append can slip between the read and the wait.
Rule 2: `changed(topic)` (an engine listener) marks the topic's armed fan-out waiters ready
and wakes the task ones at once, exactly as a plain event would. A ready waiter is then
*admitted* by a pass before it reads; from then on it has a *turn*, which ends when what it
read has been handed to its socket (Rule 8), or when it waits again or leaves without sending
anything.
Rule 3 (the common case costs nothing): a pass admits every ready waiter when they fit in
PASS_BUDGET or all wait on one topic; a single task waiter is admitted by its own wake-up, no
hop.
Rule 4 (contention): otherwise (a contended pass) it takes the PASS_BUDGET ready waiters of
highest key (P_eff of the topic that woke them, seeds 3.1, + age_boost of the time they have
been ready; FIFO among equals) and admits them in *steps*, one key at a time, highest first:
a step is admitted once every turn of the step before it has ended, so every delivery of a
higher key is handed to its socket before any lower-key reader of the pass runs. The rest, and
any waiter woken meanwhile, wait until the pass's last step is done, or until the pass is
TICK_MS old (a member stuck on a slow socket does not hold the others), then the next pass is
formed with fresh keys (P_eff is cached per topic for one tick); members of the old pass not
admitted yet are ready again and keyed anew.
Rule 5 (starvation bound): a waiter ready for AGE_CAP_MS or longer joins the next pass whatever
its key or the budget, in the pass's first steps, so a ready waiter is served within
AGE_CAP_MS + TICK_MS.
Rule 6: the pass order decides who is served first, never what: seq order, retention and
visibility are the engine's; a waiter reads everything after its cursor when admitted.
Rule 7: admission observes the wait from ready to admitted in a per-band histogram (bands of
the waiter's P_eff without the age term: <0, 0..499, >=500).
Rule 8 (a turn ends at delivery): a stream (SSE watch, job stream, router) calls `delivered()`
once its frames are sent (its forward is done). A waiter that leaves its `with` block with a
reply still to be written (long poll, BLOCK, claim wait) ends its turn through the connection:
the I/O adapter holds a `Delivery` (`delivery()`, a context variable of its task, used by that
task and the ones it starts itself) and calls `done()` once the reply is handed to the
socket, or the connection ends. A taskless served waiter's adapter calls `delivered()` itself
once its reply is sent (topicsrv/resp/reactor.py Rule 9).
Only a turn of a step that others wait for is held that way; without a Delivery (a test, a
router) the turn ends at the close. `trace`, when a list, records every delivery (pass, topic)
in the order the turns end (a test hook).
Rule 9 (served waiters: the work is done where the wake-up was): a waiter made with `serve` is
not woken to read; it is served. Its readiness kicks the notifier's runner (runner.py), which
runs once the step that made the change is over (after an EXEC, a script, a reactor pass) and
admits ready served waiters through the same passes (Rules 3-7). Admission calls `serve()`
synchronously, in admission order: NOTHING means it came back empty (it waits on, in place,
and its turn ends); anything else is its result: it leaves its topics and lines, and its
adapter (`on_done`: the reactor resumes the session and sends the reply, no task involved) or
its task (woken with the result) takes over. A fan-out of N readers is N synchronous attempts
in one runner turn, with no task switch per reader; a blocked RESP client costs a `Block`
(blocks.py), not a task.
Rule 10 (consumers: only as many as the key can serve): a consumer waits in the FIFO line of
each of its keys (lines.py), not in the topic's fan-out set. A change of a key makes its lines
dirty; at the end of the step each dirty line hands its units (`supply()`, an upper bound) to
the consumers at its head, each counting its demand (COUNT, MAX) until it reports, and only
those are made ready. A write of one entry with N blocked group readers makes one ready, a
burst of K makes K ready; the rest stay parked. A line's `due` (a lease deadline, a nack
delay) refills it when that time comes, without a write.
Rule 11 (reports, hand-on): a served consumer reports through its attempt; a task consumer
calls `took()` when its attempt got something, and comes back empty otherwise (it arms or
waits again, or leaves). A consumer that took leaves its place; one that came back empty keeps
it, and if its keys did not change since it was made ready they are exhausted (nobody else
could take anything) until their next change; otherwise the next in line is tried. A consumer
that leaves while ready or being served (timeout, disconnect, cancel) passes its turn on.
Rule 12: nothing is handed to a consumer that is gone: a `Block` asks its adapter whether its
client is still there (`alive`) just before its attempt, and one abandoned after it got a
result gives the result back (`give_back`: a claim's leases are released at once).
"""

from topicsrv.notify.scheduler import (
    BANDS,
    LATENCY_BUCKETS_S,
    PASS_BUDGET,
    TICK_S,
    Notifier,
    band_of,
    wait_any,
)
from topicsrv.notify.waiter import NOTHING, UNLIMITED, Delivery, Waiter, delivery

__all__ = ["BANDS", "LATENCY_BUCKETS_S", "NOTHING", "PASS_BUDGET", "TICK_S", "UNLIMITED",
           "Delivery", "Notifier", "Waiter", "band_of", "delivery", "wait_any"]
