package server

// What the external tests of the read pool see of it.

const (
	HistoryTaskRunBytes = historyTaskRunBytes
	ReadSampleBytes     = readSampleBytes
	ReadTaskBytes       = readTaskBytes
	ListSpanBytes       = listSpanBytes
	ListJobBytes        = listJobBytes
)

// HoldReads takes n bytes of the read pool as reads being served would;
// false when they are not free.
func (s *Server) HoldReads(n int64) bool { return s.reads.sem.TryAcquire(n) }

// FreeReads gives back n bytes taken by HoldReads.
func (s *Server) FreeReads(n int64) { s.reads.sem.Release(n) }

// ReadsReserved is the bytes the reads being served reserve now.
func (s *Server) ReadsReserved() int64 { return s.reads.reserved.Load() }
