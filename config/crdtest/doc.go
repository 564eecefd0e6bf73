// Package crdtest holds the generated CRDs (config/crd) against the Go types
// and config.Parse: every value the API server admits is one the typed
// decoder can read and Parse can judge, and every refusal names its field.
// It is tests only, in a package of its own so that the API server's
// validation code they link stays out of the other packages' test binaries
// (and their fuzzers' coverage).
package crdtest
