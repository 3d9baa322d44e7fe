#!/bin/sh
# hidden test of cmake-shout: $1 is the built binary
set -e
test "$("$1" --shout ada)" = "HELLO, ada!"
test "$("$1" ada)" = "hello, ada!"
