#!/bin/sh
# hidden test of cmake-version: $1 is the built binary
set -e
test "$("$1" --version)" = "cmake_hello 1.0"
