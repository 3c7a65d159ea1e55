package ansible

import (
	"encoding/json"
	"testing"
)

// fastRecord and encoding/json agree on every record fastRecord accepts,
// and fastRecord declines what it does not fully understand.
func TestFastRecordAgreesWithJSON(t *testing.T) {
	f := func(text string, wantFast bool) {
		t.Helper()
		r, ts, v, ok := fastRecord([]byte(text), newInterner())
		if ok != wantFast {
			t.Fatalf("fastRecord(%s) ok=%v, want %v", text, ok, wantFast)
		}
		if !ok {
			return
		}
		var want jsonSeqRecord
		if err := json.Unmarshal([]byte(text), &want); err != nil {
			t.Fatalf("fastRecord accepted %s, encoding/json says %v", text, err)
		}
		if want.Timestamp == nil || *want.Timestamp != ts || want.Value == nil || *want.Value != v || want.TaskName != r.TaskName || want.TaskUUID != r.TaskUUID {
			t.Fatalf("fastRecord(%s) = %+v %v %v, encoding/json %+v", text, r, ts, v, want)
		}
	}
	f(`{"timestamp": 1796009976.2360914, "task_name": "burn some cpu", "task_uuid": "02fc", "value": 93.46744753694286}`, true)
	f(`{"value":1e3,"task_uuid":"u","timestamp":17.5,"task_name":""}`, true)
	f(` { "timestamp" : 0.5 , "value" : -0 } `, true)
	f(`{"timestamp": 1, "task_name": "caf\u00e9", "value": 2}`, false)
	f(`{"timestamp": 1, "task_name": "a\"b", "value": 2}`, false)
	f("{\"timestamp\": 1, \"task_name\": \"\xff\", \"value\": 2}", false)
	f(`{"timestamp": 1, "value": 2, "extra": 3}`, false)
	f(`{"timestamp": 1, "value": 2, "value": 3}`, false)
	f(`{"timestamp": 01, "value": 2}`, false)
	f(`{"timestamp": 1., "value": 2}`, false)
	f(`{"timestamp": NaN, "value": 2}`, false)
	f(`{"timestamp": 1, "value": 2`, false)
	f(`{"timestamp": 1, "value": 2}x`, false)
	f(`{"timestamp": "1", "value": 2}`, false)
	f(`{"timestamp": 1}`, false)
	f(`[1, 2]`, false)
}

func FuzzFastRecord(f *testing.F) {
	f.Add(`{"timestamp": 1796009976.2360914, "task_name": "burn some cpu", "task_uuid": "02fc", "value": 93.4}`)
	f.Add(`{"value":1e3,"task_uuid":"u","timestamp":17.5,"task_name":""}`)
	f.Fuzz(func(t *testing.T, text string) {
		r, ts, v, ok := fastRecord([]byte(text), nil)
		if !ok {
			return
		}
		var want jsonSeqRecord
		if err := json.Unmarshal([]byte(text), &want); err != nil {
			t.Fatalf("fastRecord accepted %q, encoding/json says %v", text, err)
		}
		if want.Timestamp == nil || *want.Timestamp != ts || want.Value == nil || *want.Value != v || want.TaskName != r.TaskName || want.TaskUUID != r.TaskUUID {
			t.Fatalf("fastRecord(%q) = %+v %v %v, encoding/json %+v", text, r, ts, v, want)
		}
	})
}
