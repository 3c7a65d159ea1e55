package live

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"

	"github.com/peakline/peakline/collector/cgroup"
)

// gateScript holds a child in /bin/sh until fd 3 reaches end of file, then
// execs the command. On cgroup v1 a child cannot be born in a cgroup, so the
// collector starts the gate, writes its pid into every controller's
// cgroup.procs and only then closes the pipe: the command and everything it
// forks start inside the cgroup, and the shell's exec keeps the pid, the
// signals and the exit status the command's own.
const gateScript = `read -r _ <&3; exec 3<&-; exec "$@"`

// newCommand builds the command with the caller's standard streams.
func newCommand(cfg *LiveConfig, path string, args []string, env []string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr
	cmd.Env = env
	return cmd
}

// startInCgroup starts cfg.Command so that it and all it forks run in cg.
// On v2 the child is born in the cgroup (clone3 with CgroupFD); where that
// fails, and on v1, the gate of gateScript is used. placeErr is set when
// the command runs but outside the cgroup; err when it could not start.
func startInCgroup(cfg *LiveConfig, path string, env []string, cg *cgroup.Cgroup, log *slog.Logger) (cmd *exec.Cmd, placeErr, err error) {
	if dir, derr := cg.OpenDir(); derr == nil {
		cmd = newCommand(cfg, path, cfg.Command[1:], env)
		cmd.Args[0] = cfg.Command[0]
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
		err = cmd.Start()
		_ = dir.Close()
		if err == nil {
			return cmd, nil, nil
		}
		log.Debug("cannot start the command in its cgroup directly; using the gate", "err", err)
	}

	sh, err := exec.LookPath("sh")
	if err != nil {
		sh = "/bin/sh"
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot make the start gate: %w", err)
	}
	defer w.Close() // opens the gate in every case
	args := append([]string{"-c", gateScript, "peakline-gate", path}, cfg.Command[1:]...)
	cmd = newCommand(cfg, sh, args, env)
	cmd.ExtraFiles = []*os.File{r}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot start %q: %w", cfg.Command[0], err)
	}
	if err := cg.AddProc(cmd.Process.Pid); err != nil {
		return cmd, err, nil
	}
	return cmd, nil, nil
}

// waitCommand waits for cmd and returns its exit code, 128+N when signal N
// ended it. When ctx ends first, the command gets SIGTERM once and is still
// waited for: the job decides how it stops.
func waitCommand(ctx context.Context, cmd *exec.Cmd, log *slog.Logger) int {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-ctx.Done():
		log.Info("interrupted; passing SIGTERM to the command and waiting for it")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}
	return exitCode(cmd)
}

func exitCode(cmd *exec.Cmd) int {
	st := cmd.ProcessState
	if st == nil {
		return 127 // never ran: wait failed
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// runPlain runs cfg.Command without a cgroup or anything else from the
// collector, and returns its exit code.
func runPlain(ctx context.Context, cfg *LiveConfig, log *slog.Logger) (int, error) {
	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		log.Error("cannot find the command", "err", err)
		return 127, fmt.Errorf("cannot find command %q: %w", cfg.Command[0], err)
	}
	cmd := newCommand(cfg, path, cfg.Command[1:], nil)
	cmd.Args[0] = cfg.Command[0]
	if err := cmd.Start(); err != nil {
		log.Error("cannot start the command", "err", err)
		return 126, fmt.Errorf("cannot start %q: %w", cfg.Command[0], err)
	}
	return waitCommand(ctx, cmd, log), nil
}
