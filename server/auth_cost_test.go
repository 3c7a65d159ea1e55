package server

import (
	"fmt"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// An unknown user is checked against a hash of the users' highest cost,
// so that a wrong password takes as long for a name that does not exist
// as for one that does.
func TestUnknownUserCostsLikeUsers(t *testing.T) {
	doc := "users:\n"
	for i, cost := range []int{bcrypt.MinCost, 6, 5} {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), cost)
		if err != nil {
			t.Fatal(err)
		}
		doc += fmt.Sprintf("  - {name: u%d, bcrypt: %q, scopes: [read]}\n", i, h)
	}
	c, err := parseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bcrypt.Cost(c.dummyHash); err != nil || got != 6 {
		t.Fatalf("unknown-user hash cost = %d (%v), want 6, the users' highest", got, err)
	}
}
