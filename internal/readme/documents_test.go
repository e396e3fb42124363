package readme

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// decisionRecords is the folder of the architecture decision records,
// whose Go blocks are not checked: they state a decision as it was taken
// and quote no code that must keep compiling. Their links are followed.
const decisionRecords = "docs/adr"

// documents returns the Markdown files of the repository's documentation,
// as slash-separated paths from root: README.md, then every .md file under
// docs/ except those under the folders skip names, in lexical order. A
// missing docs/ is an error, since the README links into it.
func documents(root string, skip ...string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && slices.Contains(skip, rel) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(rel, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// The documents checked: the README and docs/, nested folders included,
// the decision records and files that are not Markdown left out.
func TestDocuments(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"README.md", "docs/guide.md", "docs/notes.txt", "docs/deep/more.md",
		"docs/adr/0001-x.md", "other/x.md"} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("# x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := documents(root, decisionRecords)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md", "docs/deep/more.md", "docs/guide.md"}
	if !slices.Equal(got, want) {
		t.Errorf("documents without the records = %q, want %q", got, want)
	}
	got, err = documents(root)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"README.md", "docs/adr/0001-x.md", "docs/deep/more.md", "docs/guide.md"}
	if !slices.Equal(got, want) {
		t.Errorf("all documents = %q, want %q", got, want)
	}
	if _, err := documents(t.TempDir()); err == nil {
		t.Error("a tree without docs/: no error")
	}

	// The repository's own: every subject the README links to is checked.
	got, err = documents(repoRoot, decisionRecords)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"README.md", "docs/server-guide.md", "docs/stateless.md", "docs/fleet.md",
		"docs/security.md", "docs/testing.md", "docs/performance.md"} {
		if !slices.Contains(got, f) {
			t.Errorf("%s is not among the checked documents %q", f, got)
		}
	}
	for _, f := range got {
		if strings.HasPrefix(f, "docs/adr/") {
			t.Errorf("%s is checked", f)
		}
	}
}
