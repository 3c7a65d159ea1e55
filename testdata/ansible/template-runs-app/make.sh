#!/bin/sh
# make.sh re-makes the template-runs-app test data: five real
# ansible-runner runs of a small playbook (project/site.yml: a role, two
# include_tasks files each with a task "same name", a loop, a handler, two
# inventory hosts on localhost) as AWX job template 9 "app-small" would
# launch it, with env/extravars as AWX writes them and resource profiling
# by the ansible.posix.cgroup_perf_recap callback (cgroup v1), the way
# ../template-runs/make.sh makes its runs. Run 9003 is launched with
# slow_s=3, so its "wait a bit" takes 3 s instead of 1; run 9005 runs
# project/site_v2.yml, where "loop items" is renamed and "added step" is
# new. The job events are kept without their stdout and event_data.res
# (module results), which the importer does not read.
#
# Needs root, cgroup v1 (cpuacct, memory, pids), ansible, ansible-runner,
# python3-yaml. Usage: sh make.sh [OUT_DIR]   (default: this script's dir)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
work=/tmp/peakline-template-runs-app
rm -rf "$work"
mkdir -p "$work"

# extravars writes PDD/env/extravars like AWX's RunJob.build_extra_vars_file:
# the job template's extra vars, then awx_meta_vars() (awx_* and the same
# tower_* names), dumped key by key with every string tagged !unsafe.
extravars() { # PDD JOB_ID LAUNCH_TYPE EXTRA_YAML
	python3 - "$@" <<'PY'
import sys, yaml

pdd, job_id, launch_type, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

class SafeStringDumper(yaml.SafeDumper):
    def represent_data(self, value):
        if isinstance(value, str):
            return self.represent_scalar('!unsafe', value)
        return super().represent_data(value)

meta = {}
for prefix in ('awx', 'tower'):
    meta.update({
        prefix + '_job_id': job_id,
        prefix + '_job_launch_type': launch_type,
        prefix + '_job_template_id': 9,
        prefix + '_job_template_name': 'app-small',
        prefix + '_project_revision': '3f2c9e1a7b6d4c0e8f5a2b1c9d7e6f4a3b2c1d0e',
        prefix + '_project_scm_branch': 'main',
        prefix + '_inventory_id': 2,
        prefix + '_inventory_name': 'web servers',
        prefix + '_execution_node': 'awx-task-0',
        prefix + '_user_id': 1,
        prefix + '_user_name': 'admin',
        prefix + '_user_email': 'admin@example.com',
        prefix + '_user_first_name': '',
        prefix + '_user_last_name': '',
    })
    if launch_type == 'scheduled':
        meta[prefix + '_schedule_id'] = 4
        meta[prefix + '_schedule_name'] = 'nightly deploy-web'
vars = yaml.safe_load(extra) or {}
vars.update(meta)
with open(pdd + '/env/extravars', 'w') as f:
    for k, v in vars.items():
        f.write(yaml.dump_all([{k: v}], None, Dumper=SafeStringDumper, default_flow_style=False))
PY
}

# run makes one private data dir and runs ansible-runner in fresh cgroups.
run() { # JOB_ID LAUNCH_TYPE EXTRA_YAML
	id=$1
	pdd=$work/$id
	mkdir -p "$pdd/env" "$pdd/project" "$pdd/inventory"
	cp -r "$here/project/." "$pdd/project/"
	rm "$pdd/project/site_v2.yml"
	# Run 9005 runs the next version of the playbook.
	if [ "$id" = 9005 ]; then cp "$here/project/site_v2.yml" "$pdd/project/site.yml"; fi
	printf 'h1 ansible_host=localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\nh2 ansible_host=localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n' >"$pdd/inventory/hosts"
	cat >"$pdd/env/envvars" <<EOV
ANSIBLE_CALLBACKS_ENABLED: ansible.posix.cgroup_perf_recap
CGROUP_CONTROL_GROUP: ansible-runner/tmpl-$id
CGROUP_OUTPUT_DIR: $pdd/profiling_data
CGROUP_OUTPUT_FORMAT: json
CGROUP_CPU_POLL_INTERVAL: "0.25"
CGROUP_MEMORY_POLL_INTERVAL: "0.25"
CGROUP_PID_POLL_INTERVAL: "0.25"
CGROUP_FILE_PER_TASK: "True"
CGROUP_WRITE_FILES: "True"
CGROUP_DISPLAY_RECAP: "False"
EOV
	extravars "$pdd" "$id" "$2" "$3"
	for c in cpuacct memory pids; do
		mkdir -p "/sys/fs/cgroup/$c/ansible-runner/tmpl-$id"
	done
	# The runs are compared with each other, so other load on the machine
	# must not change their figures: real-time priority (chrt -r 1) gives
	# the busy loops the CPU they ask for (with other work on a 2-core
	# machine they got 30-100 % of it at nice -20). Every command is
	# bounded in time, so the run cannot hold a CPU for long.
	chrt -r 1 sh -c 'for c in cpuacct memory pids; do echo $$ >"/sys/fs/cgroup/$c/ansible-runner/tmpl-$1/cgroup.procs"; done
		exec ansible-runner run "$2" -p site.yml --ident "$1"' sh "$id" "$pdd" >/dev/null
	for c in cpuacct memory pids; do
		rmdir "/sys/fs/cgroup/$c/ansible-runner/tmpl-$id"
	done
}

run 9000 scheduled ''
run 9001 scheduled ''
run 9002 scheduled ''
run 9003 scheduled 'slow_s: 3'
run 9004 scheduled ''
run 9005 manual ''

# Keep what the importer reads.
for id in 9001 9002 9003 9004 9005; do
	rm -rf "${out:?}/$id"
	mkdir -p "$out/$id/artifacts/$id"
	cp -r "$work/$id/env" "$work/$id/project" "$work/$id/inventory" "$work/$id/profiling_data" "$out/$id/"
	a=$work/$id/artifacts/$id
	cp -r "$a/job_events" "$a/rc" "$a/status" "$out/$id/artifacts/$id/"
	python3 - "$out/$id/artifacts/$id/job_events" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in os.listdir(d):
    p = os.path.join(d, f)
    e = json.load(open(p))
    e.pop('stdout', None)
    e.get('event_data', {}).pop('res', None)
    json.dump(e, open(p, 'w'))
PY
done
