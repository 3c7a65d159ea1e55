package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/downsample"
	"github.com/peakline/peakline/server/graphpayload"
	"github.com/peakline/peakline/tsdb"
)

// errBadRequest marks a request the client must change; the message of a
// badRequestError names the parameter or field.
var errBadRequest = errors.New("bad request")

type badRequestError struct{ msg string }

func (e *badRequestError) Error() string { return e.msg }
func (e *badRequestError) Unwrap() error { return errBadRequest }

func badRequest(format string, args ...any) error {
	return &badRequestError{msg: fmt.Sprintf(format, args...)}
}

// deletePendingRetryAfter is the Retry-After (seconds) of a write refused
// because its job's deletion is still being removed from disk.
const deletePendingRetryAfter = "5"

// engineUnavailableRetryAfter is the Retry-After (seconds) of a request
// that failed because the remote engine stayed unavailable.
const engineUnavailableRetryAfter = "5"

// lowDiskRetryAfter is the Retry-After (seconds) of a write refused
// because the store's disk is below --min-free-disk: writes resume by
// themselves once space is freed.
const lowDiskRetryAfter = "10"

// logUnsoundRetryAfter is the Retry-After (seconds) of a write refused
// after a failed write-ahead log write, and of a read refused while the
// store reopens: writes resume once the store has reopened itself and
// repaired the log, which it does at a write once there is room.
const logUnsoundRetryAfter = "30"

// errorBody is the JSON error envelope of the Peakline API.
type errorBody struct {
	Error string `json:"error"`
}

// statusOf maps an error to the HTTP status the client gets.
func statusOf(err error) int {
	var he *echo.HTTPError
	var pe *promError // Prometheus API errors carry their status (prometheus_error.go)
	switch {
	case errors.As(err, &pe):
		return pe.code
	case errors.As(err, &he):
		return he.Code
	case errors.Is(err, errBadRequest), errors.Is(err, tsdb.ErrInvalid),
		errors.Is(err, graphpayload.ErrPoints), errors.Is(err, downsample.ErrUnknownAlgorithm):
		return http.StatusBadRequest
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBusy):
		return http.StatusTooManyRequests
	case errors.Is(err, errUnsupportedMedia):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, tsdb.ErrJobNotFound), errors.Is(err, errNoSuchRun):
		return http.StatusNotFound
	case errors.Is(err, tsdb.ErrInsufficientStorage):
		return http.StatusInsufficientStorage // with Retry-After: writes resume once space is freed
	case errors.Is(err, tsdb.ErrLogUnsound), errors.Is(err, tsdb.ErrReopening):
		return http.StatusServiceUnavailable // with Retry-After: writes resume once the store has reopened itself
	case errors.Is(err, tsdb.ErrDeletePending):
		return http.StatusServiceUnavailable // with Retry-After, see handleError
	case errors.Is(err, tsdb.ErrEngineUnavailable), errors.Is(err, tsdb.ErrRemoteBudget):
		return http.StatusServiceUnavailable // with Retry-After: the remote engine is down, or other reads hold the budget
	case errors.Is(err, tsdb.ErrEngineFailed), errors.Is(err, tsdb.ErrEngineAnswerTooLarge):
		return http.StatusBadGateway // the engine's fault, or an answer past the limit: not the client's
	case errors.Is(err, tsdb.ErrEngineTimeout):
		return http.StatusGatewayTimeout
	case errors.Is(err, tsdb.ErrEngineRejected):
		return http.StatusBadRequest // the engine's 4xx: its message says why
	case errors.Is(err, tsdb.ErrDeleteUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, context.Canceled):
		return 499 // client closed request
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// handleError is the one place errors become HTTP answers.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	// The Prometheus API answers in its own envelope (prometheus_error.go).
	if s.writePromError(err, c) {
		return
	}
	code := statusOf(err)
	if errors.Is(err, tsdb.ErrDeletePending) {
		c.Response().Header().Set("Retry-After", deletePendingRetryAfter)
	}
	if errors.Is(err, tsdb.ErrEngineUnavailable) || errors.Is(err, tsdb.ErrRemoteBudget) {
		c.Response().Header().Set("Retry-After", engineUnavailableRetryAfter)
	}
	if errors.Is(err, tsdb.ErrInsufficientStorage) {
		c.Response().Header().Set("Retry-After", lowDiskRetryAfter)
	}
	if errors.Is(err, tsdb.ErrLogUnsound) || errors.Is(err, tsdb.ErrReopening) {
		c.Response().Header().Set("Retry-After", logUnsoundRetryAfter)
	}
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg = fmt.Sprint(he.Message)
		if he.Internal != nil {
			msg += ": " + he.Internal.Error()
		}
	}
	if code >= 500 {
		s.logger.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(code)
	} else {
		err = c.JSON(code, errorBody{Error: msg})
	}
	if err != nil {
		s.logger.Warn("write error response", "err", err)
	}
}
