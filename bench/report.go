package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Measurement is one figure of a run next to the same figure of its peer,
// measured in the same run. Speedup is the peer's cost over Peakline's
// (peer time / Peakline time, or Peakline throughput / peer throughput):
// above 1 Peakline is better. Figures without a peer (RSS of the server
// under soak) have an empty Peer and NaN PeerValue and Speedup, written
// as null in JSON.
type Measurement struct {
	Workload  string  `json:"workload"`
	Subject   string  `json:"subject"`
	Peer      string  `json:"peer"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit"`
	Value     float64 `json:"value"`
	PeerValue float64 `json:"peer_value"`
	Speedup   float64 `json:"speedup"`
}

// MarshalJSON writes NaN and infinite figures as null.
func (m Measurement) MarshalJSON() ([]byte, error) {
	type plain struct {
		Workload  string   `json:"workload"`
		Subject   string   `json:"subject"`
		Peer      string   `json:"peer"`
		Metric    string   `json:"metric"`
		Unit      string   `json:"unit"`
		Value     *float64 `json:"value"`
		PeerValue *float64 `json:"peer_value"`
		Speedup   *float64 `json:"speedup"`
	}
	fin := func(f float64) *float64 {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return &f
	}
	return json.Marshal(plain{m.Workload, m.Subject, m.Peer, m.Metric, m.Unit, fin(m.Value), fin(m.PeerValue), fin(m.Speedup)})
}

// cost records a figure where lower is better (time, bytes, error).
func cost(workload, subject, peer, metric, unit string, value, peerValue float64) Measurement {
	return Measurement{workload, subject, peer, metric, unit, value, peerValue, ratio(peerValue, value)}
}

// gain records a figure where higher is better (throughput).
func gain(workload, subject, peer, metric, unit string, value, peerValue float64) Measurement {
	return Measurement{workload, subject, peer, metric, unit, value, peerValue, ratio(value, peerValue)}
}

// alone records a figure with no peer.
func alone(workload, subject, metric, unit string, value float64) Measurement {
	return Measurement{workload, subject, "", metric, unit, value, math.NaN(), math.NaN()}
}

// ratio is a/b, NaN when undefined (either NaN, b zero, both zero).
func ratio(a, b float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.NaN()
	case a == 0 && b == 0:
		return 1
	case b == 0:
		return math.Inf(1)
	}
	return a / b
}

// Report is what one bench subcommand found.
type Report struct {
	Title        string
	Measurements []Measurement
	Notes        []string // printed under the tables
	Charts       []Chart  // written by --svg
}

// Add appends measurements.
func (r *Report) Add(ms ...Measurement) { r.Measurements = append(r.Measurements, ms...) }

// Note adds a line printed under the tables.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// WriteTable prints one table per metric, workloads as rows, in the order
// the metrics were first measured.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "## %s\n", r.Title)
	var order []string
	groups := map[string][]Measurement{}
	for _, m := range r.Measurements {
		if _, ok := groups[m.Metric]; !ok {
			order = append(order, m.Metric)
		}
		groups[m.Metric] = append(groups[m.Metric], m)
	}
	for _, metric := range order {
		ms := groups[metric]
		unit := ms[0].Unit
		fmt.Fprintf(bw, "\n%s (%s)\n", metric, unit)
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "workload\tsubject\tvalue\tpeer\tpeer value\tspeedup\t")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Workload, m.Subject, formatValue(m.Value), m.Peer, formatValue(m.PeerValue), formatSpeedup(m.Speedup))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(bw)
		for _, n := range r.Notes {
			fmt.Fprintf(bw, "- %s\n", n)
		}
	}
	return bw.Flush()
}

// formatValue prints a figure with about four significant digits.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 0):
		return "inf"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1e7 || math.Abs(v) < 1e-3:
		return strconv.FormatFloat(v, 'e', 3, 64)
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func formatSpeedup(s float64) string {
	switch {
	case math.IsNaN(s):
		return "-"
	case math.IsInf(s, 0):
		return "inf"
	}
	return strconv.FormatFloat(s, 'f', 2, 64) + "x"
}

// WriteJSON writes the measurements as a JSON array, one object each.
func (r *Report) WriteJSON(w io.Writer) error {
	ms := r.Measurements
	if ms == nil {
		ms = []Measurement{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(ms)
}

// writeFiles writes --json and --svg if asked for.
func (r *Report) writeFiles(jsonPath, svgPath string) error {
	write := func(path string, f func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(out); err != nil {
			out.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return out.Close()
	}
	if err := write(jsonPath, r.WriteJSON); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := write(svgPath, func(w io.Writer) error { return WriteSVG(w, r.Title, r.Charts) }); err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	return nil
}

// Machine describes the machine a run is on: cores, memory, CPU model.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB RAM", kb/(1<<20))
				}
			}
		}
	}
	nproc := strconv.Itoa(runtime.NumCPU())
	if out, err := exec.Command("nproc").Output(); err == nil {
		nproc = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s cores (nproc), %s, %s, %s %s/%s", nproc, mem, model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
