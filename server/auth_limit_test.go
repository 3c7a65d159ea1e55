package server

import (
	"fmt"
	"testing"
	"time"
)

// The failure limiter holds at most maxClients addresses: addresses whose
// budget is full again are dropped first, then any, and a dropped address
// starts over with a full budget.
func TestAuthFailLimiterBounded(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := newFailLimiter(time.Second, 2, 3)
	for i := range 3 {
		l.fail(fmt.Sprintf("10.0.0.%d", i), now)
	}
	l.fail("10.0.0.0", now) // its budget is spent: it must wait
	if w := l.wait("10.0.0.0", now); w != time.Second {
		t.Fatalf("wait of a spent address = %s, want 1s", w)
	}
	// Two seconds on, 10.0.0.1 and 10.0.0.2 are back at a full budget;
	// 10.0.0.0 has refilled too. A fourth address evicts the full ones.
	later := now.Add(1500 * time.Millisecond)
	l.fail("10.0.0.9", later)
	if len(l.clients) > 3 {
		t.Fatalf("%d addresses held, at most 3", len(l.clients))
	}
	if _, ok := l.clients["10.0.0.9"]; !ok {
		t.Fatal("the new address is not held")
	}
	if _, ok := l.clients["10.0.0.0"]; !ok {
		t.Fatal("the address still short of a full budget was dropped before full ones")
	}
	// Every address spent: a new one still fits, by dropping one.
	for i := range 10 {
		l.fail(fmt.Sprintf("10.0.1.%d", i), later)
		l.fail(fmt.Sprintf("10.0.1.%d", i), later)
		if len(l.clients) > 3 {
			t.Fatalf("%d addresses held, at most 3", len(l.clients))
		}
	}
	if w := l.wait("10.9.9.9", later); w != 0 {
		t.Fatalf("an address never seen waits %s", w)
	}
}
