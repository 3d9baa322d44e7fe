#!/bin/bash
# bench/snapshot.sh - what a snapshot buys: a session started from a
# prepared snapshot against one built from nothing, on the two test fixtures
# (tests/fixtures/c-hello: configure + make; tests/fixtures/pg-app: a
# PostgreSQL service) and a TypeScript web service whose dependencies (86
# packages: express, lodash, typescript, ...) come from the public npm
# registry at snapshot time, through the build's egress proxy
# (bench/fixtures/node-ts; skipped when registry.npmjs.org cannot be
# reached). docs/benchmarks.md, "Snapshots", has results.
#
#  1. cold: a fresh data directory each run: `snapshot build` (fetch, clone,
#     install, build, services) then a session start from it
#     (`sandbox create --snapshot ID`, until ready); COLD_RUNS runs.
#  2. warm, one commit of drift: the repository gets one new commit (a .c
#     file changed) after the snapshot was built, and the session starts with
#     `sandbox create --snapshot ID --ref main`, until ready (PostgreSQL
#     answering for pg-app); WARM_RUNS runs. Also warm without drift
#     (`create --snapshot ID`) and, for c-hello, `sandbox run --snapshot ID
#     -- true` (no drift, no services; target < 10 ms), once as the fixture
#     is (its postCreateCommand, `make test`, runs in every session) and
#     once from a branch without that hook (the restore alone).
#  3. the ratio cold / warm with drift (target >= 50x).
#  4. restore cost against snapshot size: `sandbox run --snapshot ID -- true`
#     over a snapshot holding 10 MiB and one holding 1 GiB (1 MiB files
#     written by onCreateCommand); WARM_RUNS runs each, alternating; ratio
#     (target <= 1.2: restore is O(1)). Skipped with < 5 GiB free. The
#     1 GiB build against its restore shows the ratio for a slow install.
#  5. refresh: `snapshot build` after one new commit with unchanged
#     lockfiles; the dependencies layer must be the same; COLD_RUNS runs.
#
# Times are wall clock around the warren process (a small python3 timer
# spawns it; its own start-up is outside the timed interval). "Until ready"
# for pg-app adds a probe, `sandbox exec NAME -- pg_isready -h 127.0.0.1`,
# repeated until it answers; the sandbox is removed outside the timing.
# Everything runs in one temp directory ($WARREN_HOME included), removed at
# exit with every sandbox the script created.
set -eu
BUILD="${BUILD:-build}"
COLD_RUNS="${COLD_RUNS:-5}"
WARM_RUNS="${WARM_RUNS:-20}"
cd "$(dirname "$0")/.."
ROOT="$PWD"
W="$ROOT/$BUILD/warren"
FIX="$ROOT/tests/fixtures"
PY=/usr/bin/python3

[ -x "$W" ] || { echo "bench: $W not found (run make)" >&2; exit 1; }
[ -x "$PY" ] || { echo "bench: $PY is needed for the timer" >&2; exit 1; }

work="$(mktemp -d /tmp/warren-snapbench.XXXXXX)"
export WARREN_HOME="$work/data"
SB="snapbench-$$"
cleanup() {
	# every sandbox this run created is named snapbench-PID-*
	"$W" sandbox ls 2>/dev/null | awk -v p="$SB-" 'index($1, p) == 1 {print $1}' |
		while read -r n; do "$W" sandbox rm "$n" >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

LOG="$work/log"
RES="$work/results" # "key value" lines, read by the summary
: >"$RES"
put() { echo "$1 $2" >>"$RES"; }
get() { awk -v k="$1" '$1==k {v=$2} END {print v}' "$RES"; }

# ---- the timer ---------------------------------------------------------------
cat >"$work/bt.py" <<'EOF'
import json, os, shutil, statistics, sys, time

def spawn(argv, out):
    path = shutil.which(argv[0]) or argv[0]
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    pid = os.posix_spawn(path, argv, os.environ, file_actions=fa)
    return os.waitpid(pid, 0)[1]

def run(args):
    # run [--repeat N] [--out FILE] [--ready NAME] -- CMD...
    # --ready NAME: then probe until PostgreSQL answers in sandbox NAME
    repeat, out, ready = 1, "/dev/null", None
    while args[0] != "--":
        opt, val = args[0], args[1]
        args = args[2:]
        if opt == "--repeat": repeat = int(val)
        elif opt == "--out": out = val
        elif opt == "--ready":
            ready = [os.environ["W"], "sandbox", "exec", val, "--",
                     os.environ["PGBIN"] + "/pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]
    cmd = args[1:]
    for _ in range(repeat):
        t0 = time.monotonic_ns()
        st = spawn(cmd, out)
        if st != 0:
            sys.exit(f"bench: {' '.join(cmd[:4])}... failed (status {st})")
        if ready:
            deadline = time.monotonic() + 60
            while spawn(ready, "/dev/null") != 0:
                if time.monotonic() > deadline:
                    sys.exit("bench: not ready after 60 s: " + " ".join(ready))
                time.sleep(0.001)
        print(f"{(time.monotonic_ns() - t0) / 1e6:.3f}")

def alt(args):
    # alt N OUT_A OUT_B -- A... :: B...: N runs of each, alternating (load
    # from elsewhere hits both alike); times appended to OUT_A, OUT_B
    n, outs, rest = int(args[0]), args[1:3], args[4:]
    k = rest.index("::")
    cmds = (rest[:k], rest[k + 1:])
    for _ in range(n):
        for cmd, out in zip(cmds, outs):
            t0 = time.monotonic_ns()
            st = spawn(cmd, "/dev/null")
            if st != 0:
                sys.exit(f"bench: {' '.join(cmd[:4])}... failed (status {st})")
            with open(out, "a") as f:
                print(f"{(time.monotonic_ns() - t0) / 1e6:.3f}", file=f)

def median(args):
    v = [float(x) for x in sys.stdin.read().split()]
    print(f"{statistics.median(v):.3f}" if v else "n/a")

def add(args):
    # add FILE FILE: line by line sums
    a, b = (open(p).read().split() for p in args)
    for x, y in zip(a, b):
        print(f"{float(x) + float(y):.3f}")

def load(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except ValueError:  # progress lines before the JSON: take the last object
        i = text.rfind("\n{")
        return json.loads(text[i + 1:] if i >= 0 else text)

def field(args):
    # field FILE KEY: the manifest's id, commit, deps / repo layer id, or a
    # timing phase ("t:install")
    j, k = load(args[0]), args[1]
    if k in ("deps", "repo"):
        print(next(l["id"] for l in j["layers"] if l.get("role") == k))
    elif k.startswith("t:"):
        print(next(t["ms"] for t in j["timings"] if t["phase"] == k[2:]))
    elif k == "session":
        print("yes" if isinstance(j.get("session"), dict) else "no")
    else:
        print(j[k])

def session(args):
    # session FILES...: medians of the session fields of create --json
    js = [load(p) for p in args]
    ss = [j.get("session") or {} for j in js]
    def med(k, src=None):
        v = [s[k] for s in (src or ss) if isinstance(s.get(k), (int, float))]
        return f"{statistics.median(v):.1f}" if v else "n/a"
    behind = sorted({str(s.get("commits_behind")) for s in ss})
    rerun = sorted({json.dumps(s.get("hooks_rerun"), separators=(",", ":")) for s in ss})
    print(f"sandbox {med('start_ms', js)} ms, session {med('total_ms')} ms ="
          f" sync {med('sync_ms')} ms, hooks {med('hooks_ms')} ms, "
          f"services {med('services_ms')} ms + host side; commits_behind {','.join(behind)}; "
          f"hooks_rerun {' | '.join(rerun)}")

{"run": run, "alt": alt, "median": median, "add": add, "field": field, "session": session}[sys.argv[1]](sys.argv[2:])
EOF
bt() { "$PY" "$work/bt.py" "$@"; }
median() { bt median; }

# ---- fixtures as git repositories ----------------------------------------------
gitc() { git -C "$1" -c user.email=bench@warren -c user.name=bench "${@:2}"; }
git_repo() { # SRC DST: a repository with SRC's files as its first commit
	cp -a "$1" "$2"
	gitc "$2" init -q -b main
	gitc "$2" add -A
	gitc "$2" commit -q -m initial
}
# One commit of drift on top of commit $2: a changed .c file (greet.c in
# c-hello; drift.c, added for the purpose, in pg-app), never a lockfile.
drift() { # REPO BASE N
	gitc "$1" reset -q --hard "$2"
	if [ -f "$1/src/greet.c" ]; then
		sed -i "1i /* drift $3 */" "$1/src/greet.c"
	elif [ -f "$1/src/app.ts" ]; then
		sed -i "1i // drift $3" "$1/src/app.ts"
	else
		echo "const char *drift = \"$3\";" >"$1/drift.c"
	fi
	gitc "$1" commit -q -am "drift $3"
}

PGBIN="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -1)"
FIXTURES="c-hello"
if [ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ]; then
	FIXTURES="c-hello pg-app"
else
	echo "bench: PostgreSQL is not installed: pg-app skipped (apt-get install postgresql)"
fi
if curl -s -o /dev/null --max-time 10 https://registry.npmjs.org/express && command -v npm >/dev/null; then
	FIXTURES="$FIXTURES node-ts"
else
	echo "bench: registry.npmjs.org cannot be reached (or npm is missing): node-ts skipped"
fi
# ONLY="node-ts": those fixtures alone, and no restore-against-size part
[ -z "${ONLY:-}" ] || FIXTURES="$ONLY"
for f in $FIXTURES; do
	src="$FIX/$f"
	[ -d "$src" ] || src="$ROOT/bench/fixtures/$f"
	git_repo "$src" "$work/$f"
done
if [ -d "$work/pg-app" ]; then # pg-app has no .c file: one for the drift commits
	echo "const char *drift = \"0\";" >"$work/pg-app/drift.c"
	gitc "$work/pg-app" add drift.c
	gitc "$work/pg-app" commit -q -m "drift.c"
fi

# The session contract (sandbox create --ref, session hooks and services at
# create): detected, not assumed. A missing value for a known option is a
# usage error; an unknown option is another one.
if "$W" sandbox create --ref 2>&1 | grep -q "unknown option"; then
	SESSION=no
	echo "bench: this warren has no 'sandbox create --ref' (session support): drift and services rows are n/a"
else
	SESSION=yes
fi

# "ready": for pg-app, PostgreSQL answers on 127.0.0.1 (the fixture's port);
# the timer probes with `sandbox exec NAME -- $PGBIN/pg_isready` (the binary,
# not Debian's perl wrapper in /usr/bin)
export W PGBIN
ready_args() { # FIXTURE NAME
	[ "$1" = pg-app ] && echo "--ready $2"
	return 0
}
# Whether a session start from FIXTURE means anything with this warren:
# without session support, create starts no services.
startable() { [ "$1" = c-hello ] || [ "$SESSION" = yes ]; }

section() { # NAME FUNCTION ARGS...: runs it with set -e; a failure marks it
	local name="$1"
	shift
	set +e
	(set -e; "$@") 2>>"$LOG"
	local rc=$?
	set -e
	if [ $rc != 0 ]; then
		echo "   FAILED ($name); last lines of the log:"
		tail -5 "$LOG" | sed 's/^/     /'
		put "failed:$name" 1
	fi
}

echo "warren: $W   kernel: $(uname -r)   cpus: $(nproc)   session support: $SESSION"
echo "postgres: ${PGBIN:-none}   runs: cold $COLD_RUNS, warm $WARM_RUNS"

# ---- 1. cold -------------------------------------------------------------------
cold() { # FIXTURE
	local f="$1" i id tb ts
	: >"$work/cold-build.$f"
	: >"$work/cold-start.$f"
	for i in $(seq "$COLD_RUNS"); do
		ts=""
		export WARREN_HOME="$work/cold-$i"
		tb="$(bt run --out "$work/m.json" -- "$W" snapshot build --quiet --json "$work/$f")"
		echo "$tb" >>"$work/cold-build.$f"
		id="$(bt field "$work/m.json" id)"
		if startable "$f"; then
			# shellcheck disable=SC2046
			ts="$(bt run $(ready_args "$f" "$SB-c$i") -- "$W" sandbox create --name "$SB-c$i" --snapshot "$id")"
			echo "$ts" >>"$work/cold-start.$f"
			"$W" sandbox rm "$SB-c$i" >/dev/null
		fi
		rm -rf "$WARREN_HOME"
		printf '   run %d: build %s ms, start %s ms\n' "$i" "$tb" "${ts:-n/a}"
	done
	put "cold-build:$f" "$(median <"$work/cold-build.$f")"
	if startable "$f"; then
		put "cold-start:$f" "$(median <"$work/cold-start.$f")"
		bt add "$work/cold-build.$f" "$work/cold-start.$f" >"$work/cold-total.$f"
		put "cold:$f" "$(median <"$work/cold-total.$f")"
	fi
}

# ---- 2. warm -------------------------------------------------------------------
warm() { # FIXTURE
	local f="$1" r="$work/$1" id base i
	export WARREN_HOME="$work/data"
	base="$(git -C "$r" rev-parse HEAD)"
	id="$("$W" snapshot build --quiet "$r" | tail -1)"
	echo "$id" >"$work/id.$f"
	if startable "$f"; then
		echo "   no drift: create --snapshot ID, until ready, $WARM_RUNS runs"
		: >"$work/warm0.$f"
		for i in $(seq "$WARM_RUNS"); do
			# shellcheck disable=SC2046
			bt run --out "$work/w0.json" $(ready_args "$f" "$SB-w$i") -- \
				"$W" sandbox create --json --name "$SB-w$i" --snapshot "$id" >>"$work/warm0.$f"
			"$W" sandbox rm "$SB-w$i" >/dev/null
		done
		put "warm-nodrift:$f" "$(median <"$work/warm0.$f")"
	fi
	if [ "$SESSION" = yes ]; then
		echo "   one commit of drift: create --snapshot ID --ref main, until ready, $WARM_RUNS runs"
		: >"$work/warm.$f"
		for i in $(seq "$WARM_RUNS"); do
			drift "$r" "$base" "$i"
			# shellcheck disable=SC2046
			bt run --out "$work/w-$f-$i.json" $(ready_args "$f" "$SB-d$i") -- \
				"$W" sandbox create --json --name "$SB-d$i" --snapshot "$id" --ref main >>"$work/warm.$f"
			"$W" sandbox rm "$SB-d$i" >/dev/null
		done
		gitc "$r" reset -q --hard "$base"
		put "warm:$f" "$(median <"$work/warm.$f")"
		echo "   session (medians): $(bt session "$work"/w-"$f"-*.json)"
	fi
	if [ "$f" = c-hello ]; then
		# c-hello declares postCreateCommand (make test), which runs at
		# every session start, run included; the same repository with
		# that hook removed (branch bench-nohooks) measures the restore
		# alone
		gitc "$r" checkout -q -b bench-nohooks
		sed -i '/postCreateCommand/d' "$r/.devcontainer/devcontainer.json"
		gitc "$r" commit -q -am "no session hooks"
		gitc "$r" checkout -q main
		local id2
		id2="$("$W" snapshot build --quiet --ref bench-nohooks "$r" | tail -1)"
		echo "   no drift, no services: run --snapshot ID -- true, $WARM_RUNS runs each, alternating:"
		echo "   the fixture (postCreateCommand runs) and the fixture without postCreateCommand"
		bt alt "$WARM_RUNS" "$work/true-hooks.$f" "$work/true.$f" -- \
			"$W" sandbox run --snapshot "$id" -- true :: \
			"$W" sandbox run --snapshot "$id2" -- true
		put "run-true-hooks:$f" "$(median <"$work/true-hooks.$f")"
		put "run-true:$f" "$(median <"$work/true.$f")"
	fi
}

# ---- 4. restore against size ------------------------------------------------------
sized_repo() { # DIR MIB
	mkdir -p "$1"
	cat >"$1/warren.json" <<EOS
{ "onCreateCommand": "mkdir -p blob && i=0 && while [ \$i -lt $2 ]; do head -c 1048576 /dev/urandom > blob/f\$i; i=\$((i+1)); done" }
EOS
	echo "$2 MiB of 1 MiB files in blob/, written at snapshot time" >"$1/README"
	gitc "$1" init -q -b main
	gitc "$1" add -A
	gitc "$1" commit -q -m "$2 MiB"
}
sizes() {
	export WARREN_HOME="$work/sizes"
	local mib tb id i
	for mib in 10 1024; do
		sized_repo "$work/size-$mib" "$mib"
		tb="$(bt run --out "$work/s.json" -- "$W" snapshot build --quiet --json "$work/size-$mib")"
		id="$(bt field "$work/s.json" id)"
		echo "$id" >"$work/id.size-$mib"
		echo "   $mib MiB: built in $tb ms; in a sandbox: $("$W" sandbox run --snapshot "$id" -- du -sh /workspace/blob | cut -f1)"
		: >"$work/restore.$mib"
	done
	bt alt "$WARM_RUNS" "$work/restore.10" "$work/restore.1024" -- \
		"$W" sandbox run --snapshot "$(cat "$work/id.size-10")" -- true :: \
		"$W" sandbox run --snapshot "$(cat "$work/id.size-1024")" -- true
	put "restore:10" "$(median <"$work/restore.10")"
	put "restore:1024" "$(median <"$work/restore.1024")"
	put "build:1024" "$tb"
	rm -rf "$WARREN_HOME"
}

# ---- 5. refresh --------------------------------------------------------------------
refresh() { # FIXTURE
	local f="$1" r="$work/$1" base deps0 deps i same=yes
	export WARREN_HOME="$work/data"
	base="$(git -C "$r" rev-parse HEAD)"
	"$W" snapshot build --quiet --json "$r" >"$work/r0.json"
	deps0="$(bt field "$work/r0.json" deps)"
	: >"$work/refresh.$f"
	for i in $(seq "$COLD_RUNS"); do
		drift "$r" "$base" "r$i"
		bt run --out "$work/r.json" -- "$W" snapshot build --quiet --json "$r" >>"$work/refresh.$f"
		deps="$(bt field "$work/r.json" deps)"
		[ "$deps" = "$deps0" ] || same=no
		echo "   run $i: $(tail -1 "$work/refresh.$f") ms; deps ${deps:0:12} (install $(bt field "$work/r.json" t:install) ms), repo $(bt field "$work/r.json" repo | cut -c1-12)"
	done
	gitc "$r" reset -q --hard "$base"
	put "refresh:$f" "$(median <"$work/refresh.$f")"
	put "deps-same:$f" "$same"
	echo "   dependencies layer of the first build: ${deps0:0:12}; the same in every refresh: $same"
}

for f in $FIXTURES; do
	echo
	echo "== 1. cold, $f: fresh data directory, snapshot build + session start ($COLD_RUNS runs)"
	section "cold $f" cold "$f"
	echo
	echo "== 2. warm, $f: restore from the snapshot"
	section "warm $f" warm "$f"
done

echo
free_kb="$(df -Pk "$work" | awk 'NR==2 {print $4}')"
if [ -n "${ONLY:-}" ]; then
	echo "== 4. restore against size: skipped (ONLY=$ONLY)"
elif [ "$free_kb" -lt $((5 * 1024 * 1024)) ]; then
	echo "== 4. restore against size: skipped, $((free_kb / 1024)) MiB free on $(df -P "$work" | awk 'NR==2 {print $6}') (needs 5 GiB)"
else
	echo "== 4. restore against size: run --snapshot ID -- true, 10 MiB vs 1 GiB ($WARM_RUNS runs each, alternating)"
	section "sizes" sizes
fi

for f in $FIXTURES; do
	echo
	echo "== 5. refresh, $f: snapshot build after one new commit, lockfiles unchanged ($COLD_RUNS runs)"
	section "refresh $f" refresh "$f"
done

# ---- summary -------------------------------------------------------------------------
ratio() { # A B: A / B, or n/a
	if [ -n "$1" ] && [ -n "$2" ]; then
		"$PY" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"
	else
		echo n/a
	fi
}
or_na() { [ -n "$1" ] && echo "$1" || echo n/a; }

echo
echo "== summary: medians in ms (cold: $COLD_RUNS runs; warm, restore: $WARM_RUNS; refresh: $COLD_RUNS)"
printf '%-8s %11s %11s %11s %12s %11s %9s %11s %5s\n' fixture "cold build" "cold start" "cold total" "warm+drift" "warm" ratio refresh deps
for f in $FIXTURES; do
	printf '%-8s %11s %11s %11s %12s %11s %9s %11s %5s\n' "$f" \
		"$(or_na "$(get "cold-build:$f")")" "$(or_na "$(get "cold-start:$f")")" \
		"$(or_na "$(get "cold:$f")")" "$(or_na "$(get "warm:$f")")" \
		"$(or_na "$(get "warm-nodrift:$f")")" \
		"$(ratio "$(get "cold:$f")" "$(get "warm:$f")")" \
		"$(or_na "$(get "refresh:$f")")" "$(or_na "$(get "deps-same:$f")")"
done
echo "  (cold total = build + start; warm+drift = create --ref main, 1 commit behind; warm = create,"
echo "   no drift; ratio = cold total / warm+drift, target >= 50; deps = same dependencies layer on refresh)"
echo "c-hello run --snapshot ID -- true: $(or_na "$(get run-true:c-hello)") ms without session hooks (target < 10 ms);"
echo "   $(or_na "$(get run-true-hooks:c-hello)") ms with the fixture's postCreateCommand (make test)"
r10="$(get restore:10)" r1g="$(get restore:1024)"
echo "restore 10 MiB: $(or_na "$r10") ms   1 GiB: $(or_na "$r1g") ms   ratio: $(ratio "$r1g" "$r10")   (target <= 1.2)"
b1g="$(get build:1024)"
[ -z "$b1g" ] || echo "1 GiB snapshot: build $b1g ms against restore $r1g ms: $(ratio "$b1g" "$r1g")x"
if grep -q '^failed:' "$RES"; then
	echo "failed: $(grep '^failed:' "$RES" | cut -d' ' -f1 | cut -d: -f2- | paste -sd, -)"
	exit 1
fi
