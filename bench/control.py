#!/usr/bin/env python3
"""bench/control.py - the measuring half of bench/control.sh (which starts
the servers, builds the repositories and runs wrk): session start latency
against bubblewrap, 100 live sessions, session churn, and the summary.

Every phase appends "key value" lines to the results file; `report` turns
them into the table. Standard library only. Times are monotonic
(time.monotonic_ns) on the client, or what the server recorded itself
(outcome.start_ms, server clock, created -> first output line).

  control.py starts  URL SMALL BIG BWRAP_ARGV_JSON RESULTS IDS SEQ ROUNDS CONC
  control.py live    URL REPO N PID RESULTS IDS
  control.py churn   URL REPO N RESULTS IDS
  control.py report  RESULTS

The token comes in $TOKEN (not on the command line, where ps shows it),
the warren executable in $W.
"""
import http.client
import json
import os
import select
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def now_ms():
    return time.monotonic_ns() / 1e6


def pct(values, p):
    """p-th percentile, linear between closest ranks (p99 of 50 samples
    is between the two largest)."""
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Api:
    """One keep-alive connection (one per thread)."""

    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.auth = {"Authorization": "Bearer " + token}
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        return self.conn

    def call(self, method, path, body=None):
        headers = dict(self.auth)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                c = self._conn()
                c.request(method, "/api/v1" + path, body=data, headers=headers)
                r = c.getresponse()
                text = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, (json.loads(text) if text else None)
            except (http.client.HTTPException, ConnectionError, OSError):
                self.close()
                if attempt == 2:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def submit(self, repo, agent, prompt="bench"):
        code, body = self.call("POST", "/sessions",
                               {"repo": repo, "prompt": prompt, "agent": agent})
        if code != 201:
            sys.exit(f"bench: POST /sessions: {code} {body}")
        return body["id"]

    def follow(self, sid, limit_s=60):
        """Reads the session's event stream until it ends (the session
        rests); returns (monotonic ms of the first output event or None,
        last state seen). A session not at rest after limit_s is an error
        (the stream's keepalives would otherwise wait forever)."""
        deadline = time.monotonic() + limit_s
        c = http.client.HTTPConnection(self.host, self.port, timeout=limit_s)
        try:
            c.request("GET", f"/api/v1/sessions/{sid}/events", headers=self.auth)
            r = c.getresponse()
            if r.status != 200:
                sys.exit(f"bench: events of {sid}: {r.status}")
            first, state, kind = None, None, None
            while True:
                if time.monotonic() > deadline:
                    sys.exit(f"bench: session {sid} not at rest after {limit_s} s "
                             f"(last state {state})")
                try:
                    line = r.readline()
                except TimeoutError:
                    continue
                if not line:
                    break
                if line.startswith(b"event: "):
                    kind = line[7:].strip()
                    if kind == b"output" and first is None:
                        first = now_ms()
                elif line.startswith(b"data: ") and kind == b"state":
                    state = json.loads(line[6:]).get("data", {}).get("state")
            return first, state
        finally:
            c.close()


def record_ids(path, ids):
    with open(path, "a") as f:
        for i in ids:
            print(i, file=f)


def put(results, key, value):
    with open(results, "a") as f:
        if isinstance(value, float):
            value = f"{value:.3f}"
        print(f"{key} {value}", file=f)


# ---- 1. session start --------------------------------------------------------

PARTS = ("restore", "sync", "services", "agent")


def one_session(api, repo, ids_file, agent):
    """POST, follow to rest; the server's start breakdown plus the client's
    POST -> first output event."""
    t0 = now_ms()
    sid = api.submit(repo, agent)
    record_ids(ids_file, [sid])
    first, state = api.follow(sid)
    code, s = api.call("GET", f"/sessions/{sid}")
    if s.get("state") != "review":
        sys.exit(f"bench: session {sid} ended {s.get('state')}: {s.get('reason')}")
    st = (s.get("outcome") or {}).get("start_ms") or {}
    if "total" not in st:
        sys.exit(f"bench: session {sid}: no outcome.start_ms.total: {s.get('outcome')}")
    row = {k: float(st.get(k, 0) or 0) for k in PARTS + ("total",)}
    # the queue part is not in outcome.start_ms (docs/api.md shows it):
    # take it from the provisioning transition's event
    code, ev = api.call("GET", f"/sessions/{sid}/events?format=json")
    evs = ev["events"]

    def when(kind, pred=lambda d: True):
        return next((e["time_ms"] for e in evs if e["kind"] == kind and pred(e["data"])), None)

    row["queue"] = next((float(e["data"].get("queued_ms", 0)) for e in evs
                         if e["kind"] == "state" and e["data"].get("state") == "provisioning"),
                        float("nan"))
    row["queue_in_outcome"] = "queue" in st
    row["client"] = (first - t0) if first else float("nan")
    # gaps between the parts, from event times (server clock, 1 ms
    # resolution): sandbox ready -> state running, running -> turn started
    ready = when("phase", lambda d: d.get("phase") == "ready")
    running = when("state", lambda d: d.get("state") == "running")
    turn = when("turn", lambda d: d.get("status") == "started")
    row["gap_ready_running"] = (running - ready) if ready and running else float("nan")
    row["gap_running_turn"] = (turn - running) if running and turn else float("nan")
    # a session whose sandbox was lost under it went `interrupted` and was
    # retried after the back-off; the server then recorded the first turn's
    # error line as the "first output". Count it, and take its real start:
    # created -> the agent's own line (1 ms resolution)
    row["interrupted"] = any(e["kind"] == "state" and e["data"].get("state") == "interrupted"
                             for e in evs)
    if row["interrupted"]:
        real = when("output", lambda d: d.get("line") == "first")
        print(f"bench: {sid} was interrupted: "
              f"{next((e['data'].get('reason') for e in evs if e['kind'] == 'state' and e['data'].get('state') == 'interrupted'), '')}",
              file=sys.stderr)
        if real:
            row["total"] = float(real - s["created_ms"])
    return row


def bwrap_one(argv):
    """spawn -> first line on its stdout, then reap."""
    r, w = os.pipe()
    t0 = now_ms()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, w, 1),
                                       (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        buf += chunk
    t = now_ms() - t0
    os.close(r)
    _, st = os.waitpid(pid, 0)
    if st != 0 or not buf.startswith(b"first"):
        sys.exit(f"bench: bwrap failed (status {st}, output {buf!r})")
    return t


def bwrap_concurrent(argv, n):
    """n spawned back to back; each timed from its own spawn to its first
    line."""
    procs = []
    for _ in range(n):
        r, w = os.pipe()
        t0 = now_ms()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, w, 1),
                                           (os.POSIX_SPAWN_CLOSE, r)])
        os.close(w)
        procs.append([r, pid, t0, None])
    pending = {p[0]: p for p in procs}
    while pending:
        ready, _, _ = select.select(list(pending), [], [], 30)
        if not ready:
            sys.exit("bench: concurrent bwrap: no output after 30 s")
        for fd in ready:
            p = pending.pop(fd)
            os.read(fd, 4096)
            p[3] = now_ms() - p[2]
    out = []
    for r, pid, _, t in procs:
        os.close(r)
        os.waitpid(pid, 0)
        out.append(t)
    return out


def concurrent_sessions(url, token, repo, n, ids_file, agent):
    rows = [None] * n
    barrier = threading.Barrier(n)
    errors = []

    def worker(i):
        api = Api(url, token)
        try:
            api.call("GET", "/healthz")  # connection up before the barrier
            barrier.wait()
            rows[i] = one_session(api, repo, ids_file, agent)
        except BaseException as e:  # sys.exit in a thread: keep the message
            errors.append(str(e))
        finally:
            api.close()

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit(errors[0])
    return rows


def wait_no_sandboxes(warren, ids_file, timeout_s):
    """Until no ws-<id> of this run's sessions is left; returns the
    names still there at the timeout (empty: none)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = our_sandboxes(warren, ids_file)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def our_sandboxes(warren, ids_file):
    ours = {"ws-" + l.strip() for l in open(ids_file) if l.strip()}
    out = subprocess.run([warren, "sandbox", "ls", "--all", "--json"], capture_output=True,
                         text=True).stdout
    try:
        j = json.loads(out or "[]")
    except ValueError:
        return ["(sandbox ls: unreadable output)"]
    if isinstance(j, dict):
        j = j.get("sandboxes", [])
    return sorted(s["name"] for s in j if s.get("name") in ours)


def summarize(results, prefix, rows):
    tot = [r["total"] for r in rows]
    put(results, f"{prefix}.n", len(rows))
    put(results, f"{prefix}.p50", pct(tot, 50))
    put(results, f"{prefix}.p99", pct(tot, 99))
    for k in ("queue",) + PARTS + ("client",):
        put(results, f"{prefix}.{k}", pct([r[k] for r in rows], 50))
    # the rest of total: the runner's own work between the parts (store
    # transitions, events, spawning the exec client)
    put(results, f"{prefix}.other",
        pct([r["total"] - sum(r[k] for k in ("queue",) + PARTS) for r in rows], 50))
    for k in ("gap_ready_running", "gap_running_turn"):
        put(results, f"{prefix}.{k}", pct([r[k] for r in rows], 50))
    put(results, f"{prefix}.interrupted", sum(1 for r in rows if r["interrupted"]))
    put(results, f"{prefix}.queue_in_outcome",
        "yes" if all(r["queue_in_outcome"] for r in rows) else "no")


def starts(args):
    url, small, big, bw_json, results, ids_file = args[:6]
    token = os.environ["TOKEN"]
    seq, rounds, conc = (int(x) for x in args[6:9])
    bw = json.loads(bw_json)
    agent = ["sh", "-c", "echo first"]
    warren = os.environ["W"]
    api = Api(url, token)
    # one of each first, not counted (page cache, first cgroup of a kind)
    one_session(api, small, ids_file, agent)
    one_session(api, big, ids_file, agent)
    bwrap_one(bw)
    # sequential: small, big, bwrap, alternating, so that load from
    # elsewhere hits all three alike
    rs, rb, bt = [], [], []
    for _ in range(seq):
        rs.append(one_session(api, small, ids_file, agent))
        rb.append(one_session(api, big, ids_file, agent))
        bt.append(bwrap_one(bw))
    summarize(results, "seq.small", rs)
    summarize(results, "seq.big", rb)
    put(results, "seq.bwrap.p50", pct(bt, 50))
    put(results, "seq.bwrap.p99", pct(bt, 99))
    # concurrent: rounds of conc POSTs at once (small, big, bwrap per
    # round); between rounds the resting sandboxes of the last one are
    # let go (idle 1 s) so that every round starts from the same state
    cs, cb, cw = [], [], []
    for _ in range(rounds):
        for repo, acc in ((small, cs), (big, cb)):
            wait_no_sandboxes(warren, ids_file, 10)
            acc.extend(concurrent_sessions(url, token, repo, conc, ids_file, agent))
        cw.extend(bwrap_concurrent(bw, conc))
    summarize(results, "conc.small", cs)
    summarize(results, "conc.big", cb)
    put(results, "conc.bwrap.p50", pct(cw, 50))
    put(results, "conc.bwrap.p99", pct(cw, 99))
    api.close()


# ---- 3. live sessions --------------------------------------------------------

def mem_kib(pid):
    rss = pss = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def submit_many(url, token, repo, n, agent, ids_file, workers=4):
    ids, lock = [], threading.Lock()
    errors = []
    remaining = iter(range(n))

    def worker():
        api = Api(url, token)
        try:
            while True:
                with lock:
                    if next(remaining, None) is None:
                        return
                sid = api.submit(repo, agent)
                with lock:
                    ids.append(sid)
        except BaseException as e:
            errors.append(str(e))
        finally:
            api.close()

    ts = [threading.Thread(target=worker) for _ in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    record_ids(ids_file, ids)
    if errors:
        sys.exit(errors[0])
    return ids


def count_state(api, ids, state):
    code, body = api.call("GET", f"/sessions?state={state}&limit=500")
    mine = set(ids)
    return sum(1 for s in body["sessions"] if s["id"] in mine)


def bad_states(api, ids):
    bad = []
    for st in ("failed", "cancelled", "expired"):
        code, body = api.call("GET", f"/sessions?state={st}&limit=500")
        bad += [(s["id"], st, s.get("reason")) for s in body["sessions"] if s["id"] in set(ids)]
    return bad


def count_interrupted(api, ids):
    n = 0
    for sid in ids:
        code, ev = api.call("GET", f"/sessions/{sid}/events?format=json")
        if any(e["kind"] == "state" and e["data"].get("state") == "interrupted"
               for e in ev["events"]):
            n += 1
    return n


def live(args):
    url, repo, n, pid, results, ids_file = args
    token, warren = os.environ["TOKEN"], os.environ["W"]
    n, pid = int(n), int(pid)
    api = Api(url, token)
    left = wait_no_sandboxes(warren, ids_file, 30)
    if left:
        sys.exit(f"bench: sandboxes still up before the live phase: {left[:3]}")
    time.sleep(0.5)
    rss0, pss0 = mem_kib(pid)
    thr0 = threads_of(pid)
    t0 = now_ms()
    ids = submit_many(url, token, repo, n, ["sleep", "30"], ids_file)
    t_submitted = now_ms()
    deadline = time.monotonic() + 120
    while True:
        running = count_state(api, ids, "running")
        if running == n:
            break
        if time.monotonic() > deadline:
            sys.exit(f"bench: {running}/{n} running after 120 s; "
                     f"failed: {bad_states(api, ids)[:3]}")
        time.sleep(0.02)
    t_running = now_ms()
    time.sleep(1.0)  # settled: every runner waiting on its agent
    rss1, pss1 = mem_kib(pid)
    thr1 = threads_of(pid)
    put(results, "live.n", n)
    put(results, "live.submit_ms", t_submitted - t0)
    put(results, "live.running_ms", t_running - t0)
    put(results, "live.rss0", rss0)
    put(results, "live.rss1", rss1)
    put(results, "live.pss0", pss0 if pss0 is not None else "n/a")
    put(results, "live.pss1", pss1 if pss1 is not None else "n/a")
    put(results, "live.rss_per", (rss1 - rss0) / n)
    if pss0 is not None and pss1 is not None:
        put(results, "live.pss_per", (pss1 - pss0) / n)
    put(results, "live.interrupted", count_interrupted(api, ids))
    put(results, "live.threads0", thr0)
    put(results, "live.threads1", thr1)
    # cancel all, 10 at a time
    t0 = now_ms()
    errors = []
    chunks = [ids[i::10] for i in range(10)]

    def canceller(chunk):
        a = Api(url, token)
        try:
            for sid in chunk:
                code, body = a.call("POST", f"/sessions/{sid}/cancel")
                if code != 200:
                    errors.append(f"{sid}: {code} {body}")
        finally:
            a.close()

    ts = [threading.Thread(target=canceller, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    put(results, "live.cancel_ms", now_ms() - t0)
    put(results, "live.cancel_errors", len(errors))
    left = wait_no_sandboxes(warren, ids_file, 20)
    put(results, "live.left", len(left))
    put(results, "live.cancelled", count_state(api, ids, "cancelled"))
    api.close()
    if errors:
        print(f"bench: cancel: {errors[:3]}", file=sys.stderr)
    if left:
        print(f"bench: left after cancel: {left[:5]}", file=sys.stderr)


# ---- 4. churn ------------------------------------------------------------------

def churn(args):
    url, repo, n, results, ids_file = args
    token, warren = os.environ["TOKEN"], os.environ["W"]
    n = int(n)
    api = Api(url, token)
    t0 = now_ms()
    ids = submit_many(url, token, repo, n, ["true"], ids_file)
    t_submitted = now_ms()
    deadline = time.monotonic() + 240
    while True:
        review = count_state(api, ids, "review")
        if review == n:
            break
        bad = bad_states(api, ids)
        if bad or time.monotonic() > deadline:
            sys.exit(f"bench: churn: {review}/{n} in review; failed: {bad[:3]}")
        time.sleep(0.05)
    t_review = now_ms()
    left = wait_no_sandboxes(warren, ids_file, 60)
    t_end = now_ms()
    if left:
        sys.exit(f"bench: churn: sandboxes left after 60 s: {left[:3]}")
    # what the sessions themselves took: created -> review (server clock)
    # and when each was admitted (queued -> provisioning, server clock)
    spans, admitted, interrupted = [], [], 0
    for sid in ids:
        code, s = api.call("GET", f"/sessions/{sid}")
        spans.append(s["finished_ms"] - s["created_ms"])
        code, ev = api.call("GET", f"/sessions/{sid}/events?format=json")
        states = [e for e in ev["events"] if e["kind"] == "state"]
        admitted += [e["time_ms"] for e in states if e["data"].get("state") == "provisioning"]
        interrupted += any(e["data"].get("state") == "interrupted" for e in states)
    admitted.sort()
    gaps = [b - a for a, b in zip(admitted[8:], admitted[9:])]  # after the first 8 slots
    put(results, "churn.n", n)
    put(results, "churn.interrupted", interrupted)
    if gaps:
        put(results, "churn.admit_gap_p50", pct(gaps, 50))
        put(results, "churn.admit_gap_p90", pct(gaps, 90))
    put(results, "churn.submit_ms", t_submitted - t0)
    put(results, "churn.review_ms", t_review - t0)
    put(results, "churn.end_ms", t_end - t0)
    put(results, "churn.rate", n / ((t_end - t0) / 1000))
    put(results, "churn.rate_review", n / ((t_review - t0) / 1000))
    put(results, "churn.span_p50", pct(spans, 50))
    put(results, "churn.span_max", max(spans))
    api.close()


# ---- the table -------------------------------------------------------------------

def report(args):
    r = {}
    for line in open(args[0]):
        k, _, v = line.strip().partition(" ")
        r[k] = v

    def f(k, fmt="{:.1f}"):
        try:
            return fmt.format(float(r[k]))
        except (KeyError, ValueError):
            return r.get(k, "n/a")

    def ratio(a, b, fmt="{:.2f}"):
        try:
            return fmt.format(float(r[a]) / float(r[b]))
        except (KeyError, ValueError, ZeroDivisionError):
            return "n/a"

    def verdict(ok):
        return "met" if ok else "NOT MET"

    rows = []
    print()
    print("== control plane: summary")
    print(f"(load average, 1 min: {r.get('load.start', '?')} at the start, "
          f"{r.get('load.end', '?')} at the end, on {os.cpu_count()} cpus)")
    print()
    print("Session start (outcome.start_ms, created -> first output line, server clock; ms)")
    hdr = ("run", "n", "p50", "p99", "queue", "restore", "sync", "services", "agent",
           "other", "client", "bwrap p50", "p50/bwrap", "interrupted")
    print("| " + " | ".join(hdr) + " |")
    print("|" + " --- |" * len(hdr))
    for mode, label in (("seq", "sequential"), ("conc", "10 concurrent")):
        for size in ("small", "big"):
            p = f"{mode}.{size}"
            rows.append((f"{label}, {size}", f(p + ".n", "{:.0f}"), f(p + ".p50"),
                         f(p + ".p99"), f(p + ".queue"), f(p + ".restore"),
                         f(p + ".sync"), f(p + ".services"), f(p + ".agent"),
                         f(p + ".other"), f(p + ".client"), f(f"{mode}.bwrap.p50"),
                         ratio(p + ".p50", f"{mode}.bwrap.p50"),
                         r.get(p + ".interrupted", "n/a")))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("(queue: from the provisioning event's queued_ms; other: total - queue - parts;")
    print(" client: POST sent -> output event read on the event stream, client clock;")
    print(" interrupted: sessions whose sandbox was lost under them and retried, counted")
    print(" with their real start, created -> the agent's line)")
    print()
    for mode, label in (("seq", "sequential"), ("conc", "10 concurrent")):
        print(f"between the parts, {label} small (event times, p50 ms): sandbox ready -> running "
              f"{f(mode + '.small.gap_ready_running')}, running -> turn started "
              f"{f(mode + '.small.gap_running_turn')}")
    print()
    for mode, label in (("seq", "sequential"), ("conc", "10 concurrent")):
        print(f"big/small p50, {label}: {ratio(mode + '.big.p50', mode + '.small.p50')}"
              f"   (snapshot layers: small {r.get('snap.small.bytes', 'n/a')} B,"
              f" big {r.get('snap.big.bytes', 'n/a')} B)")
    try:
        p50s = float(r["seq.small.p50"])
        print(f"target p50 <= 15 ms (sequential, no services): {p50s:.1f} ms: "
              f"{verdict(p50s <= 15)}")
    except (KeyError, ValueError):
        pass
    print()
    print("GET throughput (wrk -t2 -c32 -d5s, loopback, wrk on the same 2 cores)")
    print("| route | req/s | p50 latency |")
    print("| --- | --- | --- |")
    print(f"| GET /api/v1/sessions/{{id}} | {f('wrk.session', '{:.0f}')} | {r.get('wrk.session.lat', 'n/a')} |")
    print(f"| GET /api/v1/healthz (baseline) | {f('wrk.healthz', '{:.0f}')} | {r.get('wrk.healthz.lat', 'n/a')} |")
    print(f"session / healthz: {ratio('wrk.session', 'wrk.healthz')}")
    try:
        v = float(r["wrk.session"])
        print(f"target >= 20,000 req/s: {v:.0f}: {verdict(v >= 20000)}")
    except (KeyError, ValueError):
        pass
    print()
    print(f"{r.get('live.n', '?')} live sessions (agent `sleep 30`)")
    print("| | before | with them | per session |")
    print("| --- | --- | --- | --- |")
    print(f"| warren-serve VmRSS | {f('live.rss0', '{:.0f}')} KiB | {f('live.rss1', '{:.0f}')} KiB | {f('live.rss_per')} KiB |")
    print(f"| warren-serve Pss | {f('live.pss0', '{:.0f}')} KiB | {f('live.pss1', '{:.0f}')} KiB | {f('live.pss_per')} KiB |")
    print(f"| threads | {r.get('live.threads0', 'n/a')} | {r.get('live.threads1', 'n/a')} | |")
    try:
        per = float(r["live.rss_per"])
        print(f"target <= 1 MiB per session: {per:.1f} KiB: {verdict(per <= 1024)}")
    except (KeyError, ValueError):
        pass
    print(f"all running after {f('live.running_ms', '{:.0f}')} ms "
          f"(POSTs done after {f('live.submit_ms', '{:.0f}')} ms); "
          f"cancel of all: {f('live.cancel_ms', '{:.0f}')} ms, "
          f"{r.get('live.cancelled', '?')} cancelled, {r.get('live.cancel_errors', '?')} errors, "
          f"ws-* sandboxes left: {r.get('live.left', '?')}; "
          f"interrupted: {r.get('live.interrupted', '?')}")
    print()
    print(f"Churn: {r.get('churn.n', '?')} sessions, agent `true`, max_sandboxes 8, idle 1s")
    print(f"all in review after {f('churn.review_ms', '{:.0f}')} ms "
          f"({f('churn.rate_review')} sessions/s); no ws-* sandbox left after "
          f"{f('churn.end_ms', '{:.0f}')} ms: **{f('churn.rate')} sessions/s**; "
          f"one session created -> review: p50 {f('churn.span_p50', '{:.0f}')} ms, "
          f"max {f('churn.span_max', '{:.0f}')} ms; interrupted: {r.get('churn.interrupted', '?')}")
    print(f"time between admissions once the 8 slots are taken: p50 "
          f"{f('churn.admit_gap_p50', '{:.0f}')} ms, p90 {f('churn.admit_gap_p90', '{:.0f}')} ms")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"starts": starts, "live": live, "churn": churn, "report": report}[cmd](args)


if __name__ == "__main__":
    main()
