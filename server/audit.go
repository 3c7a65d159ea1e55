package server

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// audit logs every request on an admin route (deletes, policy changes) as
// one "audit" line and counts it by outcome, whether it was done, denied
// or refused. It runs outside authentication so that denials are seen.
func (s *Server) audit(rules []scopeRule) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			route := c.Path()
			if route == "" || scopeOf(rules, r.Method, route) != scopeAdmin {
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
			s.logger.LogAttrs(r.Context(), slog.LevelInfo, "audit",
				slog.String("action", action),
				slog.String("who", whoOf(c)),
				slog.String("target", auditTarget(c)),
				slog.String("remote", clientAddr(r)),
				slog.String("outcome", outcome),
				slog.Int("code", code))
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
