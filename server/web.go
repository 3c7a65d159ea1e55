package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/web"
)

// webFile is one embedded UI file, read once at start.
type webFile struct {
	name        string
	body        []byte
	etag        string // weak (gzip may re-encode the body), from the content
	contentType string
}

// Every UI answer is "no-cache" with an ETag of its content: the browser
// keeps the file but asks each time, and gets a bodiless 304 while the
// binary is the same. Long max-ages would need versioned asset names (the
// pages load their scripts as ES modules by fixed relative names), and a
// page of one release running a script of another is worse than a few
// 304s on a handful of small files.
const webCacheControl = "no-cache"

// webCSP allows only the server's own scripts, styles and API: the page
// runs no inline code and loads nothing from elsewhere.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// registerWeb adds the web page routes: GET / (the jobs), GET /jobs/{job}
// (one job's graph; the page reads the id from its own URL, so the HTML is
// the same for every job), GET /templates/{id} (a job template's runs,
// the same way) and GET /static/* (scripts and styles).
func (s *Server) registerWeb(e *echo.Echo) {
	files, err := loadWebFiles(web.Static())
	if err != nil {
		// The files are embedded in the binary: failing here is a build fault.
		panic(fmt.Sprintf("load embedded web files: %v", err))
	}
	page := func(name string) echo.HandlerFunc {
		f := files[name]
		return func(c echo.Context) error { return serveWebFile(c, f) }
	}
	methods := []string{http.MethodGet, http.MethodHead}
	e.Match(methods, "/", page(web.JobsPage))
	e.Match(methods, "/jobs/:job", page(web.JobPage))
	e.Match(methods, "/templates/:template", page(web.TemplatePage))
	e.Match(methods, "/static/*", func(c echo.Context) error {
		f, ok := files[c.Param("*")]
		if !ok {
			return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no such file: /static/%s", c.Param("*")))
		}
		return serveWebFile(c, f)
	})
}

// loadWebFiles reads every file of fsys, keyed by its slash path.
func loadWebFiles(fsys fs.FS) (map[string]*webFile, error) {
	files := map[string]*webFile{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = http.DetectContentType(body)
		}
		files[name] = &webFile{name: name, body: body, etag: `W/"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ctype}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range []string{web.JobsPage, web.JobPage, web.TemplatePage} {
		if files[p] == nil {
			return nil, fmt.Errorf("page %s is missing", p)
		}
	}
	return files, nil
}

// serveWebFile answers with f, or 304 when the client's copy matches.
func serveWebFile(c echo.Context, f *webFile) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, f.contentType)
	h.Set(echo.HeaderCacheControl, webCacheControl)
	h.Set("ETag", f.etag)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set(echo.HeaderContentSecurityPolicy, webCSP)
	h.Set(echo.HeaderReferrerPolicy, "same-origin")
	// ServeContent answers If-None-Match, HEAD and ranges; the zero
	// modification time leaves Last-Modified out (embedded files have none).
	http.ServeContent(c.Response(), c.Request(), f.name, time.Time{}, bytes.NewReader(f.body))
	return nil
}
