package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"sort"
	"strings"
)

// block is one fenced Go code block of a Markdown file.
type block struct {
	line    int      // Markdown line of the block's first line of code
	src     string   // the code, without the fences
	declLn  int      // Markdown line of its go:vars directive; 0 if none
	decls   []string // the directive's declarations, as Go declarations
	program bool     // a complete file (starts with a package clause)
}

var (
	// fence opens or closes a fenced code block at the start of a line;
	// group 1 is the info string's first word (the block's language).
	fence   = regexp.MustCompile("^```\\s*([^\\s`]*)")
	closing = regexp.MustCompile("^```+\\s*$")
	// directive is a go:vars comment; group 1 is its declaration list.
	directive = regexp.MustCompile(`^<!--\s*go:vars\s+(.*?)\s*-->\s*$`)
	// anyDirective catches a misspelt one, which would otherwise be
	// silently ignored and leave its block without its declarations.
	anyDirective = regexp.MustCompile(`^<!--\s*go:`)
	// varDecl is one "NAME TYPE" or "NAME, NAME TYPE" item of a directive.
	varDecl = regexp.MustCompile(`^[\pL_][\pL\pN_]*(\s*,\s*[\pL_][\pL\pN_]*)*\s+\S`)
)

// goBlocks returns md's Go code blocks (fences whose language is go) in
// order, each with the declarations of the go:vars directive right above
// it. It fails on a directive that no Go block follows, a malformed
// directive, a directive above a complete program, a block language
// spelt "golang" and an unclosed fence, naming the line.
func goBlocks(name string, md []byte) ([]block, error) {
	var (
		blocks  []block
		pending *block // a directive waiting for its block
		cur     *block // the Go block being read
		inFence bool
		src     strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	ln := 0
	for sc.Scan() {
		ln++
		text := sc.Text()
		if inFence {
			if closing.MatchString(text) {
				inFence = false
				if cur != nil {
					cur.src = src.String()
					cur.program = strings.HasPrefix(cur.src, "package ")
					if cur.program && cur.declLn != 0 {
						return nil, fmt.Errorf("%s:%d: a go:vars directive above a complete program, which declares what it uses", name, cur.declLn)
					}
					blocks = append(blocks, *cur)
					cur = nil
				}
				continue
			}
			if cur != nil {
				src.WriteString(text)
				src.WriteByte('\n')
			}
			continue
		}
		if m := fence.FindStringSubmatch(text); m != nil {
			inFence = true
			switch lang := m[1]; lang {
			case "go":
				cur = &block{line: ln + 1}
				if pending != nil {
					cur.declLn, cur.decls = pending.declLn, pending.decls
					pending = nil
				}
				src.Reset()
			case "golang", "Go":
				return nil, fmt.Errorf("%s:%d: a code block in %q: write go, so that it is checked", name, ln, lang)
			}
			if pending != nil {
				return nil, fmt.Errorf("%s:%d: the go:vars directive is followed by a %q block, not a go one", name, pending.declLn, m[1])
			}
			continue
		}
		if pending != nil && strings.TrimSpace(text) != "" {
			return nil, fmt.Errorf("%s:%d: no Go code block right after the go:vars directive", name, pending.declLn)
		}
		if !anyDirective.MatchString(text) {
			continue
		}
		m := directive.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("%s:%d: malformed directive %q: want <!-- go:vars NAME TYPE; ... -->", name, ln, text)
		}
		decls, err := parseDecls(m[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, ln, err)
		}
		pending = &block{declLn: ln, decls: decls}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if inFence {
		return nil, fmt.Errorf("%s: a code block is not closed at the end of the file", name)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: no Go code block right after the go:vars directive", name, pending.declLn)
	}
	return blocks, nil
}

// parseDecls turns a directive's list ("ctx context.Context; type V any")
// into Go declarations ("var ctx context.Context", "type V any").
func parseDecls(list string) ([]string, error) {
	var decls []string
	for item := range strings.SplitSeq(list, ";") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			return nil, fmt.Errorf("an empty item in the go:vars list %q", list)
		case strings.HasPrefix(item, "type "):
			decls = append(decls, item)
		case varDecl.MatchString(item):
			decls = append(decls, "var "+item)
		default:
			return nil, fmt.Errorf("go:vars item %q: want NAME TYPE or type NAME TYPE", item)
		}
	}
	return decls, nil
}

// knownImports are the package names a fragment may use without importing
// them: the fragment's file imports those it refers to.
var knownImports = map[string]string{
	"context":   "context",
	"errors":    "errors",
	"fmt":       "fmt",
	"http":      "net/http",
	"io":        "io",
	"json":      "encoding/json",
	"log":       "log",
	"os":        "os",
	"slog":      "log/slog",
	"strings":   "strings",
	"time":      "time",
	"owner":     module + "/owner",
	"shardreg":  module + "/shardreg",
	"bindsec":   module + "/bindsec",
	"catalog":   module + "/catalog",
	"mcpserve":  module + "/mcpserve",
	"etcdfleet": module + "/etcdfleet",
	"mcp":       "github.com/modelcontextprotocol/go-sdk/mcp",
}

const module = "github.com/livereg/livereg"

// nestedModules are the modules of their own inside this one, by import
// path prefix, with their directories from the repository root. A block
// that imports one is checked in that module.
var nestedModules = map[string]string{
	module + "/etcdfleet": "etcdfleet",
}

// moduleOf returns the directory, from the repository root, of the module
// in which a block with these imports builds.
func moduleOf(imports []string) (string, error) {
	dir := "."
	for _, p := range imports {
		for prefix, d := range nestedModules {
			if p != prefix && !strings.HasPrefix(p, prefix+"/") {
				continue
			}
			if dir != "." && dir != d {
				return "", fmt.Errorf("imports from two modules, %s and %s", dir, d)
			}
			dir = d
		}
	}
	return dir, nil
}

// source returns the file that b is checked as, named by its position in
// mdName so that errors point into the Markdown file, and the paths it
// imports. A program is its own file; a fragment becomes the body of a
// function, after its directive's declarations, in a file that imports
// the knownImports it names.
func (b block) source(mdName string, n int) (string, []string, error) {
	if b.program {
		f, err := parser.ParseFile(token.NewFileSet(), "", b.src, parser.ImportsOnly)
		if err != nil {
			return "", nil, err
		}
		var imports []string
		for _, s := range f.Imports {
			imports = append(imports, strings.Trim(s.Path.Value, `"`))
		}
		return fmt.Sprintf("//line %s:%d:1\n%s", mdName, b.line, b.src), imports, nil
	}
	var body strings.Builder
	if len(b.decls) > 0 {
		fmt.Fprintf(&body, "//line %s:%d:1\n%s\n", mdName, b.declLn, strings.Join(b.decls, "; "))
	}
	fmt.Fprintf(&body, "//line %s:%d:1\n%s", mdName, b.line, b.src)
	// Parsed once without imports to learn which packages it names. The
	// file has no name: a //line directive's relative file name is read
	// relative to the directory of the file that holds it, which would
	// turn docs/x.md into docs/docs/x.md.
	probe := fmt.Sprintf("package p\nfunc _() {\n%s\n}\n", body.String())
	f, err := parser.ParseFile(token.NewFileSet(), "", probe, parser.SkipObjectResolution)
	if err != nil {
		return "", nil, err
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && knownImports[id.Name] != "" {
				used[knownImports[id.Name]] = true
			}
		}
		return true
	})
	var imports []string
	for p := range used {
		imports = append(imports, p)
	}
	sort.Strings(imports)
	var file strings.Builder
	fmt.Fprintf(&file, "package fragment%d\n\nimport (\n", n)
	for _, p := range imports {
		fmt.Fprintf(&file, "\t%q\n", p)
	}
	fmt.Fprintf(&file, ")\n\nfunc _() {\n%s\n}\n", body.String())
	return file.String(), imports, nil
}
