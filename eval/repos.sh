#!/bin/sh
# eval/repos.sh DIR - the sample suite's repositories (eval/sample): each
# fixture project of tests/fixtures it uses, as a git repository DIR/NAME
# with one commit made with a fixed author, committer and date, so its id
# is the "base" the tasks name. Register them with the server under
# their names (docs/eval.md, "Running the sample suite").
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$1"
mkdir -p "$dir"
for name in c-hello cmake-hello; do
	rm -rf "${dir:?}/$name"
	cp -r "$root/tests/fixtures/$name" "$dir/$name"
	(
		cd "$dir/$name"
		export GIT_AUTHOR_NAME=warren-eval GIT_AUTHOR_EMAIL=eval@warren.test \
			GIT_COMMITTER_NAME=warren-eval GIT_COMMITTER_EMAIL=eval@warren.test \
			GIT_AUTHOR_DATE=2025-01-01T00:00:00Z GIT_COMMITTER_DATE=2025-01-01T00:00:00Z
		git init -q -b main
		git add -A
		git -c commit.gpgsign=false commit -q -m "$name, as the sample suite freezes it"
		echo "$name $(git rev-parse HEAD)"
	)
done
