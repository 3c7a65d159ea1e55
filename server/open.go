package server

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/tsdb"
	remoteclient "github.com/peakline/peakline/tsdb/remote"
)

// Setup is a configured server: where its jobs live and how it answers.
// serve, the bench and the tests build their servers from it with Open,
// so that they run what serve runs.
type Setup struct {
	// DataDir is the embedded store's directory (serve --data).
	DataDir string
	// Remote, when its URLs are set instead of DataDir, makes the server
	// stateless over a Prometheus-compatible engine
	// (serve --remote-write-url and --remote-query-url).
	Remote tsdb.Remote
	// Store configures the store; Config the server. With DataDir and no
	// Config.SettingsPath the collection policy is DataDir/settings.json.
	Store  tsdb.Options
	Config Config
}

// DefaultDeleteWait is how long a write to a job whose deletion is still
// being removed from disk waits before the answer is 503 with Retry-After
// (tsdb.Options.DeleteWait), unless Setup says otherwise.
const DefaultDeleteWait = 5 * time.Second

// Open opens the store setup names and builds a server over it; Close
// closes both. Errors name the serve flag to change.
func Open(setup Setup, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	remote := setup.Remote.WriteURL != "" || setup.Remote.QueryURL != ""
	switch {
	case remote && setup.DataDir != "":
		return nil, errors.New("--data and --remote-write-url/--remote-query-url: give a store directory or a remote engine, not both")
	case remote && (setup.Remote.WriteURL == "" || setup.Remote.QueryURL == ""):
		return nil, errors.New("--remote-write-url and --remote-query-url: a remote engine needs both (the remote write endpoint and the base of its Prometheus API)")
	case !remote && setup.DataDir == "":
		return nil, errors.New("--data: a store directory is required (or --remote-write-url and --remote-query-url for a remote engine)")
	case remote && setup.Store.Retention > 0:
		return nil, errors.New("--retention: a remote engine keeps what its own retention says (VictoriaMetrics -retentionPeriod, Prometheus --storage.tsdb.retention.time); drop --retention")
	case remote && setup.Config.SettingsPath == "":
		return nil, errors.New("--settings: replicas over a remote engine must share one collection policy; give a file every replica reads and writes (a shared volume)")
	}
	if reg == nil {
		reg = prometheus.NewRegistry() // the store's and the server's metrics, served on /metrics
	}
	if setup.Store.DeleteWait == 0 {
		setup.Store.DeleteWait = DefaultDeleteWait
	}
	var (
		store *tsdb.Store
		err   error
	)
	if remote {
		if store, err = tsdb.OpenRemote(setup.Remote, setup.Store, logger, reg); err != nil {
			switch {
			case errors.Is(err, remoteclient.ErrBadWriteURL):
				return nil, fmt.Errorf("--remote-write-url: %w", err)
			case errors.Is(err, remoteclient.ErrBadQueryURL):
				return nil, fmt.Errorf("--remote-query-url: %w", err)
			}
			return nil, fmt.Errorf("--remote-write-url/--remote-query-url: %w", err)
		}
	} else {
		setup.Store.CacheTTL = 0 // the embedded store sees every write: its cache needs no bound
		if store, err = tsdb.Open(setup.DataDir, setup.Store, logger, reg); err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
		if setup.Config.SettingsPath == "" {
			setup.Config.SettingsPath = filepath.Join(setup.DataDir, "settings.json")
		}
	}
	srv, err := New(setup.Config, store, logger, reg)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	srv.owned = true
	return srv, nil
}

// Store returns the store the server serves.
func (s *Server) Store() *tsdb.Store { return s.store }

// Close closes the store when Open opened it; a server from New leaves
// its store to the caller.
func (s *Server) Close() error {
	if !s.owned {
		return nil
	}
	return s.store.Close()
}
