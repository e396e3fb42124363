// Package readme holds the test that keeps the complete programs in the
// repository's README.md compiling against the code beside them. It has no
// code of its own.
package readme
