package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/peakline/peakline/server"
)

// TestAuthFileRefusesEmptySecret: an entry whose secret is empty (the
// sha256 of an empty token file, a blank token, a bcrypt hash of the
// empty password) is refused at load, naming the entry; on reload the
// previous file stays in force.
func TestAuthFileRefusesEmptySecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auth.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	emptyHash, err := bcrypt.GenerateFromPassword(nil, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	const good = `{name: ok, token: "good-token-0123456789", scopes: [read]}`
	f := func(doc, wantErr string) {
		t.Helper()
		write(doc)
		_, err := server.NewAuthenticator(path, nil)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: error %v, want one containing %q", doc, err, wantErr)
		}
	}
	const emptySum = "tokens[1] (ci): sha256: is the hash of an empty token (the token file was empty?); give the hash of the real token"
	f(`tokens: [`+good+`, {name: ci, sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", scopes: [admin]}]`, emptySum)
	f(`tokens: [`+good+`, {name: ci, sha256: "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", scopes: [admin]}]`, emptySum)
	// echo "" | sha256sum: a file holding only a line end.
	f(`tokens: [`+good+`, {name: ci, sha256: "`+sha256Hex("\n")+`", scopes: [admin]}]`, emptySum)
	f(`tokens: [`+good+`, {name: ci, token: "                    ", scopes: [admin]}]`, "tokens[1] (ci): token: is blank")
	f(`tokens: [`+good+`, {name: ci, token: " padded-token-0123456789 ", scopes: [admin]}]`, "tokens[1] (ci): token: must not begin or end with white space")
	f(`tokens: [`+good+"]\n"+`users: [{name: bob, bcrypt: "`+string(emptyHash)+`", scopes: [admin]}]`, "users[0] (bob): bcrypt: is the hash of the empty password")

	write(`tokens: [` + good + `]`)
	auth, err := server.NewAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(`tokens: [{name: ci, sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", scopes: [admin]}]`)
	if err := auth.Reload(); err == nil || !strings.Contains(err.Error(), "tokens[0] (ci): sha256: is the hash of an empty token") {
		t.Fatalf("reload of an empty token's hash: %v", err)
	}
	env := newAuthEnv(t, server.SecurityConfig{Auth: auth})
	for _, tc := range []struct {
		tok  string
		want int
	}{{"good-token-0123456789", 200}, {"", 401}} {
		if resp, body := do(t, "GET", env.hs.URL+"/api/v1/jobs", "", nil, bearer(tc.tok)); resp.StatusCode != tc.want {
			t.Fatalf("token %q after the refused reload: %d %s, want %d", tc.tok, resp.StatusCode, body, tc.want)
		}
	}
}

// TestAuthEmptyCredentialRefused: an empty bearer token or an empty
// password is malformed, whatever the file holds; it is refused before
// any comparison.
func TestAuthEmptyCredentialRefused(t *testing.T) {
	env := newAuthEnv(t, server.SecurityConfig{FailBurst: 100})
	f := func(name string, set func(*http.Request), wantReason string) {
		t.Helper()
		before := authFailures(t, env.reg, wantReason)
		resp, body := do(t, "DELETE", env.hs.URL+"/api/v1/jobs/x", "", nil, set)
		if resp.StatusCode != 401 || body != `{"error":"authentication failed: the token or the user and password are not valid"}`+"\n" {
			t.Fatalf("%s: %d %q, want 401", name, resp.StatusCode, body)
		}
		if got := authFailures(t, env.reg, wantReason) - before; got != 1 {
			t.Fatalf("%s: %v failures counted as %s, want 1", name, got, wantReason)
		}
	}
	header := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", v) }
	}
	f("Bearer without a token", header("Bearer"), "malformed")
	f("Bearer and a space", header("Bearer "), "malformed")
	f("Bearer and blanks", header("Bearer  \t "), "malformed")
	f("Basic with an empty password", func(r *http.Request) { r.SetBasicAuth(userName, "") }, "malformed")
	f("Basic with an empty user and password", func(r *http.Request) { r.SetBasicAuth("", "") }, "malformed")
}
