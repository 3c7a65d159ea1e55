package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/query"
)

// promError is an error of the Prometheus-compatible query API: handleError
// answers it in the Prometheus envelope
// {"status":"error","errorType":…,"error":…} instead of Peakline's.
type promError struct {
	typ  query.ErrorType
	code int
	err  error
}

func (e *promError) Error() string { return e.err.Error() }
func (e *promError) Unwrap() error { return e.err }

// statusClientClosed is what Prometheus answers a canceled query with.
const statusClientClosed = 499

// errUnavailable is Prometheus' error type of a query whose storage
// (here the remote engine) cannot be reached; the answer is 503.
const errUnavailable query.ErrorType = "unavailable"

// promStatus is the HTTP status of each error type, as in Prometheus.
var promStatus = map[query.ErrorType]int{
	query.ErrBadData:   http.StatusBadRequest,
	query.ErrExecution: http.StatusUnprocessableEntity,
	query.ErrTimeout:   http.StatusServiceUnavailable,
	query.ErrCanceled:  statusClientClosed,
	query.ErrInternal:  http.StatusInternalServerError,
}

// promErr classifies any error of a Prometheus API handler.
func promErr(err error) error {
	var (
		pe *promError
		qe *query.Error
		he *echo.HTTPError
	)
	typ := query.ErrInternal
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, tsdb.ErrEngineUnavailable), errors.Is(err, tsdb.ErrRemoteBudget), errors.Is(err, tsdb.ErrReopening):
		// As Prometheus answers a query its storage cannot serve now;
		// writePromError adds Retry-After.
		return &promError{typ: errUnavailable, code: http.StatusServiceUnavailable, err: err}
	case errors.Is(err, tsdb.ErrEngineFailed), errors.Is(err, tsdb.ErrEngineAnswerTooLarge):
		return &promError{typ: query.ErrInternal, code: http.StatusBadGateway, err: err}
	case errors.Is(err, tsdb.ErrEngineTimeout):
		return &promError{typ: query.ErrTimeout, code: http.StatusGatewayTimeout, err: err}
	case errors.Is(err, tsdb.ErrEngineRejected):
		return &promError{typ: query.ErrBadData, code: http.StatusBadRequest, err: err}
	case errors.As(err, &qe):
		typ = qe.Type
	case errors.As(err, &he):
		// The body limit and the like: keep their status.
		return &promError{typ: query.ErrBadData, code: he.Code, err: fmt.Errorf("%v", he.Message)}
	case errors.Is(err, context.Canceled):
		typ = query.ErrCanceled
	case errors.Is(err, context.DeadlineExceeded):
		typ = query.ErrTimeout
	}
	return &promError{typ: typ, code: promStatus[typ], err: err}
}

// promBadData is a bad_data error naming the parameter.
func promBadData(param string, err error) error {
	return promBadRequest(fmt.Errorf("invalid parameter %q: %w", param, err))
}

// promBadRequest is a bad_data error (400) with err's message as it is.
func promBadRequest(err error) error {
	return &promError{typ: query.ErrBadData, code: http.StatusBadRequest, err: err}
}

// promErrorBody is the Prometheus error envelope.
type promErrorBody struct {
	Status    string          `json:"status"`
	ErrorType query.ErrorType `json:"errorType"`
	Error     string          `json:"error"`
}

// writePromError answers a promError; it reports false for other errors.
// Called by handleError only.
func (s *Server) writePromError(err error, c echo.Context) bool {
	var pe *promError
	if !errors.As(err, &pe) {
		return false
	}
	if pe.typ == errUnavailable {
		c.Response().Header().Set("Retry-After", engineUnavailableRetryAfter)
	}
	if pe.code >= 500 {
		s.logger.Error("prometheus api request failed", "path", c.Path(), "type", pe.typ, "err", pe.err)
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(pe.code)
	} else {
		err = c.JSON(pe.code, promErrorBody{Status: "error", ErrorType: pe.typ, Error: pe.err.Error()})
	}
	if err != nil {
		s.logger.Warn("write error response", "err", err)
	}
	return true
}
