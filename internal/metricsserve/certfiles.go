package metricsserve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The files of a certificate directory: a kubernetes.io/tls Secret's keys,
// as the kubelet writes a Secret volume.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// maxCertFile caps what is read of each file.
const maxCertFile = 1 << 20

// Files serves the certificate of dir (tls.crt, tls.key), for Options'
// cert: it looks at the files at most once per recheck and reloads them
// when their size or modification time changes (a Secret volume's update
// swaps a symlink: the files seen through it change). Until a pair loads
// (the Secret not written yet: an optional volume is empty) it returns nil;
// a pair that does not load (half written, an edited Secret) is logged and
// the last good one kept.
func Files(dir string, recheck time.Duration, log *slog.Logger) func() *tls.Certificate {
	f := &certFiles{dir: dir, recheck: recheck, log: log}
	return f.get
}

type certFiles struct {
	dir     string
	recheck time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string
	cert    *tls.Certificate
}

func (f *certFiles) get() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if !f.checked.IsZero() && now.Sub(f.checked) < f.recheck {
		return f.cert
	}
	f.checked = now
	stamp, err := f.stat()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.log.Warn("metrics certificate not loaded; serving the previous one", "dir", f.dir, "error", err)
	}
	if err != nil || stamp == f.stamp {
		return f.cert // absent (kept: a deleted Secret leaves what was served) or unchanged
	}
	c, err := f.load()
	if err != nil {
		f.log.Warn("metrics certificate not loaded; serving the previous one", "dir", f.dir, "error", err)
		return f.cert
	}
	f.stamp, f.cert = stamp, c
	f.log.Info("metrics certificate loaded", "dir", f.dir, "notAfter", c.Leaf.NotAfter, "dnsNames", c.Leaf.DNSNames)
	return f.cert
}

func (f *certFiles) stat() (string, error) {
	var stamp string
	for _, name := range []string{CertFile, KeyFile} {
		fi, err := os.Stat(filepath.Join(f.dir, name))
		if err != nil {
			return "", err
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxCertFile {
			return "", fmt.Errorf("%s: not a regular file of at most %d bytes", filepath.Join(f.dir, name), maxCertFile)
		}
		stamp += fmt.Sprintf("%d/%d ", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

func (f *certFiles) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(filepath.Join(f.dir, CertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(f.dir, KeyFile))
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.dir, err)
	}
	return &c, nil
}
