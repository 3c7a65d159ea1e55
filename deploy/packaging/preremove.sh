#!/bin/sh
# Before the files are removed (dpkg prerm, rpm %preun): on removal (dpkg
# "remove", rpm 0 packages left), not on upgrade, stop and disable both
# services.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl --no-reload disable --now peakline.service peakline-agent.service || true
	fi
	;;
esac
