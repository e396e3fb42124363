package fleet

import (
	"encoding/json"
	"testing"

	"github.com/livereg/livereg/etcdfleet"
)

func TestLostClaimChecker(t *testing.T) {
	const dir = "/p/tools/"
	a := &replica{id: 1, name: "a"}
	value := func(name, tag string) []byte {
		b, err := json.Marshal(etcdfleet.Record{Replica: "a", Kind: "tool", Tool: &etcdfleet.ToolDesc{Name: name, Title: tag}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name       string
		key        string // the key the creating put wrote
		dead       bool
		current    int64 // the replica's lease now; the claim's is 7
		checks     int64
		violations int64
	}{
		{"claimed under a lost session and still alive", dir + "n", false, 8, 1, 1},
		{"claimed under a lost session and killed", dir + "n", true, 8, 1, 0},
		{"its session is still current", dir + "n", false, 7, 0, 0},
		{"the replica is between sessions", dir + "n", false, 0, 0, 0},
		{"its record copied under another key: not its claim", dir + "forged-copy-1", false, 8, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := &tally{}
			r := rec(a, "fl-1", "n", 0, tc.dead)
			c := lostClaimChecker{t: tl, dir: dir,
				lookup: func(tag string) *record {
					if tag == r.tag {
						return r
					}
					return nil
				},
				current: func(*replica) int64 { return tc.current }}
			c.created(tc.key, value("n", "fl-1"), 7)
			c.created(dir+"m", value("m", "fl-unknown"), 7) // no consumer of the run
			for range 3 {                                   // judged once, however often sampled
				c.judge(r)
			}
			if got := tl.Checks(InvLostSessionClaimLives); got != tc.checks {
				t.Errorf("checks = %d, want %d", got, tc.checks)
			}
			if got := tl.Violations(InvLostSessionClaimLives); got != tc.violations {
				t.Errorf("violations = %d, want %d (%v)", got, tc.violations, tl.Examples(InvLostSessionClaimLives))
			}
		})
	}
	t.Run("a crashed replica's consumer is not judged", func(t *testing.T) {
		tl := &tally{}
		c := &replica{id: 2, name: "c"}
		c.crashed.Store(true)
		r := rec(c, "fl-1", "n", 0, false)
		r.claimLease.Store(7)
		lostClaimChecker{t: tl, dir: dir, current: func(*replica) int64 { return 8 }}.judge(r)
		if tl.Checks(InvLostSessionClaimLives) != 0 {
			t.Error("judged")
		}
	})
}
