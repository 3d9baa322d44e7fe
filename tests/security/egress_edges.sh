#!/bin/bash
# Egress allowlist edges at snapshot time: a spec whose egress or
# buildEgress names a public suffix (the Public Suffix List, through
# libpsl: "*.com", "co.uk", "github.io") fails `warren snapshot build`
# with the entry and the reason named (in the build log) before any hook
# runs; a domain
# below a public suffix ("user.github.io", "*.example.co.uk") builds.
# (The session side, CONNECT ports and Host rewriting: integration/egress.sh.)
. "$(dirname "$0")/../lib.sh"

# lib.sh made TEST_TMP and removes it at exit
export WARREN_HOME="$TEST_TMP/data"
RULES="$TEST_TMP/egress.json"
echo '{"self": "127.0.0.1:9"}' >"$RULES"

repo() { # DIR SPEC
	mkdir -p "$1"
	echo "$2" >"$1/warren.json"
	git -C "$1" init -q -b main
	git -C "$1" -c user.email=t@warren -c user.name=test add -A
	git -C "$1" -c user.email=t@warren -c user.name=test commit -q -m initial
}

n=0
for spec in '{"customizations": {"warren": {"buildEgress": ["registry.npmjs.org", "*.com"]}}, "onCreateCommand": "true"}|*.com|a wildcard over a public suffix' \
	'{"customizations": {"warren": {"egress": ["co.uk"]}}, "onCreateCommand": "true"}|co.uk|a public suffix' \
	'{"customizations": {"warren": {"buildEgress": ["github.io"]}}, "onCreateCommand": "true"}|github.io|a public suffix'; do
	n=$((n + 1))
	json="${spec%%|*}"
	rest="${spec#*|}"
	entry="${rest%%|*}"
	why="${rest#*|}"
	repo "$TEST_TMP/app$n" "$json"
	rm -f "$WARREN_HOME"/logs/build-*.log
	out="$("$WARREN" snapshot build --egress-config "$RULES" "$TEST_TMP/app$n" 2>&1)"
	rc=$?
	out="$out $(cat "$WARREN_HOME"/logs/build-*.log 2>/dev/null)"
	if [ $rc != 0 ] && echo "$out" | grep -qF -- "warren-egress: --allow '$entry': $why (the Public Suffix List)"; then
		pass "a spec naming the public suffix $entry: the build fails naming it"
	else
		fail "a spec naming the public suffix $entry: the build fails naming it" "rc=$rc $(echo "$out" | tail -4 | tr '\n' ' ')"
	fi
done

repo "$TEST_TMP/ok" '{"customizations": {"warren": {"buildEgress": ["user.github.io", "*.example.co.uk"]}}, "onCreateCommand": "true"}'
out="$("$WARREN" snapshot build --egress-config "$RULES" "$TEST_TMP/ok" 2>&1)"
rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "egress 2 hosts through the build's proxy" &&
	pass "names below a public suffix are entries (user.github.io, *.example.co.uk)" ||
	fail "names below a public suffix are entries (user.github.io, *.example.co.uk)" "rc=$rc $(echo "$out" | tail -4 | tr '\n' ' ')"
