package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The common flags parse into Common, defaults from its values, except the
// seed, whose default is 0 (draw one).
func TestCommonFlags(t *testing.T) {
	c := Common{Duration: time.Second, Seed: 99, Consumers: 2, Resolvers: 3, Names: 4, Hold: time.Millisecond}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Flags(fs, Help{})
	if err := fs.Parse([]string{"-consumers", "5", "-json", "-", "-hold", "2ms"}); err != nil {
		t.Fatal(err)
	}
	want := Common{Duration: time.Second, Consumers: 5, Resolvers: 3, Names: 4, Hold: 2 * time.Millisecond, JSONPath: "-"}
	if c != want {
		t.Errorf("parsed %+v, want %+v", c, want)
	}
}

func TestCommonValidate(t *testing.T) {
	ok := Common{Consumers: 1, Resolvers: 8, Names: 100}
	if err := ok.Validate(8, 100); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", ok, err)
	}
	for _, tt := range []struct {
		change func(*Common)
		err    string
	}{
		{func(c *Common) { c.Resolvers = 0 }, "-resolvers 0: want 1 to 8"},
		{func(c *Common) { c.Resolvers = 9 }, "-resolvers 9: want 1 to 8"},
		{func(c *Common) { c.Consumers = 9 }, "-consumers 9: want 1 to 8"},
		{func(c *Common) { c.Names = 0 }, "-names 0: want 1 to 100"},
		{func(c *Common) { c.Names = 101 }, "-names 101: want 1 to 100"},
		{func(c *Common) { c.Hold = -1 }, "-hold -1ns: want 0 or more"},
	} {
		c := ok
		tt.change(&c)
		if err := c.Validate(8, 100); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Validate(%+v) = %v, want %q", c, err, tt.err)
		}
	}
}
