#!/bin/sh
# After the files are unpacked (dpkg postinst, rpm %post): systemd reads
# the new units; a service already running is restarted on the new binary.
# Nothing is enabled or started on a first install (docs/installing.md).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	systemctl try-restart peakline.service peakline-agent.service || true
fi
