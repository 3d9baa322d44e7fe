#!/bin/sh
# hidden test of c-greet-null: $1 is the built binary
set -e
cat >/tmp/t.c <<EOT
#include "src/greet.h"
int main(void){ char b[4]; return greet(0, 4, "a", "b") != -1 || greet(b, 0, "a", "b") != -1; }
EOT
cc -I. -o /tmp/t /tmp/t.c src/greet.c && /tmp/t
