#!/usr/bin/python3
"""shapes.py OUT: lays out, one after the other, the node shapes
collector/discover's tests read, for real on this pure cgroup v2 host, and
records each into OUT/<shape>/{cgroup,proc,roles}.

Each shape is real cgroup directories under /sys/fs/cgroup, made with mkdir
and with cpu, memory and pids enabled on the way down as systemd and the
kubelet do, and real processes placed in them: copies of one small Python
program (ACTOR) under the names the shape needs (conmon, ansible-playbook,
ssh, nginx, dumb-init, ...), each started by its real parent (conmon starts
its container's first process, a containerd shim its pod's, ansible-playbook
its fork and ssh) with its own command line and environment. A process's
kernel comm is its executable's name, as for a real shebang script; its
command line is the interpreter's, then the script's path, then its
arguments. Once every process has started its children, the kernel's cgroup
files of the shape's directories and each process's /proc comm, cmdline,
environ, stat and cgroup are copied, and OUT/<shape>/roles names each
process's pid ("role pid" lines): pids are whatever this host gave.
Container ids are sha256 digests of a label; pod uids are made up.
"""
import hashlib
import json
import os
import shutil
import sys
import time

CG = "/sys/fs/cgroup"
BIN = "/opt/shapes/bin"

# ACTOR is every shape's process. It reads, from fd 3, the children it is to
# start and where to say it is ready; starts them; writes its pid to
# READY/<role>; and sleeps. Each child joins its cgroup (and, rootless, its
# user) between fork and exec, so that it is in its cgroup from its first
# instruction on.
ACTOR = r'''
import json, os, sys, time

def launch(spec, ready):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            if spec.get("orphan") and os.fork() != 0:
                os._exit(0)  # the child is reparented to init, as a daemon's
            if spec.get("cg"):
                with open("/sys/fs/cgroup/" + spec["cg"] + "/cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            if spec.get("uid") and os.getuid() != spec["uid"]:
                os.setgroups([])
                os.setgid(spec["uid"])
                os.setuid(spec["uid"])
            if r != 3:
                os.dup2(r, 3)
                os.close(r)
            os.set_inheritable(3, True)
            os.execve(spec["exe"], spec["argv"], spec["env"])
        except BaseException as e:
            sys.stderr.write("launch %s: %s\n" % (spec["role"], e))
        os._exit(127)
    os.close(r)
    os.write(w, json.dumps([spec.get("children", []), ready, spec["role"]]).encode())
    os.close(w)
    if spec.get("orphan"):
        os.waitpid(pid, 0)

def actor():
    try:
        f = os.fdopen(3, "rb")
    except OSError:
        return
    children, ready, role = json.loads(f.read())
    f.close()
    for c in children:
        launch(c, ready)
    with open(ready + "/." + role, "w") as out:
        out.write(str(os.getpid()))
    os.rename(ready + "/." + role, ready + "/" + role)
    while True:
        time.sleep(3600)

if __name__ == "__main__":
    actor()
'''
exec(ACTOR.replace('if __name__ == "__main__":\n    actor()', ""))

FILES = ("cgroup.procs cgroup.events cgroup.controllers cgroup.subtree_control cgroup.type cpu.stat "
         "memory.current memory.peak memory.max memory.events memory.stat pids.current pids.peak pids.max").split()
PROC_FILES = ("comm", "cmdline", "environ", "stat", "cgroup")


def digest(label):
    return hashlib.sha256(label.encode()).hexdigest()


def exe(name):
    """The path of the actor copy named name."""
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("#!/usr/bin/python3\n" + ACTOR)
        os.chmod(path, 0o755)
    return path


def proc(role, name, args=(), env=(), cg=None, children=(), orphan=False, uid=0, python=False):
    """A process: role names it in the manifest; name is its executable
    (its kernel comm); python runs the script through /usr/bin/python3
    explicitly (comm python3, the script as argv[1])."""
    path = exe(name) if not name.startswith("/") else name
    spec = {"role": role, "argv": [name] + list(args), "env": dict(e.split("=", 1) for e in env),
            "cg": cg, "children": list(children), "orphan": orphan, "uid": uid, "exe": path}
    if python:
        spec["exe"] = "/usr/bin/python3"
        spec["argv"] = ["/usr/bin/python3", path] + list(args)
    return spec


MADE = []  # the cgroups mkcg made, for record


def mkcg(rel):
    """Makes rel, enabling cpu, memory and pids on the way down."""
    MADE.append(rel)
    d = CG
    for part in rel.split("/"):
        with open(d + "/cgroup.subtree_control", "w") as f:
            f.write("+cpu +memory +pids")
        d = d + "/" + part
        os.makedirs(d, exist_ok=True)
    return rel


def count(specs):
    return sum(1 + count(s["children"]) for s in specs)


PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"
TOKEN = "AWX_TOKEN=fake-token-not-a-secret"


def conmon_args(cid, name, long=False):
    if long:
        return ["--api-version", "1", "--cid=" + cid, "--cuuid", cid, "-r", "/usr/bin/crun", "--name", name]
    return ["--api-version", "1", "-c", cid, "-u", cid, "-r", "/usr/bin/crun",
            "-b", "/var/lib/containers/storage/overlay-containers/%s/userdata" % cid,
            "-n", name, "--exit-dir", "/run/libpod/exits", "--log-level", "warning"]


def podman():
    """An execution node, systemd cgroup manager: rootful job 101 in crun's
    container sub-group, a non-AWX nginx container whose environment has a
    JOB_ID, rootless job 102 before ansible-playbook starts; each with its
    conmon scope. receptor and ansible-runner in receptor.service."""
    rootful, webapp, rootless = digest("shape-podman-rootful"), digest("shape-podman-webapp"), digest("shape-podman-rootless")
    ruser = "user.slice/user-1000.slice/user@1000.service/user.slice"
    job101 = mkcg("machine.slice/libpod-%s.scope/container" % rootful)
    web = mkcg("machine.slice/libpod-%s.scope" % webapp)
    job102 = mkcg(ruser + "/libpod-%s.scope/container" % rootless)
    env101 = ["PATH=/usr/local/bin:/usr/bin", TOKEN, "JOB_ID=101", "INVENTORY_ID=3", "PROJECT_REVISION=4f0c1a2b", "AWX_HOST=https://awx.example.org"]
    env102 = ["PATH=/usr/bin", TOKEN, "JOB_ID=102"]
    conmon102 = mkcg(ruser + "/libpod-conmon-%s.scope" % rootless)
    # user@1000.service is delegated to its user, as systemd does: the
    # rootless conmon moves its container's first process itself.
    for d, _, files in os.walk(CG + "/user.slice/user-1000.slice/user@1000.service"):
        os.chown(d, 1000, 1000)
        for f in files:
            os.chown(d + "/" + f, 1000, 1000)
    return [
        proc("receptor", "receptor", ["--config", "/etc/receptor/receptor.conf"], [PATH], cg=mkcg("system.slice/receptor.service"), children=[
            proc("runner", "ansible-runner", ["worker", "--private-data-dir=/tmp/awx_101_x1"], [PATH]),
        ]),
        proc("conmon101", "conmon", conmon_args(rootful, "ansible_runner_101"), [PATH], orphan=True,
             cg=mkcg("machine.slice/libpod-conmon-%s.scope" % rootful), children=[
                proc("playbook101", "ansible-playbook", ["-u", "root", "-i", "/runner/inventory/hosts", "site.yml"], env101, cg=job101, children=[
                    proc("fork101", "ansible-playbook", ["-u", "root", "site.yml"], env101, children=[
                        proc("ssh101", "ssh", ["-o", "ControlMaster=auto", "web1"], env101),
                    ]),
                ]),
            ]),
        proc("conmonweb", "conmon", conmon_args(webapp, "webapp"), [PATH], orphan=True,
             cg=mkcg("machine.slice/libpod-conmon-%s.scope" % webapp), children=[
                proc("nginx", "nginx", ["-g", "daemon off;"], ["PATH=/usr/bin", "JOB_ID=999"], cg=web, children=[
                    proc("nginxworker", "nginx", [], [PATH]),
                ]),
            ]),
        proc("conmon102", "conmon", conmon_args(rootless, "ansible_runner_102", long=True), [PATH], orphan=True, uid=1000,
             cg=conmon102, children=[
                proc("dumbinit102", "dumb-init", ["--"], env102, cg=job102, uid=1000, children=[
                    proc("entrypoint102", "entrypoint", [], env102, uid=1000),
                ]),
            ]),
    ]


def kubernetes():
    """A node, systemd driver, containerd: burstable pod of job 201 (pause;
    dumb-init, ansible-runner worker, ansible-playbook, ssh), besteffort pod
    of job 202 (ansible-playbook alone), burstable pod of job 203
    (ansible-runner only: the id is in HOSTNAME), a Guaranteed nginx pod
    that is no job. Each pod's processes are started by its shim."""
    def pod(qos, uid):
        if qos == "":
            return "kubepods.slice/kubepods-pod%s.slice" % uid
        return "kubepods.slice/kubepods-%s.slice/kubepods-%s-pod%s.slice" % (qos, qos, uid)

    def scope(p, label):
        return mkcg(p + "/cri-containerd-%s.scope" % digest(label))

    k8s = ["KUBERNETES_SERVICE_HOST=10.96.0.1"]
    pause = ["PATH=/usr/bin", "HOSTNAME=automation-job-999-zzzzz"]
    containerd = mkcg("system.slice/containerd.service")

    def shim(n, children):
        return proc("shim%d" % n, "containerd-shim", ["-namespace", "k8s.io", "-id", digest("shape-k8s-sandbox-%d" % n),
                    "-address", "/run/containerd/containerd.sock"], [PATH], cg=containerd, orphan=True, children=children)

    p1 = pod("burstable", "9b3f0c1e_4a3c_4d59_9d0e_6a1c1d2e3f41")
    p2 = pod("besteffort", "2c8a4e10_7f6b_4c3d_8e2f_1a2b3c4d5e6f")
    p3 = pod("burstable", "5e6f7a8b_1c2d_4e3f_9a0b_c1d2e3f4a5b6")
    p4 = pod("", "0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d")
    e201 = ["PATH=/usr/local/bin:/usr/bin", "HOSTNAME=automation-job-201-x7k2q"] + k8s
    e202 = ["PATH=/usr/local/bin:/usr/bin", "HOSTNAME=automation-job-202-q2w9d"] + k8s + [TOKEN, "JOB_ID=202"]
    e203 = ["PATH=/usr/local/bin:/usr/bin", "HOSTNAME=automation-job-203-b8m4t"] + k8s
    return [
        proc("kubelet", "kubelet", ["--config=/var/lib/kubelet/config.yaml"], [PATH], cg=mkcg("system.slice/kubelet.service")),
        proc("containerd", "containerd", [], [PATH], cg=containerd),
        shim(1, [
            proc("pause201", "pause", [], pause, cg=scope(p1, "shape-k8s-pause-201")),
            proc("dumbinit201", "dumb-init", ["--", "ansible-runner", "worker", "--private-data-dir=/runner"], e201, cg=scope(p1, "shape-k8s-worker-201"), children=[
                proc("runner201", "ansible-runner", ["worker", "--private-data-dir=/runner"], e201, children=[
                    proc("playbook201", "ansible-playbook", ["site.yml"], e201 + [TOKEN, "JOB_ID=201", "INVENTORY_ID=7"], children=[
                        proc("ssh201", "ssh", ["db1"], e201 + [TOKEN, "JOB_ID=201"]),
                    ]),
                ]),
            ]),
        ]),
        shim(2, [
            proc("pause202", "pause", [], pause, cg=scope(p2, "shape-k8s-pause-202")),
            proc("playbook202", "ansible-playbook", ["site.yml"], e202, cg=scope(p2, "shape-k8s-worker-202")),
        ]),
        shim(3, [
            proc("pause203", "pause", [], pause, cg=scope(p3, "shape-k8s-pause-203")),
            proc("dumbinit203", "dumb-init", ["--", "ansible-runner", "worker"], e203, cg=scope(p3, "shape-k8s-worker-203"), children=[
                proc("runner203", "ansible-runner", ["worker", "--private-data-dir=/runner"], e203),
            ]),
        ]),
        shim(4, [
            proc("nginx", "nginx", ["-g", "daemon off;"], ["PATH=/usr/bin", "HOSTNAME=web-5d9c7b-abcde"], cg=scope(p4, "shape-k8s-nginx")),
        ]),
    ]


def receptor():
    """AWX's own install, rootless podman with the cgroupfs manager: no
    container cgroups; receptor, its ansible-runner worker, podman, the
    conmons (daemons: their parent is init) and the processes of jobs 103
    and 104 all in system.slice/receptor.service. Job 103's playbook forks
    a shell whose name holds spaces and parentheses, which runs a Python
    module; a python3 running ansible-playbook (trusted through argv[1])
    was left to init. An ansible-playbook run by hand, with no JOB_ID, is in
    a login session."""
    svc = mkcg("system.slice/receptor.service")
    session = mkcg("user.slice/user-0.slice/session-3.scope")
    os.makedirs("/root/.ansible/tmp", exist_ok=True)
    module = "/root/.ansible/tmp/AnsiballZ_command.py"
    with open(module, "w") as f:
        f.write(ACTOR)
    e103 = ["PATH=/usr/bin", TOKEN, "JOB_ID=103"]
    return [
        proc("receptor", "receptor", ["-c", "/etc/receptor/receptor.conf"], ["PATH=/usr/bin"], cg=svc, children=[
            proc("runner", "ansible-runner", ["worker", "--private-data-dir=/tmp/awx_103_q"], ["PATH=/usr/bin", "HOME=/var/lib/awx"], children=[
                proc("podman", "podman", ["run", "--rm", "--name", "ansible_runner_103"], ["PATH=/usr/bin", "JOB_ID=103", TOKEN]),
            ]),
        ]),
        proc("conmon103", "conmon", ["--api-version", "1", "-c", digest("shape-receptor-103"), "-n", "ansible_runner_103"], ["PATH=/usr/bin"],
             cg=svc, orphan=True, children=[
                proc("playbook103", "ansible-playbook", ["-u", "root", "site.yml"],
                     ["PATH=/usr/bin", TOKEN, "NOTJOB_ID=7", "JOB_ID_OLD=8", "JOB_ID=103", "INVENTORY_ID=3", "AWX_HOST=https://awx.example.org"], children=[
                        proc("fork103", "ansible-playbook", ["-u", "root", "site.yml"], e103, children=[
                            proc("shell103", "sh) (x) y", ["-c", "python3 " + module], ["JOB_ID=103"], children=[
                                proc("module103", "/usr/bin/python3", [module], ["JOB_ID=103"]),
                            ]),
                        ]),
                    ]),
            ]),
        proc("version103", "ansible-playbook", ["--version"], ["JOB_ID=103", TOKEN], cg=svc, orphan=True, python=True),
        proc("conmon104", "conmon", ["--api-version", "1", "-c", digest("shape-receptor-104"), "-n", "ansible_runner_104"], ["PATH=/usr/bin"],
             cg=svc, orphan=True, children=[
                proc("playbook104", "ansible-playbook", ["other.yml"], ["PATH=/usr/bin", TOKEN, "JOB_ID=104"]),
            ]),
        proc("byhand", "ansible-playbook", ["by-hand.yml"], ["PATH=/usr/bin", "HOME=/root"], cg=session, orphan=True),
    ]


def copy(src, dst):
    try:
        with open(src, "rb") as f:
            b = f.read()
    except FileNotFoundError:
        return
    with open(dst, "wb") as f:
        f.write(b)


def record(name, make, out):
    del MADE[:]
    specs = make()
    tops = sorted(set(rel.split("/")[0] for rel in MADE))
    ready = "/tmp/shapes-ready-" + name
    shutil.rmtree(ready, ignore_errors=True)
    os.makedirs(ready)
    os.chmod(ready, 0o777)  # rootless processes say they are ready too
    for s in specs:
        launch(s, ready)
    want = count(specs)
    deadline = time.time() + 600
    while len([n for n in os.listdir(ready) if not n.startswith(".")]) < want:
        if time.time() > deadline:
            sys.exit("shapes: %s: %d of %d processes ready after 600 s: %s" % (name, len(os.listdir(ready)), want, sorted(os.listdir(ready))))
        time.sleep(0.2)
    time.sleep(1)

    dst = os.path.join(out, name)
    roles = {}
    for role in os.listdir(ready):
        with open(os.path.join(ready, role)) as f:
            roles[role] = int(f.read())
    os.makedirs(dst + "/proc")
    for role, pid in sorted(roles.items()):
        os.makedirs("%s/proc/%d" % (dst, pid))
        for f in PROC_FILES:
            copy("/proc/%d/%s" % (pid, f), "%s/proc/%d/%s" % (dst, pid, f))
    os.makedirs(dst + "/cgroup")
    for f in ("cgroup.procs", "cgroup.controllers", "cgroup.subtree_control", "cgroup.max.depth"):
        copy(CG + "/" + f, dst + "/cgroup/" + f)
    dirs = []
    for top in tops:
        for d, _, _ in os.walk(CG + "/" + top):
            dirs.append(d)
            rel = os.path.relpath(d, CG)
            os.makedirs(dst + "/cgroup/" + rel, exist_ok=True)
            for f in FILES:
                copy(d + "/" + f, dst + "/cgroup/" + rel + "/" + f)
    with open(dst + "/roles", "w") as f:
        for role, pid in sorted(roles.items()):
            f.write("%s %d\n" % (role, pid))

    # End the processes (the conmons and shims too: they are in the
    # shape's cgroups) and remove the cgroups, leaves first.
    for top in tops:
        with open(CG + "/" + top + "/cgroup.kill", "w") as f:
            f.write("1")
    for d in sorted(dirs, key=lambda d: -d.count("/")):
        for _ in range(100):
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.1)
    shutil.rmtree(ready)
    print("shapes: %s: %d processes, %d cgroups" % (name, len(roles), len(dirs)))


def main():
    out = sys.argv[1]
    for name, make in (("podman", podman), ("kubernetes", kubernetes), ("receptor", receptor)):
        record(name, make, out)


if __name__ == "__main__":
    main()
