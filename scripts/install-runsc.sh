#!/bin/sh
# scripts/install-runsc.sh - gVisor's runsc for the gvisor backend, as root.
#
# Debian 12's own runsc (0.0~20221219) fails statx with AT_NO_AUTOMOUNT,
# which Debian 12's coreutils passes: `ls` and `stat` fail inside. The
# package from Debian's bookworm-backports (0.0~20240729) works, so it is
# installed from there; the source is added if the machine lacks it.
set -eu
want=20240729
have=$(runsc --version 2>/dev/null | sed -n 's/^runsc version 0\.0~\([0-9]*\).*/\1/p')
if [ -n "$have" ] && [ "$have" -ge "$want" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "missing: runsc >= 0.0~$want from bookworm-backports (run as root to install)" >&2
	exit 1
fi
src=/etc/apt/sources.list.d/bookworm-backports.sources
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d; then
	cat >"$src" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
echo "installing: runsc (bookworm-backports)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q -t bookworm-backports runsc >/dev/null 2>&1 || {
	apt-get update -q >/dev/null
	apt-get install -y -q -t bookworm-backports runsc >/dev/null
}
