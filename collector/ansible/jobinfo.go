package ansible

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxExtravarsBytes bounds the env/extravars file Read parses: AWX's are
// a few kilobytes; a larger one is not read.
const maxExtravarsBytes = 4 << 20

// maxStatusBytes bounds artifacts/<ident>/status: one word.
const maxStatusBytes = 4 << 10

// awxVars is what the job template part of env/extravars holds, as AWX
// (awx_*) and Tower (tower_*) write it.
type awxVars struct {
	JobID           string
	TemplateID      string
	TemplateName    string
	ProjectRevision string
}

// readExtravars reads the AWX identity from a private data dir's
// env/extravars, YAML or JSON (ansible-runner takes both). A missing file
// is no error and yields nothing; awx_* names win over tower_* ones.
func readExtravars(gate fileGate, pdd string) (awxVars, error) {
	path := filepath.Join(pdd, "env", "extravars")
	data, err := gate.readSmall(path, maxExtravarsBytes)
	if err != nil {
		return awxVars{}, fmt.Errorf("cannot read extravars %q: %w", path, err)
	}
	if data == nil {
		return awxVars{}, nil
	}
	// JSON is YAML, so one parser reads both forms.
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return awxVars{}, fmt.Errorf("cannot parse extravars %q: want a YAML or JSON mapping: %w", path, err)
	}
	get := func(name string) (string, error) {
		for _, prefix := range []string{"awx_", "tower_"} {
			if v, ok := raw[prefix+name]; ok && v != nil {
				s, err := scalarString(v)
				if err != nil {
					return "", fmt.Errorf("cannot read extravars %q: %s%s: %w", path, prefix, name, err)
				}
				// Said here, naming the file, rather than by the store as
				// a bad batch field the user never wrote.
				if i := strings.IndexFunc(s, isControl); i >= 0 {
					return "", fmt.Errorf("cannot read extravars %q: %s%s: has a control character at byte %d; want printable text", path, prefix, name, i)
				}
				return s, nil
			}
		}
		return "", nil
	}
	var out awxVars
	for _, f := range []struct {
		name string
		dst  *string
	}{{"job_id", &out.JobID}, {"job_template_id", &out.TemplateID}, {"job_template_name", &out.TemplateName}, {"project_revision", &out.ProjectRevision}} {
		if *f.dst, err = get(f.name); err != nil {
			return awxVars{}, err
		}
	}
	return out, nil
}

// isControl reports the characters no job id, template or status may
// hold (the store refuses them).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// scalarString renders an extravars value (AWX writes ids as numbers,
// names as strings) as the text the API shows.
func scalarString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("must be a string or a number, got %T", v)
}

// readStatus reads artifacts/<ident>/status, which ansible-runner writes
// at the end of a run (successful, failed, timeout, canceled); "" when
// there is none.
func readStatus(gate fileGate, identDir string) (string, error) {
	path := filepath.Join(identDir, "status")
	data, err := gate.readSmall(path, maxStatusBytes)
	if err != nil {
		return "", fmt.Errorf("cannot read runner status %q: %w", path, err)
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 32 || strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return "", fmt.Errorf("cannot read runner status %q: want one word such as successful or failed, got %q", filepath.Join(identDir, "status"), s)
	}
	return s, nil
}

// firstPlaybook returns the playbook the job's events name, "" if none.
func firstPlaybook(evs []JobEvent) string {
	best := int64(math.MaxInt64)
	pb := ""
	for _, ev := range evs {
		if ev.Playbook != "" && ev.Counter < best {
			best, pb = ev.Counter, ev.Playbook
		}
	}
	return pb
}
