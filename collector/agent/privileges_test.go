package agent

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestEffectiveCaps(t *testing.T) {
	f := func(status string, want uint64, wantOK bool, missing []string) {
		t.Helper()
		got, ok := effectiveCaps([]byte(status))
		if got != want || ok != wantOK {
			t.Errorf("effectiveCaps(%q) = %x, %v; want %x, %v", status, got, ok, want, wantOK)
		}
		if m := missingEnvironCaps(got); ok && !slices.Equal(m, missing) {
			t.Errorf("missing %v, want %v", m, missing)
		}
	}
	// A root shell's, a non-root user's, one with only the two the
	// environment reads need (setpriv --inh-caps +sys_ptrace,+dac_read_search).
	f("Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n", 0x1ffffffffff, true, nil)
	f("CapEff:\t0000000000000000\n", 0, true, []string{"CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"})
	f("CapEff:\t0000000000080004\n", 0x80004, true, nil)
	f("CapEff:\t0000000000080000\n", 0x80000, true, []string{"CAP_DAC_READ_SEARCH"})
	f("Name:\tcat\n", 0, false, nil)
	f("CapEff:\tzz\n", 0, false, nil)
}

func TestCheckPrivileges(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	if checkPrivileges(false, []byte("CapEff:\t0\n"), 1000, log) || buf.Len() != 0 {
		t.Errorf("without --process-tree: warned %q", buf.String())
	}
	if !checkPrivileges(true, []byte("CapEff:\t0000000000000000\n"), 1000, log) {
		t.Error("no capabilities: not reported missing")
	}
	if want := `level=WARN msg="--process-tree reads /proc/<pid>/environ of job processes, and the agent lacks CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH`; !strings.Contains(buf.String(), want) {
		t.Errorf("log %q, want %q", buf.String(), want)
	}
	buf.Reset()
	if checkPrivileges(true, []byte("CapEff:\t0000000000080004\n"), 1000, log) || buf.Len() != 0 {
		t.Errorf("with both capabilities: warned %q", buf.String())
	}
}
