package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/labstack/echo/v4"
)

// Collection policy: the server decides whether collectors sample a job.
// System-wide it is off, all or opt-in; per job template on, off or
// default. A collector with collection off for its template runs the
// command untouched.
const (
	CollectionOff   = "off"
	CollectionAll   = "all"
	CollectionOptIn = "opt-in"

	TemplateOn      = "on"
	TemplateOff     = "off"
	TemplateDefault = "default"

	maxTemplateIDLen = 256
)

// policyDoc is what the settings file holds.
type policyDoc struct {
	Collection string            `json:"collection"`
	Templates  map[string]string `json:"templates,omitempty"`
}

// policy holds the collection policy, persisted as JSON in one file.
// Several replicas of a stateless server share the file (a shared
// volume): each reads it again whenever its modification time or size
// changed, so a change made through any replica, or by editing the file,
// is what every replica answers next.
type policy struct {
	mu   sync.Mutex
	path string // "" keeps it in memory only
	doc  policyDoc
	seen fileStamp // of the file doc was read from or written to
}

// refresh reads the file again if it changed since it was read or
// written here. The caller holds mu.
func (p *policy) refresh() error {
	if p.path == "" {
		return nil
	}
	st, err := stampOf(p.path) // tls.go
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st == p.seen) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read settings %q: %w", p.path, err)
	}
	fresh, err := loadPolicy(p.path)
	if err != nil {
		return err
	}
	p.doc, p.seen = fresh.doc, fresh.seen
	return nil
}

func loadPolicy(path string) (*policy, error) {
	p := &policy{path: path, doc: policyDoc{Collection: CollectionAll, Templates: map[string]string{}}}
	if path == "" {
		return p, nil
	}
	st, err := stampOf(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings %q: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read settings %q: %w", path, err)
	}
	p.seen = st
	if err := json.Unmarshal(b, &p.doc); err != nil {
		return nil, fmt.Errorf("parse settings %q: %w", path, err)
	}
	if err := checkCollection(p.doc.Collection); err != nil {
		return nil, fmt.Errorf("settings %q: %w", path, err)
	}
	if p.doc.Templates == nil {
		p.doc.Templates = map[string]string{}
	}
	return p, nil
}

// save writes the policy atomically; the caller holds mu.
func (p *policy) save() error {
	if p.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(p.doc, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.path), ".settings-*")
	if err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save settings: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save settings: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), p.path); err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	if st, err := stampOf(p.path); err == nil {
		p.seen = st
	}
	return nil
}

func checkCollection(v string) error {
	switch v {
	case CollectionOff, CollectionAll, CollectionOptIn:
		return nil
	}
	return badRequest("collection: must be %q, %q or %q, got %q", CollectionOff, CollectionAll, CollectionOptIn, v)
}

type settingsBody struct {
	Collection string `json:"collection"`
}

type templateBody struct {
	ID         string `json:"id"`
	Collection string `json:"collection"`
}

func (s *Server) getSettings(c echo.Context) error {
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	if err := s.policy.refresh(); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, settingsBody{Collection: s.policy.doc.Collection})
}

func (s *Server) putSettings(c echo.Context) error {
	var in settingsBody
	if err := decodeSmallJSON(c, &in); err != nil {
		return err
	}
	if err := checkCollection(in.Collection); err != nil {
		return err
	}
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	if err := s.policy.refresh(); err != nil {
		return err
	}
	old := s.policy.doc.Collection
	s.policy.doc.Collection = in.Collection
	if err := s.policy.save(); err != nil {
		s.policy.doc.Collection = old
		return err
	}
	s.logger.Info("collection policy changed", "collection", in.Collection)
	return c.JSON(http.StatusOK, in)
}

func (s *Server) getTemplate(c echo.Context) error {
	id := c.Param("id")
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	if err := s.policy.refresh(); err != nil {
		return err
	}
	v, ok := s.policy.doc.Templates[id]
	if !ok {
		v = TemplateDefault
	}
	return c.JSON(http.StatusOK, templateBody{ID: id, Collection: v})
}

func (s *Server) putTemplate(c echo.Context) error {
	id := c.Param("id")
	if len(id) > maxTemplateIDLen {
		return badRequest("id: is %d bytes long, at most %d allowed", len(id), maxTemplateIDLen)
	}
	var in templateBody
	if err := decodeSmallJSON(c, &in); err != nil {
		return err
	}
	if in.ID != "" && in.ID != id {
		return badRequest("id: %q does not match the template in the path, %q", in.ID, id)
	}
	switch in.Collection {
	case TemplateOn, TemplateOff, TemplateDefault:
	default:
		return badRequest("collection: must be %q, %q or %q, got %q", TemplateOn, TemplateOff, TemplateDefault, in.Collection)
	}
	s.policy.mu.Lock()
	defer s.policy.mu.Unlock()
	if err := s.policy.refresh(); err != nil {
		return err
	}
	old, had := s.policy.doc.Templates[id]
	if limit := s.cfg.Security.MaxTemplates; !had && in.Collection != TemplateDefault && len(s.policy.doc.Templates) >= limit {
		return echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("templates: %d templates have their own setting, at most %d allowed (serve --max-templates); set one back to %q first", len(s.policy.doc.Templates), limit, TemplateDefault))
	}
	if in.Collection == TemplateDefault {
		delete(s.policy.doc.Templates, id)
	} else {
		s.policy.doc.Templates[id] = in.Collection
	}
	if err := s.policy.save(); err != nil {
		if had {
			s.policy.doc.Templates[id] = old
		} else {
			delete(s.policy.doc.Templates, id)
		}
		return err
	}
	return c.JSON(http.StatusOK, templateBody{ID: id, Collection: in.Collection})
}

// decodeSmallJSON reads a small JSON document, refusing unknown fields.
func decodeSmallJSON(c echo.Context, dst any) error {
	const limit = 64 << 10
	body, err := requestBody(c.Request(), "application/json", limit)
	if err != nil {
		return err
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, limit)
	}
	return nil
}
