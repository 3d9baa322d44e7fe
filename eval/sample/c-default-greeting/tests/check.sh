#!/bin/sh
# hidden test of c-default-greeting: $1 is the built binary
set -e
test "$(env -u HELLO_GREETING "$1")" = "hi, world!"
test "$(HELLO_GREETING=yo "$1" x)" = "yo, x!"
