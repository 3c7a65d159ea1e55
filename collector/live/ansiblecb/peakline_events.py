# Peakline's job events callback: writes the ansible-playbook run's events
# as ansible-runner does (artifacts/<ident>/job_events/<counter>-<uuid>.json)
# into the directory in PEAKLINE_JOB_EVENTS_DIR, for `peakline collect` to
# follow. It is a notification callback: the stdout callback is untouched.
# Nothing it does may fail the playbook: every error is caught and the first
# one is reported once on stderr.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = '''
    name: peakline_events
    type: notification
    short_description: write job events for peakline collect
    description:
      - Writes one JSON file per event into the directory named by
        PEAKLINE_JOB_EVENTS_DIR, as ansible-runner writes job_events.
    requirements:
      - PEAKLINE_JOB_EVENTS_DIR set (by peakline collect)
'''

import datetime
import fcntl
import json
import os
import sys
import threading
import uuid

from collections.abc import Mapping, Sequence

from ansible.plugins.callback import CallbackBase

ENV_DIR = 'PEAKLINE_JOB_EVENTS_DIR'
# An event file above this size loses its "res": collect reads task starts,
# not module output, and a result can be the size of a slurped file.
MAX_EVENT_BYTES = 1 << 20


class _Encode(json.JSONEncoder):
    # Ansible's own encoder (module_utils.common.json.AnsibleJSONEncoder)
    # is due to be deprecated, with a warning on the user's output; what
    # reaches a callback is plain data but for these.
    def default(self, o):
        ciphertext = getattr(o, '_ciphertext', None)
        if ciphertext is not None:  # a vaulted value: never decrypted here
            if isinstance(ciphertext, bytes):
                ciphertext = ciphertext.decode('utf-8', 'replace')
            return {'__ansible_vault': ciphertext}
        if isinstance(o, (datetime.date, datetime.datetime, datetime.time)):
            return o.isoformat()
        if isinstance(o, Mapping):
            return dict(o)
        if isinstance(o, (set, frozenset, tuple)) or (isinstance(o, Sequence) and not isinstance(o, (str, bytes))):
            return list(o)
        if isinstance(o, bytes):
            return o.decode('utf-8', 'replace')
        return str(o)


def _now():
    # ansible-runner's form: naive isoformat of UTC.
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None).isoformat()


def _attr(obj, public, private):
    # ansible-core 2.19 gives callbacks public host/task/result attributes
    # and deprecates the underscored ones older cores only have.
    v = getattr(obj, public, None)
    if v is None:
        v = getattr(obj, private, None)
    return v


def _guarded(fn):
    def wrapper(self, *args, **kwargs):
        try:
            fn(self, *args, **kwargs)
        except Exception as e:  # never break the user's run
            self._fail(e)
    wrapper.__name__ = fn.__name__
    return wrapper


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'peakline_events'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._dir = os.environ.get(ENV_DIR, '')
        self._lock = threading.Lock()
        self._failed = False
        self._playbook = {}
        self._play = {}
        self._task_uuids = {}
        self._host_start = {}
        self._ident = os.path.basename(os.path.dirname(self._dir.rstrip('/'))) if self._dir else ''

    def _fail(self, e):
        if self._failed:
            return
        self._failed = True
        try:
            sys.stderr.write('peakline: the job events callback failed, so tasks after this point may not be '
                             'attributed (the playbook is unaffected): %s: %s\n' % (type(e).__name__, e))
            sys.stderr.flush()
        except Exception:
            pass

    def _next_counter(self):
        # The counter lives in a file so that every ansible-playbook
        # writing to the directory (one started by a task inherits the
        # environment) numbers its events on the job's one sequence.
        fd = os.open(os.path.join(self._dir, '.counter'), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 32).strip()
            n = int(raw) + 1 if raw else 1
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, str(n).encode())
            return n
        finally:
            os.close(fd)

    def _emit(self, event, data, event_uuid=None, parent_uuid=None):
        if not self._dir:
            return
        with self._lock:
            ev_uuid = event_uuid or str(uuid.uuid4())
            event_data = dict(self._playbook)
            event_data.update(self._play)
            event_data.update(data)
            event_data['uuid'] = ev_uuid
            ev = {
                'uuid': ev_uuid,
                'counter': 0,
                'stdout': '',
                'start_line': 0,
                'end_line': 0,
                'runner_ident': self._ident,
                'event': event,
                'pid': os.getpid(),
                'created': _now(),
            }
            if parent_uuid:
                ev['parent_uuid'] = parent_uuid
            ev['event_data'] = event_data
            ev['counter'] = self._next_counter()
            try:
                body = json.dumps(ev, cls=_Encode, sort_keys=False)
            except Exception:
                event_data.pop('res', None)
                body = json.dumps(ev, cls=_Encode)
            if len(body) > MAX_EVENT_BYTES and 'res' in event_data:
                event_data['res'] = {'_peakline_omitted': 'result larger than %d bytes' % MAX_EVENT_BYTES}
                body = json.dumps(ev, cls=_Encode)
            name = '%d-%s.json' % (ev['counter'], ev_uuid)
            tmp = os.path.join(self._dir, name + '.tmp')
            with open(tmp, 'w') as f:
                f.write(body)
            os.rename(tmp, os.path.join(self._dir, name))

    def _task_data(self, task):
        d = {
            'task': task.name or task.action,
            'task_uuid': str(task._uuid),
            'task_action': task.action,
            'resolved_action': getattr(task, 'resolved_action', None) or task.action,
            'task_args': '',
        }
        try:
            d['task_path'] = task.get_path()
        except Exception:
            pass
        role = getattr(task, '_role', None)
        if role is not None:
            d['role'] = getattr(role, '_role_name', '') or ''
        return d

    def _task_start(self, task, is_conditional):
        d = self._task_data(task)
        d['name'] = task.get_name()
        d['is_conditional'] = is_conditional
        # The free strategy (or serial) starts one task more than once:
        # each start gets a uuid of its own, as ansible-runner does.
        task_uuid = d['task_uuid']
        n = self._task_uuids.get(task_uuid, 0)
        self._task_uuids[task_uuid] = n + 1
        ev_uuid = task_uuid if n == 0 else '%s_%d' % (task_uuid, n)
        # ansible-runner reports handlers and cleanup tasks as task starts
        # with is_conditional true; so does this callback.
        self._emit('playbook_on_task_start', d, event_uuid=ev_uuid, parent_uuid=self._play.get('play_uuid'))

    def _result(self, event, result, with_res=True, timed=False, **extra):
        host = _attr(result, 'host', '_host')
        task = _attr(result, 'task', '_task')
        d = self._task_data(task) if task is not None else {}
        if host is not None:
            d['host'] = host.get_name()
            d['remote_addr'] = getattr(host, 'address', None)
        if timed:
            # As ansible-runner: the host's run of the task, from its
            # runner_on_start to now.
            start = self._host_start.get(d.get('host'))
            d['start'] = d['end'] = d['duration'] = None
            if start is not None:
                end = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                d['start'], d['end'] = start.isoformat(), end.isoformat()
                d['duration'] = (end - start).total_seconds()
        if with_res:
            d['res'] = _attr(result, 'result', '_result')
        if task is not None:
            d['event_loop'] = getattr(task, 'loop_with', None)
        d.update(extra)
        self._emit(event, d, parent_uuid=d.get('task_uuid'))

    @_guarded
    def v2_playbook_on_start(self, playbook):
        if not self._dir:
            return
        pb_uuid = str(uuid.uuid4())
        self._playbook = {'playbook': getattr(playbook, '_file_name', '') or '', 'playbook_uuid': pb_uuid}
        self._play = {}
        self._emit('playbook_on_start', {}, event_uuid=pb_uuid)

    @_guarded
    def v2_playbook_on_play_start(self, play):
        hosts = getattr(play, 'hosts', '')
        pattern = ','.join(hosts) if isinstance(hosts, list) else (hosts or '')
        name = play.get_name().strip() or pattern
        play_uuid = str(play._uuid)
        self._play = {'play': name, 'play_uuid': play_uuid, 'play_pattern': pattern}
        self._emit('playbook_on_play_start', {'name': name, 'pattern': pattern}, event_uuid=play_uuid,
                   parent_uuid=self._playbook.get('playbook_uuid'))

    @_guarded
    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task, is_conditional)

    @_guarded
    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task, True)

    @_guarded
    def v2_playbook_on_cleanup_task_start(self, task):
        self._task_start(task, True)

    @_guarded
    def v2_playbook_on_no_hosts_matched(self):
        self._emit('playbook_on_no_hosts_matched', {})

    @_guarded
    def v2_playbook_on_no_hosts_remaining(self):
        self._emit('playbook_on_no_hosts_remaining', {})

    @_guarded
    def v2_runner_on_start(self, host, task):
        d = self._task_data(task)
        d['host'] = host.get_name()
        self._host_start[d['host']] = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        self._emit('runner_on_start', d, parent_uuid=d['task_uuid'])

    @_guarded
    def v2_runner_on_ok(self, result):
        self._result('runner_on_ok', result, timed=True)

    @_guarded
    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result('runner_on_failed', result, timed=True, ignore_errors=ignore_errors)

    @_guarded
    def v2_runner_on_skipped(self, result):
        self._result('runner_on_skipped', result, with_res=False, timed=True)

    @_guarded
    def v2_runner_on_unreachable(self, result):
        self._result('runner_on_unreachable', result, timed=True)

    @_guarded
    def v2_runner_item_on_ok(self, result):
        self._result('runner_item_on_ok', result)

    @_guarded
    def v2_runner_item_on_failed(self, result):
        self._result('runner_item_on_failed', result)

    @_guarded
    def v2_runner_item_on_skipped(self, result):
        self._result('runner_item_on_skipped', result)

    @_guarded
    def v2_runner_retry(self, result):
        self._result('runner_retry', result)

    @_guarded
    def v2_playbook_on_stats(self, stats):
        self._play = {}
        d = {
            'changed': stats.changed,
            'dark': stats.dark,
            'failures': stats.failures,
            'ignored': getattr(stats, 'ignored', {}),
            'ok': stats.ok,
            'processed': stats.processed,
            'rescued': getattr(stats, 'rescued', {}),
            'skipped': stats.skipped,
            'artifact_data': stats.custom.get('_run', {}) if hasattr(stats, 'custom') else {},
        }
        self._emit('playbook_on_stats', d, parent_uuid=self._playbook.get('playbook_uuid'))
