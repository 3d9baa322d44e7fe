#!/bin/sh
# hidden test of c-empty-name: $1 is the built binary
set -e
set +e
out="$("$1" "")"
test $? = 2 && test -z "$out"
