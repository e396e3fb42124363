// Package readme holds the tests that keep the repository's README.md and
// the documents under docs/ true to the code beside them, so that a
// renamed or removed API, or a moved section, cannot leave them stale. It
// has no code of its own.
//
//   - TestDocsGoBlocksCompile type-checks every Go code block of README.md
//     and of every .md file under docs/ but the decision records in
//     docs/adr, which state a decision as it was taken.
//   - TestHelloWorldRuns builds the README's first complete program, the
//     hello world, from the README's text as written, serves one MCP
//     session to the SDK's client through it, and stops it with an
//     interrupt: it must call, refuse bad arguments and exit 0.
//   - TestDocsLinksResolve follows every relative link of those documents
//     and of the decision records: its file or folder must exist, and its
//     fragment must name a heading of the Markdown file it points to.
//
// # Which blocks
//
// Every fenced block whose language is go is checked; blocks in other
// languages (sh, json, text) are not. Pseudo-code that is not meant to
// compile goes in a text block. A block in "golang" fails the test, so
// that a block cannot slip past it by its spelling.
//
//   - A block that starts with a package clause is a complete program: it
//     must type-check as it is, with nothing ignored, as package main
//     with a func main.
//   - Any other block is a fragment: statements, or type, const and var
//     declarations, as in a function body (no methods; write a function
//     as a func literal). It is checked as the body of a function in a
//     file of its own, after the declarations of its go:vars directive.
//
// # The go:vars directive
//
// What a fragment assumes (the ctx, catalog, route or Ref that the text
// around it introduces) is declared by an HTML comment on the line right
// above the block (blank lines between are allowed; GitHub shows nothing
// of it):
//
//	<!-- go:vars ctx context.Context; cat *catalog.Catalog; route, bearer string; type V any -->
//
// Items are separated by semicolons. "NAME TYPE" (or "NAME, NAME TYPE")
// declares variables; "type NAME TYPE" declares a type, for a fragment
// that instantiates a generic API. A directive that no Go block follows, a
// misspelt one (any comment starting "<!-- go:") and one above a complete
// program fail the test.
//
// A fragment's file imports what it names of a fixed set of packages
// (context, errors, fmt, encoding/json as json, log/slog as slog,
// net/http as http, io, os, strings, time, this module's owner, shardreg,
// bindsec, catalog, mcpserve and etcdfleet, and the MCP Go SDK's mcp), in
// the directive's types as in the code. A fragment that names etcdfleet is
// checked in that module, which has its own go.mod.
//
// # How it checks
//
// go/types checks each block as a package of its own (so that two
// fragments may declare the same names), against the export data of the
// packages as this tree builds them: one go list -export per module for
// all blocks, which the build cache makes cheap after go test has built
// the same packages. Errors name the document, from the repository root,
// and its line and column.
//
// In a fragment, and only there, go/types' soft errors "declared and not
// used" and "imported and not used" are ignored: a fragment shows a call's
// results without using them, and its directive may declare more than it
// uses. Every other error fails the test, the soft "no new variables on
// left side of :=" included, since it means the fragment does not compile.
package readme
