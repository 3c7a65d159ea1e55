#!/bin/sh
# After the files are removed (dpkg postrm, rpm %postun): systemd forgets
# the units. The store (/var/lib/peakline), the agent's spool and the
# peakline user stay.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
