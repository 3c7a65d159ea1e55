package discover

import (
	"bytes"
	"errors"
	"syscall"
	"unsafe"
)

// fileReader reads small kernel files (/proc, cgroupfs) into one reused
// buffer, with raw system calls: a scan reads hundreds of them per poll.
// A returned slice is valid until the next read. Not safe for concurrent
// use.
type fileReader struct {
	buf []byte
}

// read returns the whole content of file. Errors are the raw errno
// (ENOENT, ESRCH when the process is gone, EACCES).
func (r *fileReader) read(file string) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 4096)
	}
	fd, err := openRetry(file)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(r.buf) {
			// Grown by hand, the old buffer zeroed: what it holds may be
			// the first part of an environment (see wipe).
			grown := make([]byte, 2*len(r.buf))
			copy(grown, r.buf)
			clear(r.buf)
			r.buf = grown
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return r.buf[:n], nil
		}
		n += m
	}
}

// wipe zeroes the buffer: after reading an environment, so that what
// the process keeps there (credentials) does not linger in ours. read
// zeroes the smaller buffer it outgrows, so no earlier copy is left.
func (r *fileReader) wipe() { clear(r.buf) }

func openRetry(file string) (int, error) {
	for {
		fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// errExecing is what readArgs returns for a process whose command line
// or environment reads empty: it is in execve, between taking the new
// program's comm and the kernel laying out the program's arguments and
// environment (its new memory's arg and env bounds are still 0), which
// loading an interpreter and ld.so makes last milliseconds; or it is a
// zombie. What it says is read again at the next look, not cached: a
// conmon or an ansible-playbook caught in that window would otherwise be
// taken for a process of no job for good.
var errExecing = errors.New("no command line or environment yet (exec in progress)")

// readArgs reads a process's cmdline or environ, errExecing when empty.
func (r *fileReader) readArgs(file string) ([]byte, error) {
	b, err := r.read(file)
	if err == nil && len(b) == 0 {
		return nil, errExecing
	}
	return b, err
}

// gone reports whether err means the file or its process went away.
func gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// readDir calls fn for each entry of dir with its name and d_type
// (syscall.DT_DIR, …), without allocating per entry. name is valid only
// during the call.
func (r *fileReader) readDir(dir string, fn func(name []byte, typ uint8)) error {
	if r.buf == nil {
		r.buf = make([]byte, 4096)
	}
	fd, err := openRetry(dir)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.ReadDirent(fd, r.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		b := r.buf[:n]
		// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
		for len(b) >= 19 {
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if !(len(name) == 1 && name[0] == '.') && !(len(name) == 2 && name[0] == '.' && name[1] == '.') {
				fn(name, typ)
			}
			b = b[reclen:]
		}
	}
}

// pids lists the numeric entries of a /proc directory into dst.
func (r *fileReader) pids(procRoot string, dst []int) ([]int, error) {
	dst = dst[:0]
	err := r.readDir(procRoot, func(name []byte, _ uint8) {
		if pid, ok := atoi(name); ok {
			dst = append(dst, pid)
		}
	})
	return dst, err
}

// atoi parses a non-negative decimal number.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// appendPids parses a cgroup.procs file (one pid a line) into dst.
func appendPids(dst []int, b []byte) []int {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if pid, ok := atoi(bytes.TrimSpace(line)); ok {
			dst = append(dst, pid)
		}
	}
	return dst
}

// procStat is what the process-tree fallback and discovery need from
// /proc/<pid>/stat (proc(5); times in clock ticks, rss in pages).
type procStat struct {
	state                        byte
	ppid                         int
	utime, stime, cutime, cstime uint64
	threads                      uint64
	start                        uint64 // starttime: with the pid, a process's identity
	rssPages                     uint64
}

// parseStat parses a /proc/<pid>/stat line and returns its comm too (a
// slice of b). The comm may hold spaces and parentheses: it runs from
// the first '(' to the last ')'.
func parseStat(b []byte) (st procStat, comm []byte, ok bool) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return st, nil, false
	}
	comm = b[open+1 : closing]
	rest := b[closing+1:]
	// Fields from 3 (state) on, split by single spaces.
	field := 3
	for len(rest) > 0 && field <= 24 {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f := bytes.TrimRight(rest[:end], "\n")
		rest = rest[end:]
		switch field {
		case 3:
			if len(f) != 1 {
				return st, nil, false
			}
			st.state, ok = f[0], true
		case 4:
			st.ppid, ok = atoi(f)
		case 14:
			st.utime, ok = atou(f)
		case 15:
			st.stime, ok = atou(f)
		case 16:
			st.cutime, ok = atou(f)
		case 17:
			st.cstime, ok = atou(f)
		case 20:
			st.threads, ok = atou(f)
		case 22:
			st.start, ok = atou(f)
		case 24:
			st.rssPages, ok = atou(f)
		default:
			ok = true
		}
		if !ok {
			return st, nil, false
		}
		field++
	}
	return st, comm, field > 24
}

// atou parses a decimal counter. cutime and cstime are signed in the
// kernel's format but never negative in practice: a negative one reads 0.
func atou(b []byte) (uint64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		return 0, true
	}
	return n, true
}

// envValue returns the value of key (given as "KEY=") in a NUL-separated
// environment block, or false. It looks at no other variable's value.
func envValue(env, key []byte) ([]byte, bool) {
	for len(env) > 0 {
		entry := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			entry, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if bytes.HasPrefix(entry, key) {
			return entry[len(key):], true
		}
	}
	return nil, false
}

// nextArg splits the first NUL-terminated argument off a cmdline block.
func nextArg(b []byte) (arg, rest []byte) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// parseJobID parses a job id: a positive decimal number.
func parseJobID(b []byte) (int64, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n > 0
}
