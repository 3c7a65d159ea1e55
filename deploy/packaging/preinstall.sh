#!/bin/sh
# Before the files are unpacked (dpkg preinst, rpm %pre): the peakline
# system user and group, which own /etc/peakline/auth.yaml and run both
# services. Kept on removal, as Debian and Fedora policy ask.
set -e
if ! getent group peakline >/dev/null; then
	groupadd --system peakline
fi
if ! getent passwd peakline >/dev/null; then
	useradd --system --gid peakline --home-dir /var/lib/peakline --no-create-home \
		--shell /usr/sbin/nologin --comment "Peakline" peakline
fi
