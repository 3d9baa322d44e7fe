#!/bin/sh
# hidden test of c-version: $1 is the built binary
set -e
test "$("$1" --version)" = "hello 1.0"
