package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/peakline/peakline/server"
)

// childEnv makes the test binary act as the peakline binary: the bench
// starts `peakline serve` and `peakline bench graph-once` by running its
// own executable, which under go test is this binary.
const childEnv = "PEAKLINE_BENCH_TEST_CHILD"

// profileEnv names a directory where each serve child writes a CPU
// profile of its whole life (serve-PID.pprof), to profile the server
// under a real bench run:
//
//	go test -c -o /tmp/bench.test ./bench/
//	PEAKLINE_BENCH_TEST_CHILD=1 PEAKLINE_BENCH_CPU_PROFILES=/tmp/prof /tmp/bench.test bench ingest --peers ""
const profileEnv = "PEAKLINE_BENCH_CPU_PROFILES"

func startCPUProfile(dir string) (stop func(), err error) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("serve-%d.pprof", os.Getpid())))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild(os.Args[1:]))
	}
	os.Setenv(childEnv, "1")
	os.Exit(m.Run())
}

// runChild is a minimal peakline root command: serve (built by
// server.Open, as main.go builds it, on --data or a remote engine) and
// bench.
func runChild(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{Use: "peakline", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().String("log-level", "info", "")
	var (
		listen string
		setup  server.Setup
	)
	serve := &cobra.Command{Use: "serve", RunE: func(cmd *cobra.Command, _ []string) error {
		if dir := os.Getenv(profileEnv); dir != "" {
			stop, err := startCPUProfile(dir)
			if err != nil {
				return err
			}
			defer stop()
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		srv, err := server.Open(setup, nil, reg)
		if err != nil {
			return err
		}
		defer srv.Close()
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return err
		}
		return srv.Serve(cmd.Context(), ln)
	}}
	serve.Flags().StringVar(&setup.DataDir, "data", "", "")
	serve.Flags().StringVar(&setup.Remote.WriteURL, "remote-write-url", "", "")
	serve.Flags().StringVar(&setup.Remote.QueryURL, "remote-query-url", "", "")
	serve.Flags().StringVar(&setup.Config.SettingsPath, "settings", "", "")
	serve.Flags().DurationVar(&setup.Store.CacheTTL, "remote-cache-ttl", 0, "")
	serve.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "")
	root.AddCommand(serve, Command())
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "peakline (test child):", err)
		return 1
	}
	return 0
}
