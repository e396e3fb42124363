package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// mdLink is an inline Markdown link or image; group 1 is its target.
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// heading is an ATX heading; group 1 is its text.
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// linkTarget is one relative link of a Markdown file.
type linkTarget struct {
	line     int
	file     string // slash-separated, relative to the linking file's folder; "" for the file itself
	fragment string // after the #; "" if none
}

// relativeLinks returns md's links that point into the repository: those
// with no scheme, outside code blocks and code spans.
func relativeLinks(md []byte) []linkTarget {
	var links []linkTarget
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	inFence := false
	for ln := 1; sc.Scan(); ln++ {
		text := sc.Text()
		if fence.MatchString(text) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			links = append(links, linkTarget{line: ln, file: file, fragment: fragment})
		}
	}
	return links
}

// anchors returns the fragment identifiers GitHub gives md's headings: the
// text lowercased, without punctuation, spaces turned to hyphens, and -1,
// -2... after a repeated one. Headings inside code blocks do not count.
func anchors(md []byte) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(nil, 1<<20)
	inFence := false
	for sc.Scan() {
		text := sc.Text()
		if fence.MatchString(text) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(text)
		if inFence || m == nil {
			continue
		}
		var id strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				id.WriteRune(r)
			case r == ' ':
				id.WriteByte('-')
			}
		}
		slug := id.String()
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = fmt.Sprintf("%s-%d", slug, n)
		} else {
			seen[slug] = 1
		}
		ids[slug] = true
	}
	return ids
}

// checkLinks reports every relative link of the Markdown file name (a
// slash-separated path from root) whose file or folder does not exist,
// or whose fragment names no heading of the Markdown file it points to.
func checkLinks(root, name string) ([]error, error) {
	md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, l := range relativeLinks(md) {
		target := name
		if l.file != "" {
			target = path.Join(path.Dir(name), l.file)
		}
		if target == ".." || strings.HasPrefix(target, "../") {
			errs = append(errs, fmt.Errorf("%s:%d: %s leaves the repository", name, l.line, l.file))
			continue
		}
		body, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(target)))
		switch {
		case err != nil && l.fragment == "":
			if _, serr := os.Stat(filepath.Join(root, filepath.FromSlash(target))); serr != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link to %s: %v", name, l.line, target, serr))
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("%s:%d: link to %s#%s: %v", name, l.line, target, l.fragment, err))
		case l.fragment != "" && strings.HasSuffix(target, ".md") && !anchors(body)[l.fragment]:
			errs = append(errs, fmt.Errorf("%s:%d: %s has no heading #%s", name, l.line, target, l.fragment))
		}
	}
	return errs, nil
}

// Every link of the README and of docs/, the decision records included,
// into the repository leads somewhere: a moved section, file or package
// fails here with the line that still points at its old place.
func TestDocsLinksResolve(t *testing.T) {
	docs, err := documents(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range docs {
		errs, err := checkLinks(repoRoot, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			t.Error(err)
		}
		md, _ := os.ReadFile(filepath.Join(repoRoot, name))
		n += len(relativeLinks(md))
	}
	if n == 0 {
		t.Error("no relative link found: the checker reads nothing")
	}
	t.Logf("%d relative links in %d documents", n, len(docs))
}

// The link checker on a small tree of its own: what it must refuse and
// what it must let through.
func TestCheckLinks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": "# Top\n\n## What a consumer's death does\n\n## Many replicas on one machine: `livereg-mcp -etcd`\n\n" +
			"## Twice\n\n## Twice\n\n```sh\n# not a heading\n```\n",
		"docs/guide.md": "# Guide\n",
		"pkg/x.go":      "package x\n",
	}
	for f, body := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, md, want string // want: a substring of the one error expected; "" for none
	}{
		{"a file", "[g](guide.md)", ""},
		{"a folder", "[p](../pkg)", ""},
		{"a heading with an apostrophe", "[d](../README.md#what-a-consumers-death-does)", ""},
		{"a heading with code", "[r](../README.md#many-replicas-on-one-machine-livereg-mcp--etcd)", ""},
		{"a repeated heading", "[t](../README.md#twice-1)", ""},
		{"its own heading", "[s](#guide)", ""},
		{"a web link", "[w](https://example.com/nowhere.md#x)", ""},
		{"a link in code", "`[c](nowhere.md)`\n```\n[c](nowhere.md)\n```", ""},
		{"a missing file", "text\n[m](gone.md)", "docs/t.md:4: link to docs/gone.md"},
		{"a missing folder", "[p](../pkgs)", "link to pkgs"},
		{"a missing heading", "[d](../README.md#correctness-evidence)", "README.md has no heading #correctness-evidence"},
		{"a heading in a code block", "[d](../README.md#not-a-heading)", "no heading #not-a-heading"},
		{"a third repeat", "[t](../README.md#twice-2)", "no heading #twice-2"},
		{"its own missing heading", "[s](#nothing)", "docs/t.md has no heading #nothing"},
		{"out of the repository", "[o](../../x.md)", "leaves the repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(root, "docs", "t.md"), []byte("# Guide\n\n"+tt.md+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			errs, err := checkLinks(root, "docs/t.md")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.want != "" && len(errs) != 1:
				t.Errorf("errors %v, want one with %q", errs, tt.want)
			case tt.want != "" && !strings.Contains(errs[0].Error(), tt.want):
				t.Errorf("error %q, want one with %q", errs[0], tt.want)
			}
		})
	}
}
