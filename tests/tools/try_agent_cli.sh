#!/bin/bash
# try_agent_cli.sh PRESET [CACHE_DIR] - a real coding-agent CLI, offline,
# against model_server.py.
#
# PRESET is opencode, codex or claude-code. Without Warren: installs the
# pinned CLI from the npm registry into CACHE_DIR/PRESET-VERSION (default
# CACHE_DIR: ${XDG_CACHE_HOME:-~/.cache}/warren-agents; skipped when there),
# copies tests/fixtures/agents-app into a fresh git work tree, writes the
# CLI's configuration into a fresh HOME and runs two turns headless, the
# second a follow-up of the first, in a network namespace of their own with
# only loopback (as a Warren sandbox has), where model_server.py plays
# tests/fixtures/agents/PRESET.json with a required key and dns_log.py
# answers and logs every name the CLI looks up. Then it checks that
#
#   - the CLI edited greet.sh as the recording says and `make check` passes;
#   - every model request carried the key, and none was refused;
#   - the recording was played whole, in order, each step once;
#   - the usage the CLI reports for each turn is what the stand-in served;
#   - the follow-up continued the same conversation (same session id, and
#     its request carries the first turn's prompt);
#   - the CLI looked up no host name (no telemetry, update check, catalog
#     or plugin download tried).
#
# Prints one PASS/FAIL line per check and "N passed, N failed"; exits 1 on a
# failure. Needs root (unshare, mount), npm (for the install only), python3.
# TRY_AGENT_KEEP=1 keeps the work directory (its path is printed): HOME, the
# work tree, the CLI's output per turn (turn1.out, turn2.out), model.log,
# dns.log.
set -u

ROOT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS="$ROOT_DIR/tests/tools"
KEY="sk-warren-try-0123456789"

# ---- the presets: package, version, the native binary in the install ----
preset_info() {
	case "$1" in
	opencode)
		PKG=opencode-ai VERSION=1.18.33
		# the AVX2 build; opencode-linux-x64-baseline/bin/opencode
		# for CPUs without AVX2 (the wrapper's postinstall picks)
		BIN=node_modules/opencode-linux-x64/bin/opencode
		if ! grep -qw avx2 /proc/cpuinfo; then
			BIN=node_modules/opencode-linux-x64-baseline/bin/opencode
		fi ;;
	codex)
		PKG=@openai/codex VERSION=0.171.0
		BIN=node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex ;;
	claude-code)
		PKG=@anthropic-ai/claude-code VERSION=2.1.332
		BIN=node_modules/@anthropic-ai/claude-code-linux-x64/claude ;;
	*)
		echo "try_agent_cli.sh: unknown preset '$1' (opencode, codex, claude-code)" >&2
		exit 2 ;;
	esac
}

# ---- the configuration each CLI gets, in a fresh HOME --------------------
# write_config PRESET HOME PORT
write_config() {
	local home="$1/home" port="$2"
	mkdir -p "$home"
	case "$PRESET" in
	opencode)
		mkdir -p "$home/.config/opencode/node_modules"
		cat >"$home/.config/opencode/opencode.json" <<-EOF
		{
		  "\$schema": "https://opencode.ai/config.json",
		  "model": "warren/stand-in",
		  "small_model": "warren/stand-in",
		  "autoupdate": false,
		  "share": "disabled",
		  "permission": {"*": "allow", "external_directory": "allow", "doom_loop": "allow"},
		  "provider": {
		    "warren": {
		      "npm": "@ai-sdk/openai-compatible",
		      "name": "Warren model gateway",
		      "options": {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"},
		      "models": {"stand-in": {"name": "stand-in", "tool_call": true,
		                              "limit": {"context": 200000, "output": 32000}}}
		    }
		  }
		}
		EOF
		# opencode installs @opencode-ai/plugin from the npm registry
		# into each config directory unless its package.json and
		# package-lock.json already name it and node_modules exists
		echo '{"dependencies": {"@opencode-ai/plugin": "'"$VERSION"'"}}' \
			>"$home/.config/opencode/package.json"
		echo '{"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "'"$VERSION"'"}}}}' \
			>"$home/.config/opencode/package-lock.json" ;;
	codex)
		mkdir -p "$home/.codex"
		cat >"$home/.codex/config.toml" <<-EOF
		model = "gpt-5.5"
		model_provider = "warren"
		approval_policy = "never"
		sandbox_mode = "danger-full-access"
		check_for_update_on_startup = false
		web_search = "disabled"

		[model_providers.warren]
		name = "Warren model gateway"
		base_url = "http://127.0.0.1:$port/v1"
		env_key = "OPENAI_API_KEY"
		wire_api = "responses"

		[analytics]
		enabled = false

		[features]
		plugins = false
		unbounded_connection_retries = false
		EOF
		;;
	claude-code) ;; # nothing: its environment says it all
	esac
}

# run_turn TURN: the CLI's command line for turn TURN (1, or 2: continue
# the conversation), in the work tree, with only the environment it needs;
# the prompt on stdin, its output in $WORK/turnN.out.
run_turn() {
	local turn="$1" bin="$INSTALL/$BIN"
	local -a env=(env -i "PATH=/usr/local/bin:/usr/bin:/bin" "HOME=$WORK/home"
		"LANG=C.UTF-8" "TERM=dumb" "USER=root")
	local -a cmd
	case "$PRESET" in
	opencode)
		env+=("OPENAI_BASE_URL=http://127.0.0.1:$PORT/v1" "OPENAI_API_KEY=$KEY"
			OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1
			OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_SHARE=1)
		cmd=("$bin" run --format json --auto)
		[ "$turn" = 1 ] || cmd+=(--continue) ;;
	codex)
		env+=("CODEX_HOME=$WORK/home/.codex" "OPENAI_API_KEY=$KEY")
		cmd=("$bin" exec)
		[ "$turn" = 1 ] || cmd+=(resume --last)
		cmd+=(--json --strict-config --skip-git-repo-check
			--dangerously-bypass-approvals-and-sandbox -) ;;
	claude-code)
		env+=("ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT"
			"ANTHROPIC_AUTH_TOKEN=$KEY" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
			DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 CLAUDE_CODE_MAX_RETRIES=4)
		cmd=("$bin" -p --output-format stream-json --verbose
			--dangerously-skip-permissions)
		[ "$turn" = 1 ] || cmd+=(--continue) ;;
	esac
	(cd "$WORK/workspace" && timeout 300 "${env[@]}" "${cmd[@]}" \
		<"$WORK/prompt$turn" >"$WORK/turn$turn.out" 2>"$WORK/turn$turn.err")
	echo "$?" >"$WORK/turn$turn.status"
	wc -l <"$WORK/model.log" >"$WORK/turn$turn.requests" 2>/dev/null || echo 0 >"$WORK/turn$turn.requests"
}

# ---- inside the network namespace ----------------------------------------
inside() {
	ip link set lo up || exit 1
	echo "nameserver 127.0.0.1" >"$WORK/resolv.conf"
	mount --bind "$WORK/resolv.conf" /etc/resolv.conf || exit 1
	: >"$WORK/dns.log"
	python3 "$TOOLS/dns_log.py" --log "$WORK/dns.log" 2>"$WORK/dns.err" &
	local dns_pid=$!
	python3 "$TOOLS/model_server.py" --port 0 --recording "$RECORDING" \
		--log "$WORK/model.log" --require-key "$KEY" \
		--var "WORKSPACE=$WORK/workspace" >"$WORK/model.port" 2>"$WORK/model.err" &
	local model_pid=$!
	for _ in $(seq 1 100); do [ -s "$WORK/model.port" ] && break; sleep 0.05; done
	PORT="$(head -1 "$WORK/model.port")"
	: >"$WORK/model.log"
	write_config "$WORK" "$PORT"
	run_turn 1
	run_turn 2
	kill "$model_pid" "$dns_pid" 2>/dev/null
	wait 2>/dev/null
}

if [ "${1:-}" = "--inside" ]; then
	PRESET="$2" WORK="$3" INSTALL="$4" RECORDING="$5"
	preset_info "$PRESET"
	inside
	exit 0
fi

# ---- on the host -----------------------------------------------------------
[ $# -ge 1 ] || { echo "usage: try_agent_cli.sh opencode|codex|claude-code [CACHE_DIR]" >&2; exit 2; }
PRESET="$1"
preset_info "$PRESET"
CACHE="${2:-${XDG_CACHE_HOME:-$HOME/.cache}/warren-agents}"
INSTALL="$CACHE/$PRESET-$VERSION"
RECORDING="$ROOT_DIR/tests/fixtures/agents/$PRESET.json"
[ "$(id -u)" = 0 ] || { echo "try_agent_cli.sh: needs root (a network namespace)" >&2; exit 2; }

if [ ! -x "$INSTALL/$BIN" ]; then
	# into a new directory, renamed when complete: a cut install is not
	# taken for one. --ignore-scripts: the wrappers' postinstall only
	# copies the platform binary over a stub; BIN is that binary.
	mkdir -p "$CACHE"
	tmp="$(mktemp -d "$CACHE/.install-$PRESET.XXXXXX")"
	start=$(date +%s)
	if ! npm install --prefix "$tmp" --ignore-scripts --no-audit --no-fund \
		--loglevel=error "$PKG@$VERSION" >"$tmp.log" 2>&1; then
		echo "try_agent_cli.sh: npm install $PKG@$VERSION failed:" >&2
		cat "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		exit 1
	fi
	rm -rf "$INSTALL"
	mv "$tmp" "$INSTALL"
	rm -f "$tmp.log"
	echo "installed $PKG@$VERSION in $INSTALL ($(du -sh "$INSTALL" | cut -f1), $(($(date +%s) - start)) s)"
fi

# outside /tmp: codex will not put its helper links under a temporary dir
WORK="$(mktemp -d /var/tmp/try-agent-"$PRESET".XXXXXX)"
cp -r "$ROOT_DIR/tests/fixtures/agents-app" "$WORK/workspace"
git -C "$WORK/workspace" init -q -b main
git -C "$WORK/workspace" -c user.name=warren -c user.email=warren@localhost \
	add -A
git -C "$WORK/workspace" -c user.name=warren -c user.email=warren@localhost \
	commit -q -m "agents-app"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
for i, p in enumerate(d["prompts"], 1):
    open("%s/prompt%d" % (sys.argv[2], i), "w").write(p + "\n")' "$RECORDING" "$WORK"

unshare --net --mount "$BASH" "$0" --inside "$PRESET" "$WORK" "$INSTALL" "$RECORDING"

python3 - "$PRESET" "$WORK" "$RECORDING" "$KEY" <<'EOF'
import json, os, subprocess, sys

preset, work, recording, key = sys.argv[1:5]
passed = failed = 0


def check(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS %s: %s" % (preset, name))
    else:
        failed += 1
        print("FAIL %s: %s: %s" % (preset, name, why))


def read(path, default=""):
    try:
        with open(os.path.join(work, path), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return default


def jsonl(path):
    out = []
    for line in read(path).splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


entries = json.load(open(recording))["responses"]
log = jsonl("model.log")
ends = [int(read("turn1.requests", "0") or 0), int(read("turn2.requests", "0") or 0)]
turns = [log[:ends[0]], log[ends[0]:ends[1]]]

for t in (1, 2):
    status = read("turn%d.status" % t).strip()
    check("turn %d exits 0" % t, status == "0",
          "exit %s; stderr: %s" % (status, read("turn%d.err" % t)[-600:]))

ws = os.path.join(work, "workspace")
greet = read("workspace/greet.sh")
check("greet.sh edited", 'echo "Hello, ${1:-world}!"' in greet, greet[-200:])
r = subprocess.run(["make", "-s", "check"], cwd=ws, capture_output=True, text=True)
check("make check passes after the edit", r.returncode == 0, r.stdout[-300:])

model_calls = [x for x in log if x.get("format") in ("chat", "responses", "messages")]
check("the CLI called the model", len(model_calls) > 0, "no request")
bad = [x for x in log if x.get("authorization") != "Bearer " + key and x.get("x_api_key") != key]
check("every request carried the key", not bad and log,
      "; ".join("%s %s auth=%s x-api-key=%s" % (x["method"], x["path"], x.get("authorization"), x.get("x_api_key")) for x in bad[:3]))
refused = [x for x in log if x.get("status") not in (200,)]
check("no request refused or unmatched", not refused,
      "; ".join("%s %s -> %s (entry %s)" % (x["method"], x["path"], x["status"], x["entry"]) for x in refused[:3]))
main = [i for i, e in enumerate(entries) if not e.get("repeat")]
played = [x["entry"] for x in model_calls if x.get("entry") is not None and not entries[x["entry"]].get("repeat")]
check("the recording played whole, in order, once each", played == main,
      "played %s, want %s" % (played, main))

# usage: what the stand-in served per turn (its main entries), as each CLI
# counts it


def served(records):
    s = {"prompt": 0, "completion": 0, "cached": 0}
    for x in records:
        i = x.get("entry")
        if i is None or entries[i].get("repeat"):
            continue
        u = entries[i].get("usage") or {}
        s["prompt"] += u.get("prompt_tokens", 0)
        s["completion"] += u.get("completion_tokens", 0)
        s["cached"] += u.get("cached_tokens", 0)
    return s


def reported(t):
    out = jsonl("turn%d.out" % t)
    if preset == "claude-code":
        res = [e for e in out if e.get("type") == "result"]
        if not res:
            return None, None
        u = res[-1].get("usage") or {}
        return ({"prompt": u.get("input_tokens", 0) + u.get("cache_read_input_tokens", 0)
                 + u.get("cache_creation_input_tokens", 0),
                 "completion": u.get("output_tokens", 0),
                 "cached": u.get("cache_read_input_tokens", 0)},
                res[-1].get("result"))
    if preset == "codex":
        done = [e for e in out if e.get("type") == "turn.completed"]
        msgs = [e["item"]["text"] for e in out if e.get("type") == "item.completed"
                and e.get("item", {}).get("type") == "agent_message"]
        if not done:
            return None, None
        u = done[-1].get("usage") or {}
        return ({"prompt": u.get("input_tokens", 0), "completion": u.get("output_tokens", 0),
                 "cached": u.get("cached_input_tokens", 0)}, msgs[-1] if msgs else None)
    # opencode: one step_finish per model call, input without the cached
    s = {"prompt": 0, "completion": 0, "cached": 0}
    texts = []
    for e in out:
        part = e.get("part") or {}
        if e.get("type") == "step_finish":
            tk = part.get("tokens") or {}
            cache = tk.get("cache") or {}
            s["prompt"] += tk.get("input", 0) + cache.get("read", 0) + cache.get("write", 0)
            s["completion"] += tk.get("output", 0)
            s["cached"] += cache.get("read", 0)
        elif e.get("type") == "text":
            texts.append(part.get("text"))
    return s, texts[-1] if texts else None


for t in (1, 2):
    want = served(turns[t - 1])
    if preset == "codex" and t == 2:
        # codex exec resume reports the thread's total, earlier turns too
        first = served(turns[0])
        want = {k: want[k] + first[k] for k in want}
    got, text = reported(t)
    check("turn %d usage reported as served" % t, got == want, "got %s, want %s" % (got, want))
    final = [entries[x["entry"]].get("text") for x in turns[t - 1]
             if x.get("entry") is not None and not entries[x["entry"]].get("repeat")]
    check("turn %d ends with the recorded answer" % t, final and text == final[-1],
          "got %r, want %r" % (text, final[-1] if final else None))

# the follow-up continued the conversation


def session_ids(t):
    ids = set()
    for e in jsonl("turn%d.out" % t):
        for k in ("session_id", "sessionID", "thread_id"):
            if isinstance(e.get(k), str):
                ids.add(e[k])
    return ids


s1, s2 = session_ids(1), session_ids(2)
check("the follow-up is the same session", s1 and s1 == s2, "turn 1 %s, turn 2 %s" % (s1, s2))
prompt1 = read("prompt1").strip()
t2 = [x for x in turns[1] if x.get("format") in ("chat", "responses", "messages")
      and x.get("entry") is not None and not entries[x["entry"]].get("repeat")]
check("the follow-up request carries turn 1", t2 and prompt1 in json.dumps(t2[0]["body"], ensure_ascii=False),
      "no turn-2 request" if not t2 else "turn 1's prompt not in it")

names = sorted(set(l.split()[0] for l in read("dns.log").splitlines() if l.strip()))
check("no host name looked up", not names, " ".join(names))

# what the CLI left in the work tree's git (informational)
refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)"], cwd=ws,
                      capture_output=True, text=True).stdout.split()
extra = [r for r in refs if r != "refs/heads/main"]
print("note %s: git refs besides main: %s" % (preset, " ".join(extra) or "none"))
st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ws,
                    capture_output=True, text=True).stdout.strip()
print("note %s: git status: %s" % (preset, st.replace("\n", "; ") or "clean"))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
EOF
rc=$?
if [ "${TRY_AGENT_KEEP:-}" = 1 ] || [ $rc != 0 ]; then
	echo "work directory kept: $WORK"
else
	rm -rf "$WORK"
fi
exit $rc
