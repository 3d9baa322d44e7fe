#!/bin/sh
# hidden test of c-many-names: $1 is the built binary
set -e
test "$(env -u HELLO_GREETING "$1" ada bob)" = "$(printf 'hello, ada!\nhello, bob!')"
