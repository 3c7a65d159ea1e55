package server

import "github.com/labstack/echo/v4"

// PromConfig configures the Prometheus-compatible API.
type PromConfig struct{}

// registerPrometheus adds the Prometheus-compatible API under /prometheus.
func (s *Server) registerPrometheus(e *echo.Echo) error { return nil }
