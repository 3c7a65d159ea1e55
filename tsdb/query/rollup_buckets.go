package query

// histogram_over_time and count_values_over_time answer a series per
// bucket or value, which only the samples decide. A function over a range
// vector answers one sample per series and step, so each is two
// functions: the inner one (registered under the MetricsQL name) counts
// the window's samples per bucket or value and answers them as one float
// histogram with custom bounds, the bucket indexes or the values; the
// outer one (vm_buckets, vm_values) turns each histogram into a series per
// non-empty bucket, labelled as VictoriaMetrics labels it.

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// VictoriaMetrics' histogram buckets: 18 per power of ten from 1e-9 to
// 1e18, each (lower, upper], plus one below and one above.
const (
	vmE10Min          = -9
	vmE10Max          = 18
	vmBucketsPerPow10 = 18
	vmBuckets         = (vmE10Max - vmE10Min) * vmBucketsPerPow10
	vmBucketLower     = -1        // index of (0, 1e-9] and of 0
	vmBucketUpper     = vmBuckets // index of (1e18, +Inf)
)

// vmRanges are the vmrange labels of the buckets, by index.
var vmRanges = func() []string {
	out := make([]string, vmBuckets)
	mult := math.Pow(10, 1.0/vmBucketsPerPow10)
	v := math.Pow10(vmE10Min)
	lo := fmt.Sprintf("%.3e", v)
	for i := range out {
		v *= mult
		hi := fmt.Sprintf("%.3e", v)
		out[i] = lo + "..." + hi
		lo = hi
	}
	return out
}()

// vmBucket is the index of v's bucket; false for negative values and
// NaN, which VictoriaMetrics leaves out.
func vmBucket(v float64) (int, bool) {
	if math.IsNaN(v) || v < 0 {
		return 0, false
	}
	idx := (math.Log10(v) - vmE10Min) * vmBucketsPerPow10
	switch {
	case idx < 0:
		return vmBucketLower, true
	case idx >= vmBuckets:
		return vmBucketUpper, true
	}
	i := int(idx)
	if float64(i) == idx && i > 0 {
		// A power of ten belongs to the bucket it closes.
		i--
	}
	return i, true
}

func vmRange(idx int) string {
	switch idx {
	case vmBucketLower:
		return fmt.Sprintf("0...%.3e", math.Pow10(vmE10Min))
	case vmBucketUpper:
		return fmt.Sprintf("%.3e...+Inf", math.Pow10(vmE10Max))
	}
	return vmRanges[idx]
}

func init() {
	inner := map[string]func(vs []float64) map[float64]float64{
		"histogram_over_time": func(vs []float64) map[float64]float64 {
			counts := map[float64]float64{}
			for _, v := range vs {
				if idx, ok := vmBucket(v); ok {
					counts[float64(idx)]++
				}
			}
			return counts
		},
		"count_values_over_time": func(vs []float64) map[float64]float64 {
			counts := map[float64]float64{}
			for _, v := range vs {
				counts[v]++
			}
			return counts
		},
	}
	for name, count := range inner {
		parser.Functions[name] = &parser.Function{Name: name, ArgTypes: []parser.ValueType{parser.ValueTypeMatrix}, ReturnType: parser.ValueTypeVector}
		promql.FunctionCalls[name] = countsCall(count)
	}
	parser.Functions["vm_buckets"] = &parser.Function{Name: "vm_buckets", ArgTypes: []parser.ValueType{parser.ValueTypeVector}, ReturnType: parser.ValueTypeVector}
	promql.FunctionCalls["vm_buckets"] = expandCall(func(args parser.Expressions) (string, func(float64) string) {
		return "vmrange", func(k float64) string { return vmRange(int(k)) }
	})
	parser.Functions["vm_values"] = &parser.Function{Name: "vm_values", ArgTypes: []parser.ValueType{parser.ValueTypeVector, parser.ValueTypeString}, ReturnType: parser.ValueTypeVector}
	promql.FunctionCalls["vm_values"] = expandCall(func(args parser.Expressions) (string, func(float64) string) {
		return args[1].(*parser.StringLiteral).Val, func(k float64) string { return strconv.FormatFloat(k, 'g', -1, 64) }
	})
}

// countsCall is the inner function: the counts per key of the window's
// samples, as a float histogram whose custom bounds are the keys.
func countsCall(count func(vs []float64) map[float64]float64) promql.FunctionCall {
	return func(_ []promql.Vector, m promql.Matrix, _ parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		if len(m) == 0 || len(m[0].Floats) == 0 {
			return enh.Out, nil
		}
		vs := make([]float64, len(m[0].Floats))
		for i, p := range m[0].Floats {
			vs[i] = p.F
		}
		counts := count(vs)
		if len(counts) == 0 {
			return enh.Out, nil
		}
		keys := make([]float64, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h := &histogram.FloatHistogram{
			Schema:          histogram.CustomBucketsSchema,
			CustomValues:    keys,
			PositiveSpans:   []histogram.Span{{Length: uint32(len(keys))}},
			PositiveBuckets: make([]float64, len(keys)),
		}
		for i, k := range keys {
			h.PositiveBuckets[i] = counts[k]
			h.Count += counts[k]
		}
		return append(enh.Out, promql.Sample{H: h}), nil
	}
}

// expandCall is the outer function: a sample per key of each histogram
// of countsCall, with the label the key names.
func expandCall(label func(args parser.Expressions) (string, func(float64) string)) promql.FunctionCall {
	return func(vals []promql.Vector, _ promql.Matrix, args parser.Expressions, enh *promql.EvalNodeHelper) (promql.Vector, annotations.Annotations) {
		name, format := label(args)
		for _, s := range vals[0] {
			if s.H == nil || !s.H.UsesCustomBuckets() {
				continue
			}
			for i, k := range s.H.CustomValues {
				if i >= len(s.H.PositiveBuckets) || s.H.PositiveBuckets[i] == 0 {
					continue
				}
				b := labels.NewBuilder(s.Metric)
				b.Set(name, format(k))
				enh.Out = append(enh.Out, promql.Sample{Metric: b.Labels(), F: s.H.PositiveBuckets[i]})
			}
		}
		return enh.Out, nil
	}
}
