package query

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A full set of slots makes the next query wait until one is freed or
// its context ends.
func TestSlots(t *testing.T) {
	s := newSlots(1)
	if s.GetMaxConcurrent() != 1 {
		t.Fatalf("max concurrent %d", s.GetMaxConcurrent())
	}
	i, err := s.Insert(context.Background(), "q1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Insert(ctx, "q2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second query while full: %v", err)
	}
	freed := make(chan struct{})
	go func() {
		defer close(freed)
		if _, err := s.Insert(context.Background(), "q3"); err != nil {
			t.Error(err)
		}
	}()
	s.Delete(i)
	<-freed
}
