// Package shiptest holds what the collector's tests share about the wire:
// the ingest batch as a server decodes it.
package shiptest

// Batch is the server's view of one JSON ingest batch, written from
// docs/CONTRACTS.md and not from the collector's types, so a test that
// decodes what the collector sent checks the contract, not the encoder
// against itself.
type Batch struct {
	JobID string `json:"job_id"`
	Tasks []struct {
		Counter int64  `json:"counter"`
		UUID    string `json:"uuid"`
		Name    string `json:"name"`
		Start   int64  `json:"start"`
		Play    string `json:"play"`
		Role    string `json:"role"`
		Path    string `json:"task_path"`
	} `json:"tasks"`
	LastEvent *struct {
		Counter int64 `json:"counter"`
		Time    int64 `json:"time"`
	} `json:"last_event"`
	Series []struct {
		Resource string    `json:"resource"`
		Counter  int64     `json:"counter"`
		UUID     string    `json:"uuid"`
		Task     string    `json:"task"`
		T        []int64   `json:"t"`
		V        []float64 `json:"v"`
	} `json:"series"`
	TemplateID   string `json:"template_id"`
	TemplateName string `json:"template_name"`
	Status       string `json:"status"`
	Playbook     string `json:"playbook"`
	Measured     string `json:"measured"`
	// What sizes the job (docs/rightsizing.md).
	Forks            int64  `json:"forks"`
	Hosts            int64  `json:"hosts"`
	MemoryLimitBytes int64  `json:"memory_limit_bytes"`
	OOMKills         int64  `json:"oom_kills"`
	OOMCounter       int64  `json:"oom_counter"`
	ProjectRevision  string `json:"project_revision"`
	EEImage          string `json:"ee_image"`
}
