package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock matches a fenced Go code block of a Markdown file.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// Every complete program (a block that starts with "package main") in
// README.md builds against this module as it stands, so that a renamed or
// removed API cannot leave the README's example stale. Fragments that only
// show calls are not programs and are not built.
func TestReadmeProgramsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds with the go command")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	programs := 0
	for _, m := range goBlock.FindAllSubmatch(readme, -1) {
		src := string(m[1])
		if !strings.HasPrefix(src, "package main\n") {
			continue
		}
		programs++
		// Inside the module, so that its imports resolve to this tree; a
		// leading dot keeps the directory out of ./... patterns.
		dir, err := os.MkdirTemp(".", ".program-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("go", "build", "-o", os.DevNull, "./"+dir).CombinedOutput()
		if err != nil {
			t.Errorf("README program %d does not build: %v\n%s", programs, err, out)
		}
	}
	if programs == 0 {
		t.Fatal("README.md has no complete program: the test would check nothing")
	}
}
