package main

import "testing"

func TestReattrParseSeconds(t *testing.T) {
	f := func(in string, want int64, wantErr bool) {
		t.Helper()
		got, err := parseSeconds(in)
		if (err != nil) != wantErr || (!wantErr && got != want) {
			t.Fatalf("parseSeconds(%q) = %d, %v; want %d, error %v", in, got, err, want, wantErr)
		}
	}
	f("1796009960.602", 1796009960602, false)
	f("1796009960.6", 1796009960600, false)
	f("1796009960.06", 1796009960060, false)
	f("1796009960", 1796009960000, false)
	f("0.001", 1, false)
	f("1796009960.6021", 0, true)
	f("x.5", 0, true)
	f("1.x", 0, true)
}
