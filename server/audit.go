package server

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// maxAuditTarget bounds the target written to an audit line.
const maxAuditTarget = 256

// audit logs every request on an admin route (deletes, policy changes) as
// one "audit" line and counts it by outcome, whether it was done, denied
// or refused. It runs outside authentication so that denials are seen.
// Only routes registered for the request's method are audited, so that a
// made-up method or a 405 cannot add lines or metric series of its own.
// The line is written whatever --log-level says.
func (s *Server) audit(rules []scopeRule) echo.MiddlewareFunc {
	var (
		once       sync.Once
		registered map[string]bool // "METHOD route"
	)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			route := c.Path()
			once.Do(func() {
				registered = map[string]bool{}
				for _, rt := range s.echo.Routes() {
					registered[rt.Method+" "+rt.Path] = true
				}
			})
			if route == "" || !registered[r.Method+" "+route] || scopeOf(rules, r.Method, route) != scopeAdmin {
				return next(c)
			}
			err := next(c)
			code := c.Response().Status
			if err != nil {
				code = statusOf(err)
			}
			outcome := "ok"
			switch {
			case code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusTooManyRequests:
				outcome = "denied"
			case code >= 500:
				outcome = "error"
			case code >= 400:
				outcome = "refused"
			}
			action := r.Method + " " + route
			s.sec.adminActions.WithLabelValues(action, outcome).Inc()
			target := auditTarget(c)
			if len(target) > maxAuditTarget {
				target = target[:maxAuditTarget] + "…"
			}
			rec := slog.NewRecord(time.Now(), slog.LevelInfo, "audit", 0)
			rec.AddAttrs(
				slog.String("action", action),
				slog.String("who", whoOf(c)),
				slog.String("target", target),
				slog.String("remote", clientAddr(r)),
				slog.String("outcome", outcome),
				slog.Int("code", code))
			// Handle, not Log: the handler's level (--log-level) must not
			// drop an audit line.
			_ = s.logger.Handler().Handle(r.Context(), rec)
			return err
		}
	}
}

// auditTarget is what an admin request acts on: its decoded path
// parameters (the job or template id), else its path.
func auditTarget(c echo.Context) string {
	names := c.ParamNames()
	if len(names) == 0 {
		return c.Request().URL.Path
	}
	v, err := pathParam(c, names[0])
	if err != nil {
		return c.Param(names[0])
	}
	return v
}
