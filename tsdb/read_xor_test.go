package tsdb

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/peakline/peakline/bench/workload"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
)

// iterSamples decodes a chunk with the TSDB's own iterator.
func iterSamples(t *testing.T, c chunkenc.Chunk) ([]int64, []uint64) {
	t.Helper()
	var ts []int64
	var vs []uint64
	it := c.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		tt, v := it.At()
		ts = append(ts, tt)
		vs = append(vs, math.Float64bits(v))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return ts, vs
}

// checkDecodeXOR decodes b with decodeXOR and with the TSDB's iterator
// and compares times and value bits exactly.
func checkDecodeXOR(t *testing.T, name string, b []byte) {
	t.Helper()
	c, err := chunkenc.FromData(chunkenc.EncXOR, b)
	if err != nil {
		t.Fatal(err)
	}
	wantTs, wantVs := iterSamples(t, c)
	n := xorSamples(b)
	if n != len(wantTs) {
		t.Fatalf("%s: header says %d samples, iterator gives %d", name, n, len(wantTs))
	}
	ts, vs := make([]int64, n+1), make([]float64, n+1) // one spare slot stays untouched
	ts[n], vs[n] = -7, -7
	k, err := decodeXOR(b, ts, vs)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if k != n || ts[n] != -7 || vs[n] != -7 {
		t.Fatalf("%s: decoded %d of %d samples, spare slot %d %v", name, k, n, ts[n], vs[n])
	}
	for i := range n {
		if ts[i] != wantTs[i] || math.Float64bits(vs[i]) != wantVs[i] {
			t.Fatalf("%s: sample %d is %d %#x, want %d %#x", name, i, ts[i], math.Float64bits(vs[i]), wantTs[i], wantVs[i])
		}
	}
}

// TestDecodeXORMatchesIterator compares decodeXOR with the TSDB's XOR
// iterator, bit for bit, on chunks built by the TSDB's own appender from
// random samples chosen to hit every timestamp bucket (at and past its
// edges) and every value case: equal, within the window, a new window,
// 64 meaningful bits, NaN, infinities, signed zeros.
func TestDecodeXORMatchesIterator(t *testing.T) {
	// Delta-of-delta edges of the 14, 17 and 20 bit buckets.
	edges := []int64{0, 1, -1, 8191, -8191, 8192, -8192, 8193, 65535, -65535, 65536, -65536, 65537,
		524287, -524287, 524288, -524288, 524289, 1 << 40, -(1 << 40), math.MaxInt32}
	values := []float64{0, math.Copysign(0, -1), 1, -1, math.NaN(), math.Inf(1), math.Inf(-1),
		math.MaxFloat64, math.SmallestNonzeroFloat64, 1.5, 1.5000000001, 12.345}
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 14))
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(300)
		if seed < 3 {
			n = seed + 1 // one, two and three samples
		}
		t0 := rng.Int64N(1<<42) - 1<<41
		delta := rng.Int64N(1000)
		v := rng.NormFloat64()
		for range n {
			app.Append(0, t0, v)
			switch rng.IntN(4) {
			case 0:
				delta += edges[rng.IntN(len(edges))]
			case 1:
				delta += rng.Int64N(41) - 20
			}
			t0 += delta
			switch rng.IntN(6) {
			case 0: // unchanged
			case 1:
				v = values[rng.IntN(len(values))]
			case 2:
				v = math.Float64frombits(rng.Uint64())
			case 3:
				v = math.Float64frombits(math.Float64bits(v) ^ 1<<rng.IntN(64))
			default:
				v = math.Round(rng.Float64()*100000) / 1000
			}
		}
		checkDecodeXOR(t, fmt.Sprintf("seed %d, %d samples", seed, n), c.Bytes())
	}
}

// TestDecodeXORRealChunks compares decodeXOR with the TSDB's iterator on
// every float chunk of a synthetic Ansible job written through the store
// and compacted into blocks.
func TestDecodeXORRealChunks(t *testing.T) {
	ctx := context.Background()
	job := workload.AnsibleJob("real", workload.JobSpec{Tasks: 20, SamplesPerResource: 20_000, StartMs: workload.Start}, 1)
	jobEnd := time.UnixMilli(job.LastEventMs)
	s, err := Open(t.TempDir(), Options{CacheSamples: -1, Now: func() time.Time { return jobEnd }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, workloadBatch(job)); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := s.chunkQuerier(minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, LabelJob, "real"))
	chunks, samples := 0, 0
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() {
			m := it.At()
			if m.Chunk.Encoding() != chunkenc.EncXOR {
				continue
			}
			checkDecodeXOR(t, fmt.Sprintf("%s chunk %d", set.At().Labels(), chunks), m.Chunk.Bytes())
			chunks++
			samples += m.Chunk.NumSamples()
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	// Three resources of 20,000 samples each, plus task and event records.
	if samples < 3*20_000 || chunks < 3*20_000/120 {
		t.Fatalf("compared %d samples in %d chunks, want the job's 60,000 samples at least", samples, chunks)
	}
}

// TestDecodeXORTruncated cuts a chunk at every byte: decodeXOR reports
// an error (the last byte holds at least one bit of the last sample) and
// never reads past the bytes it is given.
func TestDecodeXORTruncated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		app.Append(0, int64(i*250+rng.IntN(7)), rng.Float64())
	}
	full := c.Bytes()
	ts, vs := make([]int64, 50), make([]float64, 50)
	if k, err := decodeXOR(full, ts, vs); err != nil || k != 50 {
		t.Fatalf("whole chunk: %d samples, %v", k, err)
	}
	for cut := range len(full) {
		b := append([]byte(nil), full[:cut]...)
		if cut >= 2 {
			b[0], b[1] = full[0], full[1] // the header still claims 50
		}
		k, err := decodeXOR(b, ts, vs)
		if cut < 2 && err == nil {
			t.Fatalf("cut at %d: no error for a chunk without header", cut)
		}
		if cut >= 2 && err == nil {
			t.Fatalf("cut at %d of %d bytes: decoded %d samples without error", cut, len(full), k)
		}
	}
	if _, err := decodeXOR(full, ts[:49], vs[:49]); err == nil {
		t.Fatal("decoded 50 samples into 49 slots without error")
	}
}

// BenchmarkDecodeXOR decodes the float chunks of a synthetic Ansible job
// (3 × 100,000 samples) with decodeXOR and with the TSDB's iterator:
//
//	go test -run '^$' -bench BenchmarkDecodeXOR ./tsdb/
func BenchmarkDecodeXOR(b *testing.B) {
	job := workload.AnsibleJob("bench", workload.JobSpec{Tasks: 200, SamplesPerResource: 100_000, StartMs: workload.Start}, 1)
	var chks [][]byte
	total := 0
	for _, s := range job.Series {
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			b.Fatal(err)
		}
		for i := range s.Ts {
			if c.NumSamples() == 120 {
				chks = append(chks, c.Bytes())
				c = chunkenc.NewXORChunk()
				if app, err = c.Appender(); err != nil {
					b.Fatal(err)
				}
			}
			app.Append(0, s.Ts[i], s.Vs[i])
		}
		chks = append(chks, c.Bytes())
		total += len(s.Ts)
	}
	ts, vs := make([]int64, 120), make([]float64, 120)
	b.Run("decodeXOR", func(b *testing.B) {
		for b.Loop() {
			for _, c := range chks {
				if _, err := decodeXOR(c, ts, vs); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/sample")
	})
	b.Run("chunkenc-iterator", func(b *testing.B) {
		var it chunkenc.Iterator
		c := chunkenc.NewXORChunk()
		for b.Loop() {
			for _, data := range chks {
				c.Reset(data)
				it = c.Iterator(it)
				k := 0
				for it.Next() == chunkenc.ValFloat {
					ts[k], vs[k] = it.At()
					k++
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/sample")
	})
}

// TestDecodeRunSkipsNonFinite decodes one series of XOR chunks holding
// NaN, infinities and a time going back, once through decodeXOR (the
// chunks as the TSDB hands them) and once through the iterator (the
// same chunks behind a wrapper type), and checks that both give the
// same slot: non-finite samples dropped, the rest in chunk order.
func TestDecodeRunSkipsNonFinite(t *testing.T) {
	mk := func(ts []int64, vs []float64) *chunkenc.XORChunk {
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			app.Append(0, ts[i], vs[i])
		}
		return c
	}
	c1 := mk([]int64{1, 2, 3, 4, 5}, []float64{10, 20, math.NaN(), 40, math.Inf(1)})
	c2 := mk([]int64{6, 4, 7}, []float64{60, 41, math.Inf(-1)})
	wantTs, wantVs := []int64{1, 2, 4, 6, 4}, []float64{10, 20, 40, 60, 41}
	for _, viaIterator := range []bool{false, true} {
		r := &seriesRun{size: 8}
		for _, c := range []chunkenc.Chunk{c1, c2} {
			if viaIterator {
				c = countedChunk{c, c.NumSamples()}
			}
			r.chunks = append(r.chunks, chunks.Meta{Chunk: c})
		}
		r.dstTs, r.dstVs = make([]int64, r.size), make([]float64, r.size)
		r.decode(nil)
		if r.err != nil {
			t.Fatal(r.err)
		}
		gotTs, gotVs := r.dstTs[:r.n], r.dstVs[:r.n]
		if !slices.Equal(gotTs, wantTs) || !slices.Equal(gotVs, wantVs) || r.ordered || r.firstMs != 1 || r.lastMs != 6 || len(r.extraTs) != 0 {
			t.Fatalf("iterator %v: slot %v %v, ordered %v, first %d, last %d, extra %v; want %v %v, unordered, 1, 6",
				viaIterator, gotTs, gotVs, r.ordered, r.firstMs, r.lastMs, r.extraTs, wantTs, wantVs)
		}
	}
}
