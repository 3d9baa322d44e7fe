#!/bin/sh
# hidden test of cmake-default-name: $1 is the built binary
set -e
test "$("$1")" = "hello, cmake!"
