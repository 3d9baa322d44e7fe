#!/bin/sh
# fetch-agent-packages.sh DIR - the agent presets' npm tarballs, for the
# tests (tests/integration/agents_layer.sh serves them from loopback with
# tests/tools/npm_registry.py --tarballs DIR).
#
# A dependency step, like apt-get: `make test-deps` and .ci/run call it
# before the tests; the tests themselves never reach the registry. Each
# preset's package at its pinned version (docs/agents-cli-notes.md) and
# its linux-x64 platform packages, as `npm pack` downloads them (byte for
# byte the registry's tarball); a file already in DIR is kept. Prints what
# it fetched. ~600 MB in all.
set -eu
DIR="${1:?usage: fetch-agent-packages.sh DIR}"
REGISTRY="${WARREN_NPM_REGISTRY:-https://registry.npmjs.org/}"
# spec, then the platform packages npm installs on linux-x64 glibc (the
# wrappers' optionalDependencies: `npm view SPEC optionalDependencies`)
PACKAGES="
opencode-ai@1.18.33
opencode-linux-x64@1.18.33
opencode-linux-x64-baseline@1.18.33
@openai/codex@0.171.0
@openai/codex@0.171.0-linux-x64
@anthropic-ai/claude-code@2.1.332
@anthropic-ai/claude-code-linux-x64@2.1.332
"
if ! command -v npm >/dev/null 2>&1; then
	echo "fetch-agent-packages: npm is missing (make test-deps installs it)" >&2
	exit 1
fi
mkdir -p "$DIR"
fetched=0
kept=0
for spec in $PACKAGES; do
	# npm pack's file name: "@scope/name@ver" -> "scope-name-ver.tgz"
	name="${spec%@*}"
	ver="${spec##*@}"
	file="$(echo "$name" | sed 's,^@,,; s,/,-,')-$ver.tgz"
	if [ -s "$DIR/$file" ]; then
		kept=$((kept + 1))
		continue
	fi
	tmp="$(mktemp -d "$DIR/.fetch.XXXXXX")"
	if ! (cd "$tmp" && npm pack --silent --registry "$REGISTRY" \
		--pack-destination "$tmp" "$spec" >/dev/null); then
		rm -rf "$tmp"
		echo "fetch-agent-packages: npm pack $spec failed" >&2
		exit 1
	fi
	mv "$tmp/$file" "$DIR/$file"
	rm -rf "$tmp"
	echo "fetched $spec -> $DIR/$file ($(du -h "$DIR/$file" | cut -f1))"
	fetched=$((fetched + 1))
done
echo "agent packages in $DIR: $fetched fetched, $kept already there"
