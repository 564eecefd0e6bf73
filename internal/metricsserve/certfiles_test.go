package metricsserve

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

func writePair(t *testing.T, dir, host string) []byte {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's way: new files, then the names swapped in.
	for name, data := range map[string][]byte{CertFile: certPEM, KeyFile: keyPEM} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return certPEM
}

func leafPEMIs(t *testing.T, c *tls.Certificate, certPEM []byte) bool {
	t.Helper()
	if c == nil {
		return false
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(c.Certificate[0], certs[0].Raw)
}

// TestFiles: an empty directory (an optional Secret volume before the
// controller wrote the Secret) serves the self-signed fallback; the pair
// written later is served without a restart, a renewed pair replaces it,
// and a broken pair keeps the last good one.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	get := Files(dir, 0, slog.New(slog.DiscardHandler))
	serve := servingCert(get)
	if get() != nil {
		t.Fatal("a certificate from an empty directory")
	}
	fallback, err := serve(nil)
	if err != nil || fallback == nil || fallback.Leaf == nil || fallback.Leaf.Subject.CommonName == "" {
		t.Fatalf("no self-signed fallback: %v", err)
	}
	first := writePair(t, dir, "herald-speaker-metrics.herald-system.svc")
	if c, _ := serve(nil); !leafPEMIs(t, c, first) {
		t.Fatal("the pair written into the directory is not served")
	}
	second := writePair(t, dir, "herald-speaker-metrics.herald-system.svc")
	if c, _ := serve(nil); !leafPEMIs(t, c, second) {
		t.Fatal("the renewed pair is not served")
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ := serve(nil); !leafPEMIs(t, c, second) {
		t.Fatal("a broken pair replaced the last good one")
	}
}
