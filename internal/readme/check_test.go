package readme

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// repoRoot is the repository root, from this package's directory (where
// go test runs its tests).
const repoRoot = "../.."

// exportData is where the go command left a package's compiled export
// data, or why it could not build it.
type exportData struct {
	file string
	err  string
}

// listed caches, per module directory, what go list -export reported, so
// that the tests of this package run the go command once per module
// rather than once per check. Guarded by its mutex.
var listed struct {
	sync.Mutex
	m map[string]map[string]exportData
}

// exportsFor returns the export data of paths and all their dependencies,
// as built in the module at dir (from the repository root). It runs one
// go list for the paths not listed before: the go command builds what is
// stale (the build cache makes that nearly free after go test built the
// same packages) and prints where each package's export data is.
func exportsFor(dir string, paths []string) (map[string]exportData, error) {
	listed.Lock()
	defer listed.Unlock()
	if listed.m == nil {
		listed.m = map[string]map[string]exportData{}
	}
	known := listed.m[dir]
	if known == nil {
		known = map[string]exportData{}
		listed.m[dir] = known
	}
	var missing []string
	for _, p := range paths {
		if _, ok := known[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return known, nil
	}
	// -e: a package that does not exist or does not build is reported in
	// its Error, and the check then fails where a block imports it.
	args := append([]string{"list", "-e", "-export", "-deps", "-f",
		"{{.ImportPath}}\t{{.Export}}\t{{if .Error}}{{.Error}}{{end}}"}, missing...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(repoRoot, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, rest, _ := strings.Cut(line, "\t")
		file, why, _ := strings.Cut(rest, "\t")
		if why == "" && file == "" {
			why = "no export data (" + strings.TrimSpace(stderr.String()) + ")"
		}
		known[path] = exportData{file: file, err: why}
	}
	return known, nil
}

// unusedMsg matches the soft errors a fragment is allowed: a variable it
// declares to show a call's results, or a declaration of its directive,
// need not be used, and its file imports every known package it names.
var unusedMsg = regexp.MustCompile(`declared and not used|imported (as \S+ )?and not used`)

// allowed reports whether err may be ignored in a block: only in a
// fragment, and only go/types' soft errors about something declared or
// imported and not used. Every other error, soft ones such as "no new
// variables on left side of :=" included, fails the check.
func allowed(err error, fragment bool) bool {
	var te types.Error
	return fragment && errors.As(err, &te) && te.Soft && unusedMsg.MatchString(te.Msg)
}

// checked is what checkMarkdown found.
type checked struct {
	programs, fragments int
	errs                []error // each names its Markdown line
}

// checkMarkdown type-checks every Go block of the Markdown file md, named
// name in errors, with go/types against the export data of the packages
// as they stand in this tree: each block is a package of its own, so
// their declarations cannot clash, and all of them share one go list per
// module. An error in md's structure (see goBlocks) is returned as err.
func checkMarkdown(name string, md []byte) (checked, error) {
	var res checked
	blocks, err := goBlocks(name, md)
	if err != nil {
		return res, err
	}
	type unit struct {
		b       block
		src     string
		dir     string
		imports []string
	}
	var units []unit
	byDir := map[string][]string{}
	for i, b := range blocks {
		src, imports, err := b.source(name, i)
		if err != nil {
			res.errs = append(res.errs, err)
			continue
		}
		dir, err := moduleOf(imports)
		if err != nil {
			res.errs = append(res.errs, fmt.Errorf("%s:%d: %w", name, b.line, err))
			continue
		}
		units = append(units, unit{b, src, dir, imports})
		byDir[dir] = append(byDir[dir], imports...)
	}
	importers := map[string]types.Importer{}
	fset := token.NewFileSet()
	dirs := make([]string, 0, len(byDir))
	for dir := range byDir {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		exports, err := exportsFor(dir, byDir[dir])
		if err != nil {
			return res, err
		}
		importers[dir] = importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			e, ok := exports[path]
			switch {
			case !ok:
				return nil, fmt.Errorf("%s: not listed by go list", path)
			case e.file == "":
				return nil, fmt.Errorf("%s: %s", path, e.err)
			}
			return os.Open(e.file)
		})
	}
	for i, u := range units {
		if u.b.program {
			res.programs++
		} else {
			res.fragments++
		}
		// Unnamed, as in block.source: the //line directives name the
		// Markdown file, relative to the repository root.
		f, err := parser.ParseFile(fset, "", u.src, parser.SkipObjectResolution)
		if err != nil {
			res.errs = append(res.errs, err)
			continue
		}
		conf := types.Config{
			Importer: importers[u.dir],
			Error: func(err error) {
				if !allowed(err, !u.b.program) {
					res.errs = append(res.errs, err)
				}
			},
		}
		pkg, _ := conf.Check(fmt.Sprintf("readme/block%d", i), fset, []*ast.File{f}, nil)
		if u.b.program && pkg != nil {
			if _, ok := pkg.Scope().Lookup("main").(*types.Func); pkg.Name() != "main" || !ok {
				res.errs = append(res.errs, fmt.Errorf("%s:%d: a complete program must be package main with a func main", name, u.b.line))
			}
		}
	}
	return res, nil
}
