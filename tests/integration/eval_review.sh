#!/bin/bash
# Evals on the server and blind review (docs/eval.md, docs/api.md "Evals"):
# two configurations of a command agent on a tiny suite of frozen tasks;
# each run and its attempts are published as they are written and listed
# by the API; a blind review batch over both runs' resolved changes hides
# the configuration (no run, agent, session or cost in what a reviewer
# gets) and is shuffled; verdicts are recorded with review times the
# server clips to what it saw; `eval report` (text, --json, --compare)
# adds accepted changes per reviewer minute and cost per accepted change,
# checked to the arithmetic from the recorded times; bad input is a 400
# that says why; a server that refuses the run leaves a note in its log
# and the run goes on; then the web UI in Chromium: the Evals page draws its SVG
# charts, two runs side by side, and the blind review page records a
# verdict by a click (tests/browser/evals.test.mjs).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/control_lib.sh"

"$ROOT_DIR/eval/repos.sh" "$TEST_TMP/repos" >/dev/null
cat >"$TEST_TMP/config.json" <<EOF2
{"repositories": [{"name": "c-hello", "url": "$TEST_TMP/repos/c-hello"}]}
EOF2
export WARREN_WEB_DIR="$ROOT_DIR/web"
server_start "$TEST_TMP/data" "$TEST_TMP/config.json"
RUNS="$TEST_TMP/runs"
# the reports and the browser's screenshots are kept here
OUT="$ROOT_DIR/$BUILD/test-artifacts/evals"
rm -rf "$OUT"
mkdir -p "$OUT"
ev() { "$WARREN" eval "$@" --dir "$RUNS" --server "$URL" --token "$TOKEN"; }
DB="$TEST_TMP/data/warren.db"
q() { sqlite3 "$DB" "$1"; }

# --- a suite of two frozen tasks on c-hello --------------------------------------
S="$TEST_TMP/suite"
BASE=165c7a2dd900c89f5c447e39b56283d1bf1b14f4
mkdir -p "$S/note" "$S/todo"
echo '{"name": "tiny"}' >"$S/suite.json"
jq -n --arg b $BASE '{repo: "c-hello", base: $b, prompt: "Write a <b>NOTE.txt</b> that says something.",
	fail_to_pass: ["grep -q . NOTE.txt"]}' >"$S/note/task.json"
jq -n --arg b $BASE '{repo: "c-hello", base: $b, prompt: "Write a TODO.txt with the next steps.",
	fail_to_pass: ["test -s TODO.txt"]}' >"$S/todo/task.json"

# A resolves both tasks, B only the note
A="$(ev run "$S" --agent 'echo alpha >NOTE.txt; echo alpha >TODO.txt' --repeat 2 --parallel 2 --wait --json 2>"$TEST_TMP/a.err" | jq -r .id)"
B="$(ev run "$S" --agent 'echo beta >NOTE.txt' --repeat 2 --parallel 2 --wait --json 2>"$TEST_TMP/b.err" | jq -r .id)"
[ -n "$A" ] && [ -n "$B" ] && [ "$A" != null ] && [ "$B" != null ] &&
	pass "two runs of two configurations" || { fail "two runs of two configurations" "$A $B $(tail -3 "$TEST_TMP/a.err" "$TEST_TMP/b.err")"; exit 0; }

# --- published and listed ----------------------------------------------------------
api GET /api/v1/evals
[ "$CODE" = 200 ] && echo "$BODY" | jq -e --arg a "$A" --arg b "$B" '[.evals[].id] | index($a) != null and index($b) != null' >/dev/null &&
	echo "$BODY" | jq -e --arg a "$A" '.evals[] | select(.id == $a) | .run.state == "finished" and (.run.agent | startswith("echo alpha")) and .run.repeat == 2' >/dev/null &&
	pass "GET /evals lists both runs as eval run published them (finished)" ||
	fail "GET /evals lists both runs as eval run published them (finished)" "$CODE $(echo "$BODY" | head -c 400)"
api GET "/api/v1/evals/$A"
echo "$BODY" | jq -e '(.attempts | length) == 4 and all(.attempts[]; .state == "done" and .resolved == true and (.session | startswith("s-")) and (.prompt | length) > 0)' >/dev/null &&
	diff <(echo "$BODY" | jq -S '.attempts | map(del(.prompt)) | sort_by(.task, .repeat)') \
		<(cat "$RUNS/$A"/attempts/*.json | jq -s -S 'sort_by(.task, .repeat)') >/dev/null &&
	pass "GET /evals/{id}: every attempt, as its file says, with the task's prompt" ||
	fail "GET /evals/{id}: every attempt, as its file says, with the task's prompt" "$(echo "$BODY" | head -c 500)"

# --- the blind batch ------------------------------------------------------------------
out="$(ev review "$A" "$B" --json)"
BATCH="$(echo "$out" | jq -r .id)"
[ "$(echo "$out" | jq .items)" = 6 ] && echo "$out" | jq -e --arg u "$URL/#/reviews/$BATCH" '.url == $u' >/dev/null &&
	pass "eval review: a batch of the 6 resolved changes of both runs, and its web UI address" ||
	fail "eval review: a batch of the 6 resolved changes of both runs, and its web UI address" "$out"
txt="$("$WARREN" eval review "$B" --server "$URL" --token "$TOKEN")"
echo "$txt" | grep -q "2 changes, blind, at $URL/#/reviews/b-" && pass "eval review prints the page's address" || fail "eval review prints the page's address" "$txt"

api GET "/api/v1/evals/reviews/$BATCH"
BATCH_BODY="$BODY"
ITEMS="$(echo "$BODY" | jq -r '.items[].item')"
first="$(echo "$ITEMS" | head -1)"
api GET "/api/v1/evals/reviews/$BATCH/items/$first"
ITEM_BODY="$BODY"
sessions="$(cat "$RUNS/$A"/attempts/*.json "$RUNS/$B"/attempts/*.json | jq -r .session)"
leak=""
for text in "$BATCH_BODY" "$ITEM_BODY"; do
	echo "$text" | jq -e '[.. | objects | keys[]] | map(select(test("agent|session|cost|run|attempt|config|tokens|user"))) | length == 0' >/dev/null || leak="$leak keys:$(echo "$text" | head -c 200)"
	for v in "$A" "$B" alpha beta $sessions; do echo "$text" | grep -q -- "$v" && leak="$leak $v"; done
done
[ "$(echo "$BATCH_BODY" | jq .total)" = 6 ] && [ -z "$leak" ] && echo "$ITEM_BODY" | jq -e '(.prompt | test("NOTE.txt|TODO.txt")) and .verdict == null' >/dev/null &&
	pass "a blind item shows its prompt and hides the configuration (no run, agent, session, cost)" ||
	fail "a blind item shows its prompt and hides the configuration (no run, agent, session, cost)" "$leak $(echo "$ITEM_BODY" | head -c 300)"
curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/evals/reviews/$BATCH/items/$first/diff" >"$TEST_TMP/item.diff"
grep -q '^+++ b/NOTE.txt\|^+++ b/TODO.txt' "$TEST_TMP/item.diff" && ! grep -q -- "s-[0-9a-f]\{16\}" "$TEST_TMP/item.diff" &&
	pass "the item's diff is the change, without its session" || fail "the item's diff is the change, without its session" "$(head -c 300 "$TEST_TMP/item.diff")"

# shuffled: the batches' orders, by run (the database knows, the reviewer does not)
grouped=0
orders=""
for i in 1 2 3 4 5; do
	api POST /api/v1/evals/reviews "{\"runs\": [\"$A\", \"$B\"]}"
	b="$(jget .id)"
	order="$(q "SELECT CASE run_id WHEN '$A' THEN 'A' ELSE 'B' END FROM eval_items WHERE batch_id = '$b' ORDER BY pos" | tr -d '\n')"
	orders="$orders $order"
	case "$order" in AAAABB | BBAAAA) grouped=$((grouped + 1)) ;; esac
done
[ "$grouped" -lt 5 ] && [ "$(echo $orders | tr ' ' '\n' | sort -u | wc -l)" -gt 1 ] &&
	pass "a batch is shuffled across the two runs ($orders)" || fail "a batch is shuffled across the two runs" "$orders"
# the extra batches' items are not reviewed: the figures below count only verdicts

# --- verdicts ----------------------------------------------------------------------------
api POST "/api/v1/evals/reviews/$BATCH/items/$(echo "$ITEMS" | sed -n 2p)" '{"verdict": "merge", "review_ms": 100}'
[ "$CODE" = 409 ] && echo "$BODY" | grep -q 'not shown yet' && pass "a verdict on an item never shown: 409" || fail "a verdict on an item never shown: 409" "$CODE $BODY"
# A's changes: merge, merge, merge, changes; B's: merge, reject; known times,
# all but one under what the server saw (each item is shown, then 0.5 s pass)
a_times=(400 200 300)
b_times=(500 250)
ai=0
bi=0
CLIPPED=""
for item in $ITEMS; do
	run="$(q "SELECT run_id FROM eval_items WHERE batch_id = '$BATCH' AND item = '$item'")"
	api GET "/api/v1/evals/reviews/$BATCH/items/$item"
	sleep 0.5
	if [ "$run" = "$A" ]; then
		if [ $ai -lt 3 ]; then body="{\"verdict\": \"merge\", \"review_ms\": ${a_times[$ai]}}"
		else body='{"verdict": "changes", "review_ms": 999999999}'; fi
		ai=$((ai + 1))
	else
		[ $bi = 0 ] && v=merge || v=reject
		body="{\"verdict\": \"$v\", \"review_ms\": ${b_times[$bi]}}"
		bi=$((bi + 1))
	fi
	api POST "/api/v1/evals/reviews/$BATCH/items/$item" "$body"
	[ "$CODE" = 200 ] || fail "a verdict is recorded" "$CODE $BODY"
	echo "$body" | grep -q 999999999 && CLIPPED="$(jget .review_ms)"
done
[ -n "$CLIPPED" ] && [ "$CLIPPED" -ge 450 ] && [ "$CLIPPED" -lt 30000 ] &&
	[ "$(q "SELECT review_ms FROM eval_items WHERE batch_id = '$BATCH' AND verdict = 'changes'")" = "$CLIPPED" ] &&
	pass "a claimed review time past what the server saw is clipped to it ($CLIPPED ms)" ||
	fail "a claimed review time past what the server saw is clipped to it" "'$CLIPPED'"
[ "$(q "SELECT COUNT(*) FROM eval_items WHERE batch_id = '$BATCH' AND verdict IS NOT NULL AND reviewer = 'admin' AND decided_ms >= shown_ms")" = 6 ] &&
	pass "every verdict is recorded with its reviewer and times" || fail "every verdict is recorded with its reviewer and times" "$(q "SELECT item, verdict, reviewer, shown_ms, decided_ms FROM eval_items WHERE batch_id = '$BATCH'")"
api POST "/api/v1/evals/reviews/$BATCH/items/$first" '{"verdict": "reject"}'
[ "$CODE" = 409 ] && pass "a verdict is given once (409 for a second)" || fail "a verdict is given once (409 for a second)" "$CODE $BODY"

# --- the report's figures ---------------------------------------------------------------
rep="$(ev report "$A" --json)"
A_MS=$((400 + 200 + 300 + CLIPPED))
python3 - "$rep" "$A_MS" <<'PY' && pass "eval report --json: accepted 3 of 4 in (900 + clipped) ms: accepted per reviewer minute = 3 / minutes, cost per accepted = cost / 3" || fail "eval report --json: the review figures" "$(echo "$rep" | jq -c .review)"
import json, sys
r = json.loads(sys.argv[1]); ms = int(sys.argv[2]); v = r["review"]
assert v["reviewed"] == 4 and v["accepted"] == 3 and v["changes"] == 1 and v["rejected"] == 0, v
assert v["review_ms"] == ms, (v, ms)
assert abs(v["review_minutes"] - ms / 60000) < 1e-9, v
assert abs(v["accepted_per_reviewer_minute"] - 3 / (ms / 60000)) < 1e-6, v
assert abs(v["cost_per_accepted"] - r["cost"] / 3) < 1e-12, v
assert r["resolved"] == 4 and r["runs"] == 4
PY
cmp="$(ev report "$A" --compare "$B" --json)"
python3 - "$cmp" "$A_MS" <<'PY' && pass "eval report --compare --json: both runs' review figures and their difference (B: 1 accepted in 750 ms = 80 a minute)" || fail "eval report --compare --json: review figures" "$(echo "$cmp" | jq -c '{a: .a.review, b: .b.review, d: .difference}')"
import json, sys
c = json.loads(sys.argv[1]); ms = int(sys.argv[2])
b = c["b"]["review"]
assert b["reviewed"] == 2 and b["accepted"] == 1 and b["rejected"] == 1 and b["review_ms"] == 750, b
assert abs(b["accepted_per_reviewer_minute"] - 80.0) < 1e-9, b
assert abs(c["difference"]["accepted_per_reviewer_minute"] - (80.0 - 3 / (ms / 60000))) < 1e-6, c["difference"]
assert c["a"]["resolved"] == 4 and c["b"]["resolved"] == 2
PY
# the web UI's report (web/js/evalreport.js) says what the CLI's does
api GET "/api/v1/evals/$A"
echo "$BODY" >"$TEST_TMP/a.json"
echo "$rep" >"$TEST_TMP/a.report.json"
if command -v node >/dev/null 2>&1; then
	node --input-type=module -e '
import { readFileSync } from "node:fs";
const { buildReport } = await import(process.argv[1]);
const js = buildReport(JSON.parse(readFileSync(process.argv[2], "utf8")));
const c = JSON.parse(readFileSync(process.argv[3], "utf8"));
// the CLI prints reals to 10 significant digits
const near = (a, b) => (a === null && b === null) || Math.abs(a - b) <= 1e-8 * Math.max(1, Math.abs(b));
for (const k of ["runs", "resolved", "resolve_rate", "cost", "wall_ms", "cost_per_resolved", "time_per_resolved_ms"])
  if (!near(js[k], c[k])) throw new Error(`${k}: page ${js[k]}, cli ${c[k]}`);
for (const k of ["reviewed", "accepted", "review_minutes", "accepted_per_reviewer_minute", "cost_per_accepted"])
  if (!near(js.review[k], c.review[k])) throw new Error(`review.${k}: page ${js.review[k]}, cli ${c.review[k]}`);
for (const t of c.tasks) {
  const j = js.tasks.find((x) => x.name === t.name);
  if (!j || j.resolved !== t.resolved || j.runs !== t.runs) throw new Error(`task ${t.name}`);
}' "$ROOT_DIR/web/js/evalreport.js" "$TEST_TMP/a.json" "$TEST_TMP/a.report.json" 2>"$TEST_TMP/node.err" &&
		pass "the web UI computes the report the CLI prints (totals, per task, review figures)" ||
		fail "the web UI computes the report the CLI prints" "$(head -c 300 "$TEST_TMP/node.err")"
fi
txt="$(ev report "$A" --compare "$B")"
echo "$txt" >"$OUT/report-compare.txt"
echo "$txt" | grep -q '3 accepted of 4 reviewed' && echo "$txt" | grep -q '1 accepted of 2 reviewed .* 80.00 accepted per reviewer minute' &&
	echo "$txt" | grep -q 'accepted per reviewer minute [+-]' &&
	echo "$txt" | grep -Eq '^resolved +4 of 4 +2 of 4' && echo "$txt" | grep -Eq '^time per resolved task +[0-9.]+s +[0-9.]+s' &&
	echo "$txt" | grep -Eq '^accepted per reviewer minute +[0-9.]+ +80\.00' &&
	pass "eval report --compare as text: resolved, cost, time and accepted changes per reviewer minute side by side" ||
	fail "eval report --compare as text" "$(echo "$txt" | head -14)"

# --- bad input: 400 with the reason; roles ---------------------------------------------------
bad() { # NAME METHOD PATH BODY WANT-CODE WANT-TEXT
	api "$2" "$3" "$4"
	[ "$CODE" = "$5" ] && echo "$BODY" | grep -q -- "$6" && pass "$1" || fail "$1" "$CODE $BODY"
}
second="$(echo "$ITEMS" | sed -n 2p)"
bad "a verdict other than merge|changes|reject: 400" POST "/api/v1/evals/reviews/$BATCH/items/$second" '{"verdict": "maybe"}' 400 'merge'
bad "a negative review time: 400" POST "/api/v1/evals/reviews/$BATCH/items/$second" '{"verdict": "merge", "review_ms": -5}' 400 'review_ms'
bad "an unknown key in a verdict: 400" POST "/api/v1/evals/reviews/$BATCH/items/$second" '{"verdict": "merge", "agent": "x"}' 400 'agent'
bad "a batch of no runs: 400" POST /api/v1/evals/reviews '{"runs": []}' 400 'runs'
bad "a batch of a malformed run id: 400" POST /api/v1/evals/reviews '{"runs": ["../x"]}' 400 'runs\[0\]'
bad "a batch of an unknown run: 404" POST /api/v1/evals/reviews '{"runs": ["e-nope"]}' 404 'no eval run'
bad "a run whose body names another id: 400" PUT "/api/v1/evals/e-x1" '{"id": "e-y1"}' 400 'id'
bad "a run whose repeat is not a number: 400" PUT "/api/v1/evals/e-x1" '{"repeat": "3"}' 400 'repeat'
bad "an attempt whose path is not its task.repeat: 400" PUT "/api/v1/evals/$A/attempts/note.9" '{"task": "note", "repeat": 1}' 400 'TASK.REPEAT'
bad "an attempt without task and repeat: 400" PUT "/api/v1/evals/$A/attempts/note.1" '{"resolved": true}' 400 'task'
bad "an attempt of an unknown run: 404" PUT "/api/v1/evals/e-nope/attempts/note.1" '{"task": "note", "repeat": 1}' 404 'no eval run'
bad "malformed JSON: 400" PUT "/api/v1/evals/e-x1" '{"repeat": ' 400 'malformed JSON'
bad "an unknown item: 404" GET "/api/v1/evals/reviews/$BATCH/items/i-0000000000000000" '' 404 'no review item'
api POST /api/v1/tokens '{"user": "sam", "role": "submitter"}'
SUB="$(jget .token)"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SUB" "$URL/api/v1/evals/reviews/$BATCH")"
code2="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SUB" "$URL/api/v1/evals")"
[ "$code" = 403 ] && [ "$code2" = 403 ] && pass "a submitter may not read evals or review (403)" || fail "a submitter may not read evals or review (403)" "$code $code2"

# --- a server that will not take the run: a note in the log, the run goes on ---------------
# a proxy in front of the server that answers 404 for every /api/v1/evals route, as
# a server from before them would
cat >"$TEST_TMP/proxy.py" <<'PY'
import http.server, sys, urllib.error, urllib.request
UP = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def answer(self, code, ctype, data):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if self.path.startswith("/api/v1/evals"):
            return self.answer(404, "application/json", b'{"error": {"code": "not_found", "message": "no such route"}}')
        keep = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type", "accept")}
        req = urllib.request.Request(UP + self.path, data=body, method=self.command, headers=keep)
        try:
            r = urllib.request.urlopen(req, timeout=60)
            self.answer(r.status, r.headers.get("Content-Type", ""), r.read())
        except urllib.error.HTTPError as e:
            self.answer(e.code, e.headers.get("Content-Type", ""), e.read())
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$TEST_TMP/proxy.py" "$URL" >"$TEST_TMP/proxy.port" 2>"$TEST_TMP/proxy.err" &
PROXY_PID=$!
trap 'kill "$PROXY_PID" 2>/dev/null; server_stop; rm -rf "$TEST_TMP"' EXIT
for _ in $(seq 1 50); do [ -s "$TEST_TMP/proxy.port" ] && break; sleep 0.1; done
PURL="http://127.0.0.1:$(cat "$TEST_TMP/proxy.port")"
out="$("$WARREN" eval run "$S" --agent 'echo x >NOTE.txt' --repeat 1 --wait --json --dir "$RUNS" --server "$PURL" --token "$TOKEN" 2>"$TEST_TMP/c.err")"
rc=$?
C="$(echo "$out" | jq -r .id)"
api GET "/api/v1/evals/$C"
[ $rc = 0 ] && [ "$(echo "$out" | jq .resolved)" = 1 ] && [ "$CODE" = 404 ] &&
	grep -q '^\[eval\] publish the run: .*HTTP 404' "$RUNS/$C/log" && grep -q '^\[eval\] publishing stops' "$RUNS/$C/log" &&
	[ "$(grep -c '^\[eval\] publish ' "$RUNS/$C/log")" = 1 ] &&
	pass "a server that refuses the run: a note in the run's log (once), the run resolves as before" ||
	fail "a server that refuses the run: a note in the run's log (once), the run resolves as before" "rc=$rc code=$CODE $(cat "$RUNS/$C/log" 2>/dev/null | head -3) $(tail -2 "$TEST_TMP/c.err")"
kill "$PROXY_PID" 2>/dev/null
wait "$PROXY_PID" 2>/dev/null
# resumed against the server itself, what was written goes up
out="$(ev run --resume "$C" --wait --json 2>/dev/null)"
api GET "/api/v1/evals/$C"
[ "$CODE" = 200 ] && [ "$(jget '.attempts | length')" = 2 ] && [ "$(jget .run.state)" = finished ] &&
	pass "eval run --resume publishes the run and the attempts written before" ||
	fail "eval run --resume publishes the run and the attempts written before" "$CODE $(echo "$BODY" | head -c 300)"

# --- the web UI in Chromium -----------------------------------------------------------------
api POST /api/v1/evals/reviews "{\"runs\": [\"$B\"]}"
WEB_BATCH="$(jget .id)"
BROWSER_DIR="$ROOT_DIR/tests/browser"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
want="$(jq -r '.dependencies["playwright-core"]' "$BROWSER_DIR/package.json")"
have="$(jq -r .version "$BROWSER_DIR/node_modules/playwright-core/package.json" 2>/dev/null)"
if [ "$have" != "$want" ] && command -v npm >/dev/null 2>&1; then
	(cd "$BROWSER_DIR" && npm ci --no-audit --no-fund --loglevel=error) >"$TEST_TMP/npm.log" 2>&1
	have="$(jq -r .version "$BROWSER_DIR/node_modules/playwright-core/package.json" 2>/dev/null)"
fi
if ! command -v node >/dev/null 2>&1 || [ ! -x "$CHROMIUM" ] || [ "$have" != "$want" ]; then
	fail "the browser check can run" "node, $CHROMIUM and playwright-core $want are needed ('make check' as root installs them)"
else
	mkdir -p "$TEST_TMP/home"
	(cd "$BROWSER_DIR" && HOME="$TEST_TMP/home" TMPDIR="$TEST_TMP" WARREN_URL="$URL" TOKEN="$TOKEN" RUN_A="$A" RUN_B="$B" \
		BATCH="$WEB_BATCH" OUT_DIR="$OUT" CHROMIUM="$CHROMIUM" timeout -k 10 150 node evals.test.mjs) >"$TEST_TMP/browser.out" 2>"$TEST_TMP/browser.err"
	rc=$?
	sed -n -E 's/^(PASS|FAIL) /\1 browser: /p' "$TEST_TMP/browser.out" | sed "s/^\(PASS\|FAIL\) /\1 $TEST_FILE: /" >>"$WARREN_RESULTS"
	[ "$rc" = 0 ] || grep -q '^FAIL ' "$TEST_TMP/browser.out" || fail "the browser check runs to the end" "exit $rc: $(tail -3 "$TEST_TMP/browser.err" | tr '\n' ' ')"
	n="$(q "SELECT COUNT(*) FROM eval_items WHERE batch_id = '$WEB_BATCH' AND verdict = 'merge' AND review_ms > 0")"
	[ "$n" -ge 1 ] && pass "the click's verdict is in the store, with the page's review time" || fail "the click's verdict is in the store, with the page's review time" "$(q "SELECT item, verdict, review_ms FROM eval_items WHERE batch_id = '$WEB_BATCH'")"
	left="$(pgrep -f -- "$TEST_TMP/home\|$TEST_TMP/playwright" 2>/dev/null)"
	[ -z "$left" ] && pass "the browser is closed" || { fail "the browser is closed" "$left"; kill -9 $left 2>/dev/null; }
fi

ids="$(q "SELECT id FROM sessions")"
server_stop
stale=""
for s in $ids; do "$WARREN" sandbox ls --all 2>/dev/null | grep -q "ws-$s" && stale="$stale $s"; done
[ -z "$stale" ] && pass "no sandbox left" || fail "no sandbox left" "$stale"
