package server

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Sizes of the structs prompb.WriteRequest.Unmarshal makes per element.
// Repeated fields grow by append, which allocates the slots several
// times over on the way (about 1/(1-1/1.25) = 5 times for long slices,
// 2 for short ones, plus the spare capacity of the last): slotGrowth is
// the factor counted.
const (
	sizeTimeSeries = int64(unsafe.Sizeof(prompb.TimeSeries{}))
	sizeMetadata   = int64(unsafe.Sizeof(prompb.MetricMetadata{}))
	sizeLabel      = int64(unsafe.Sizeof(prompb.Label{}))
	sizeSample     = int64(unsafe.Sizeof(prompb.Sample{}))
	sizeExemplar   = int64(unsafe.Sizeof(prompb.Exemplar{}))
	sizeHistogram  = int64(unsafe.Sizeof(prompb.Histogram{}))
	sizeBucketSpan = int64(unsafe.Sizeof(prompb.BucketSpan{}))
	slotGrowth     = 6
)

// writeRequestMemory estimates, from the wire format alone, the bytes
// that unmarshalling buf as a prompb.WriteRequest allocates: the struct
// slots of every repeated element, the copies of strings and unknown
// fields (at most twice buf), and per histogram its packed buckets (at
// most 8 bytes per wire byte, twice over). It walks buf without
// allocating, and fails on what is not protobuf.
func writeRequestMemory(buf []byte) (int64, error) {
	held := 2 * int64(len(buf))
	err := walkFields(buf, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			held += slotGrowth * sizeTimeSeries
			n, err := timeSeriesMemory(v)
			held += n
			return err
		case num == 3 && typ == protowire.BytesType:
			held += slotGrowth * sizeMetadata
		}
		return nil
	})
	return held, err
}

func timeSeriesMemory(buf []byte) (int64, error) {
	var held int64
	err := walkFields(buf, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			held += slotGrowth * sizeLabel
		case 2:
			held += slotGrowth * sizeSample
		case 3:
			held += slotGrowth * sizeExemplar
			return walkFields(v, func(num protowire.Number, typ protowire.Type, _ []byte) error {
				if num == 1 && typ == protowire.BytesType {
					held += slotGrowth * sizeLabel
				}
				return nil
			})
		case 4:
			held += slotGrowth * sizeHistogram
			return walkFields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 8 || num == 11: // negative and positive spans
					held += slotGrowth * sizeBucketSpan
				case typ == protowire.BytesType: // packed deltas, counts, custom values
					held += 2 * 8 * int64(len(v))
				default: // one element of an unpacked list, or a oneof wrapper
					held += 2 * 16
				}
				return nil
			})
		}
		return nil
	})
	return held, err
}

var errBadWire = errors.New("bad protobuf wire format")

// walkFields calls f with each field of the protobuf message buf; v is
// the field's bytes for length-delimited fields, nil otherwise.
func walkFields(buf []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(buf) > 0 {
		num, typ, n := protowire.ConsumeTag(buf)
		if n < 0 {
			return fmt.Errorf("%w: %v", errBadWire, protowire.ParseError(n))
		}
		buf = buf[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(buf)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, buf)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errBadWire, num, protowire.ParseError(n))
		}
		buf = buf[n:]
		if err := f(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}
