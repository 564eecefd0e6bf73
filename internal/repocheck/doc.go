// Package repocheck holds tests over the repository as a whole (no code):
// that every fuzz target is in the Makefile's fuzz list with a committed
// corpus.
package repocheck
