#!/bin/sh
# hidden test of c-help: $1 is the built binary
set -e
"$1" --help | grep -q "^usage: hello"
