package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A view shows a consumer when the record it locates the name by names
// that consumer's replica and owner: a predecessor's record on the same
// replica, another replica's, or none, does not.
func TestLocatedShows(t *testing.T) {
	at := &replica{id: 2, name: "at"}
	holder := rec(at, "fl-1", "n", 7, false)
	holder.owner = 41
	for _, tc := range []struct {
		name   string
		l      located
		holder *record
		want   bool
	}{
		{"the holder's own record", located{replica: "at", owner: 41, rev: 9}, holder, true},
		{"a predecessor's record on the same replica", located{replica: "at", owner: 40, rev: 9}, holder, false},
		{"the holder's owner under another replica's name", located{replica: "elsewhere", owner: 41, rev: 9}, holder, false},
		{"no record", located{rev: 9}, holder, false},
		{"no holder", located{replica: "at", owner: 41, rev: 9}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.l.shows(tc.holder))
		})
	}
}
