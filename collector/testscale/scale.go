// Package testscale stretches the deadlines of tests that run real
// processes and kernels by PEAKLINE_TEST_TIME_SCALE. It is imported by
// tests only; it owns no clock and no waiting.
package testscale

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Scaled stretches a test's deadline d by PEAKLINE_TEST_TIME_SCALE (a
// number of at least 1; 1 when unset): under emulation (make test-v2
// boots a cgroup v2 kernel in qemu without KVM) the same work takes 2 to
// 20 times as long as on the host. A bad value fails the test.
func Scaled(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv("PEAKLINE_TEST_TIME_SCALE")
	if s == "" {
		return d
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 1 {
		t.Fatalf("PEAKLINE_TEST_TIME_SCALE=%q: want a number of at least 1", s)
	}
	return time.Duration(float64(d) * f)
}
