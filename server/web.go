package server

import "github.com/labstack/echo/v4"

// registerWeb adds the web page routes.
func (s *Server) registerWeb(e *echo.Echo) {}
