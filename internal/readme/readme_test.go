package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every Go code block of README.md and of the documents under docs/
// compiles against the modules as they stand: a complete program as it
// is, a fragment inside a function with the declarations of its go:vars
// directive (see the package doc). A renamed or removed API, or a
// fragment that no longer fits the one before it, fails here with the
// document and line that use it.
func TestDocsGoBlocksCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with the go command")
	}
	docs, err := documents(repoRoot, decisionRecords)
	if err != nil {
		t.Fatal(err)
	}
	var programs, fragments int
	for _, name := range docs {
		md, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		res, err := checkMarkdown(name, md)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, err := range res.errs {
			t.Error(err)
		}
		if name == "README.md" && res.programs == 0 {
			t.Error("README.md has no complete program: the hello world is gone")
		}
		programs += res.programs
		fragments += res.fragments
		t.Logf("%s: %d programs and %d fragments type-checked", name, res.programs, res.fragments)
	}
	if fragments == 0 {
		t.Error("the documents have no Go fragment: the test would check only programs")
	}
	t.Logf("%d documents: %d programs and %d fragments type-checked", len(docs), programs, fragments)
}

// The checker itself: what it must refuse and what it must let through,
// on small Markdown files of its own.
func TestCheckMarkdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with the go command")
	}
	const (
		catVars = "<!-- go:vars ctx context.Context; cat *catalog.Catalog -->\n"
		open    = "```go\n"
		end     = "```\n"
	)
	tests := []struct {
		name string
		md   string
		want string // a substring of the one error expected; "" for none
	}{
		{"a fragment that fits", catVars + open + "tools := cat.Tools().List()\nres, err := cat.CallTool(ctx, \"x\", nil, \"\")\n" + end, ""},
		{"a removed method", "text\n\n" + catVars + open + "cat.ListToolz()\n" + end, "x.md:5:5: cat.ListToolz undefined"},
		{"a wrong argument count", catVars + open + "cat.CallTool(ctx, \"x\")\n" + end, "x.md:3:"},
		{"an undeclared variable", open + "k.Stop(ctx)\n" + end, "undefined: k"},
		{"a directive's type in error", "<!-- go:vars r owner.Reff -->\n" + open + "r.Alive()\n" + end, "x.md:1:"},
		{"no new variables is no soft excuse", open + "x := 1\nx := 2\n" + end, "no new variables"},
		{"a type item", "<!-- go:vars type V any -->\n" + open + "r, err := shardreg.New[V]()\n" + end, ""},
		{"a nested module", "<!-- go:vars ctx context.Context -->\n" + open + "r, err := etcdfleet.Join(ctx, etcdfleet.Config{})\n" + end, ""},
		{"a nested module's removed function", "<!-- go:vars ctx context.Context -->\n" + open + "r, err := etcdfleet.Joins(ctx, etcdfleet.Config{})\n" + end, "undefined: etcdfleet.Joins"},
		{"a program", open + "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println() }\n" + end, ""},
		{"a program with an unused variable", open + "package main\n\nfunc main() { x := 1 }\n" + end, "x.md:4:15: declared and not used: x"},
		{"a program without main", open + "package main\n\nfunc Main() {}\n" + end, "func main"},
		{"a syntax error", open + "cat.ListTools(\n" + end, "x.md:"},
		{"other languages are not Go", "```sh\nmake test(\n```\n```json\n{\n```\n", ""},
	}
	// A document in a folder is named by its path from the repository
	// root, as written, in the errors of fragments and programs alike.
	for _, name := range []string{"docs/x.md", "docs/deep/x.md"} {
		t.Run(name, func(t *testing.T) {
			md := "<!-- go:vars ctx context.Context -->\n" + open + "cat.Tools().List()\n" + end +
				open + "package main\n\nfunc main() { x := 1 }\n" + end
			res, err := checkMarkdown(name, []byte(md))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{name + ":3:1: undefined: cat", name + ":8:15: declared and not used: x"}
			if len(res.errs) != len(want) {
				t.Fatalf("errors %v, want %q", res.errs, want)
			}
			for i, err := range res.errs {
				if err.Error() != want[i] {
					t.Errorf("error %q, want %q", err, want[i])
				}
			}
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := checkMarkdown("x.md", []byte(tt.md))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(res.errs) > 0:
				t.Errorf("errors %v, want none", res.errs)
			case tt.want != "" && len(res.errs) == 0:
				t.Errorf("no error, want one with %q", tt.want)
			case tt.want != "" && !strings.Contains(res.errs[0].Error(), tt.want):
				t.Errorf("error %q, want one with %q", res.errs[0], tt.want)
			}
		})
	}
}

// The Markdown structure: which blocks are Go, and what a directive gives.
func TestGoBlocks(t *testing.T) {
	tests := []struct {
		name    string
		md      string
		want    []block // line, src, declLn, decls, program
		wantErr string
	}{
		{
			name: "blocks and a directive",
			md: "# t\n```sh\nls\n```\n<!-- go:vars ctx context.Context; type V any; ref owner.Ref -->\n\n" +
				"```go\nx()\n```\n```go\npackage main\n```\n```text\n<!-- go:vars not one -->\n```\n",
			want: []block{
				{line: 8, src: "x()\n", declLn: 5, decls: []string{"var ctx context.Context", "type V any", "var ref owner.Ref"}},
				{line: 11, src: "package main\n", program: true},
			},
		},
		{name: "a directive followed by prose", md: "<!-- go:vars x int -->\ntext\n```go\nx\n```\n", wantErr: "x.md:1: no Go code block"},
		{name: "a directive followed by a sh block", md: "<!-- go:vars x int -->\n```sh\nx\n```\n", wantErr: `x.md:1: the go:vars directive is followed by a "sh" block`},
		{name: "a directive at the end", md: "<!-- go:vars x int -->\n", wantErr: "x.md:1: no Go code block"},
		{name: "a misspelt directive", md: "<!-- go:var x int -->\n```go\nx\n```\n", wantErr: "x.md:1: malformed directive"},
		{name: "a bad item", md: "<!-- go:vars x -->\n```go\nx\n```\n", wantErr: `go:vars item "x"`},
		{name: "an empty item", md: "<!-- go:vars x int; -->\n```go\nx\n```\n", wantErr: "an empty item"},
		{name: "a directive above a program", md: "<!-- go:vars x int -->\n```go\npackage main\n```\n", wantErr: "x.md:1: a go:vars directive above a complete program"},
		{name: "golang", md: "```golang\nx\n```\n", wantErr: `x.md:1: a code block in "golang"`},
		{name: "an unclosed fence", md: "```go\nx\n", wantErr: "not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := goBlocks("x.md", []byte(tt.md))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d blocks %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.line != w.line || g.src != w.src || g.declLn != w.declLn || g.program != w.program ||
					strings.Join(g.decls, "|") != strings.Join(w.decls, "|") {
					t.Errorf("block %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
