#!/bin/sh
# hidden test of c-default-name: $1 is the built binary
set -e
test "$(env -u HELLO_GREETING "$1")" = "hello, there!"
test "$(env -u HELLO_GREETING "$1" ada)" = "hello, ada!"
