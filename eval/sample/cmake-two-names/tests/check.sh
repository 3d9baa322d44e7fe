#!/bin/sh
# hidden test of cmake-two-names: $1 is the built binary
set -e
test "$("$1" ada bob)" = "hello, ada and bob!"
