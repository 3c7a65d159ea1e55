package main

import (
	"bytes"
	"testing"
)

// serve refuses a --max-future-skew that would refuse every live sample
// before it opens the store.
func TestServeMaxFutureSkewFlag(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		var out, errOut bytes.Buffer
		root := rootCommand(&out, &errOut)
		root.SetArgs([]string{"serve", "--data", t.TempDir(), "--max-future-skew", v})
		err := root.Execute()
		if want := "--max-future-skew: must be positive, got " + map[string]string{"0s": "0s", "-1m": "-1m0s"}[v]; err == nil || err.Error() != want {
			t.Fatalf("serve --max-future-skew %s: %v, want %q", v, err, want)
		}
	}
}
