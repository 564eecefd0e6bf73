package webhook

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// The keys of the webhook Secret.
const (
	// SecretCAField is the trust bundle, PEM: every CA the API server must
	// trust (the caBundle of the webhook configuration). It holds the CA
	// that signs, and around a CA rotation also the next CA (staged) or the
	// previous one (until it expires).
	SecretCAField = "ca.crt"
	// SecretCAKeyField is the signing CA's private key.
	SecretCAKeyField = "ca.key"
	// SecretNextCAKeyField is the staged next CA's key, while a CA rotation
	// waits for the bundle with the next CA to reach the API server.
	SecretNextCAKeyField = "next-ca.key"
	// SecretStagedAtField is when the next CA was staged (RFC 3339).
	SecretStagedAtField = "next-ca.staged-at"
	// SecretCertField and SecretKeyField are the serving certificate and key
	// (the kubernetes.io/tls names).
	SecretCertField = "tls.crt"
	SecretKeyField  = "tls.key"
)

// clockSkew backdates every certificate: replicas and the API server do not
// share a clock.
const clockSkew = 5 * time.Minute

// Policy says what certificates the webhook needs and when they are renewed.
type Policy struct {
	// Hosts are the serving certificate's names: DNS names (the Service's
	// <name>.<namespace>.svc, which the API server checks even when it dials
	// a pod's address) and IP addresses.
	Hosts []string
	// CAValidity and CertValidity are the lifetimes of a new CA and of a new
	// serving certificate (capped at its CA's expiry). Each is renewed when a
	// third of its lifetime is left.
	CAValidity, CertValidity time.Duration
	// StageFor is how long a new CA is in the trust bundle before it signs:
	// time for every replica to patch the bundle into the webhook
	// configuration and for the API server to see it, so that no replica
	// serves a certificate the API server cannot verify yet.
	StageFor time.Duration
}

// DefaultPolicy: a CA for 3 years (renewed with a year left), serving
// certificates for 90 days (renewed with 30 days left), a new CA trusted for
// 10 minutes before it signs.
func DefaultPolicy(hosts []string) Policy {
	return Policy{Hosts: hosts, CAValidity: 3 * 365 * 24 * time.Hour, CertValidity: 90 * 24 * time.Hour, StageFor: 10 * time.Minute}
}

// Bundle is the content of the webhook Secret (its Data).
type Bundle map[string][]byte

// Next returns the bundle to store instead of b at time now, and what
// changed ("" when b is fine as it is and is returned unchanged). It is pure
// but for the randomness of new keys:
//
//   - without a usable signing CA (first start, an edited or expired
//     Secret), everything is made anew;
//   - a signing CA with a third of its life left is rotated in two steps: a
//     next CA is generated and added to the trust bundle (staged); once it
//     has been there for StageFor it becomes the signing CA and signs a new
//     serving certificate, the old CA staying in the bundle until it
//     expires, so certificates served by replicas that have not reloaded yet
//     stay trusted;
//   - a serving certificate that is unreadable, not from the signing CA,
//     missing one of the hosts, or has a third of its life left is renewed.
func (p Policy) Next(b Bundle, now time.Time) (Bundle, string, error) {
	trust := parseCerts(b[SecretCAField])
	caKey, _ := parseKey(b[SecretCAKeyField])
	ca := certFor(trust, caKey)
	if ca == nil || !now.Before(ca.NotAfter) {
		out, err := p.fresh(now)
		return out, "new CA and serving certificate (no usable CA in the Secret)", err
	}
	out := Bundle{}
	for k, v := range b {
		out[k] = v
	}
	var what []string
	if now.After(renewAt(ca)) {
		nextKey, _ := parseKey(b[SecretNextCAKeyField])
		next := certFor(trust, nextKey)
		stagedAt, err := time.Parse(time.RFC3339, string(b[SecretStagedAtField]))
		switch {
		case next == nil || err != nil || now.After(renewAt(next)):
			next, nextKey, err = p.newCA(now)
			if err != nil {
				return nil, "", err
			}
			trust = append(trust, next)
			out[SecretNextCAKeyField] = encodeKey(nextKey)
			out[SecretStagedAtField] = []byte(now.UTC().Format(time.RFC3339))
			what = append(what, fmt.Sprintf("next CA staged (the CA expires %s)", ca.NotAfter.UTC().Format(time.RFC3339)))
		case now.Sub(stagedAt) >= p.StageFor:
			ca, caKey = next, nextKey
			out[SecretCAKeyField] = encodeKey(nextKey)
			delete(out, SecretNextCAKeyField)
			delete(out, SecretStagedAtField)
			what = append(what, "next CA now signs")
		}
	}
	// The trust bundle: the signing CA first, then the staged or previous
	// ones still valid.
	kept := []*x509.Certificate{ca}
	for _, c := range trust {
		switch {
		case c.Equal(ca):
		case now.Before(c.NotAfter):
			kept = append(kept, c)
		default:
			what = append(what, "expired CA dropped from the trust bundle")
		}
	}
	out[SecretCAField] = encodeCerts(kept)
	if why := p.certProblem(b, ca, now); why != "" {
		certPEM, keyPEM, err := p.newCert(ca, caKey, now)
		if err != nil {
			return nil, "", err
		}
		out[SecretCertField], out[SecretKeyField] = certPEM, keyPEM
		what = append(what, "serving certificate renewed ("+why+")")
	}
	if len(what) == 0 && bytes.Equal(out[SecretCAField], b[SecretCAField]) {
		return b, "", nil
	}
	if len(what) == 0 {
		what = append(what, "trust bundle rewritten")
	}
	return out, strings.Join(what, "; "), nil
}

// renewAt is when a certificate has a third of its lifetime left, counted
// from when it was issued (NotBefore is backdated by clockSkew).
func renewAt(c *x509.Certificate) time.Time {
	issued := c.NotBefore.Add(clockSkew)
	return c.NotAfter.Add(-c.NotAfter.Sub(issued) / 3)
}

// certProblem says why b's serving certificate must be renewed ("" when it
// need not).
func (p Policy) certProblem(b Bundle, ca *x509.Certificate, now time.Time) string {
	certs := parseCerts(b[SecretCertField])
	key, _ := parseKey(b[SecretKeyField])
	if len(certs) == 0 || key == nil {
		return "missing"
	}
	c := certs[0]
	if !publicKeyEqual(c.PublicKey, key.Public()) {
		return "key does not match"
	}
	if err := c.CheckSignatureFrom(ca); err != nil {
		return "not signed by the signing CA"
	}
	for _, h := range p.Hosts {
		if err := c.VerifyHostname(h); err != nil {
			return "does not name " + h
		}
	}
	if now.After(renewAt(c)) {
		return fmt.Sprintf("expires %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

func (p Policy) fresh(now time.Time) (Bundle, error) {
	ca, key, err := p.newCA(now)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := p.newCert(ca, key, now)
	if err != nil {
		return nil, err
	}
	return Bundle{
		SecretCAField:    encodeCerts([]*x509.Certificate{ca}),
		SecretCAKeyField: encodeKey(key),
		SecretCertField:  certPEM,
		SecretKeyField:   keyPEM,
	}, nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func (p Policy) newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "herald-webhook-ca", Organization: []string{"herald.dev"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(p.CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the webhook CA: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func (p Policy) newCert(ca *x509.Certificate, caKey crypto.Signer, now time.Time) (certPEM, keyPEM []byte, err error) {
	if len(p.Hosts) == 0 {
		return nil, nil, errors.New("the webhook's serving certificate needs at least one host name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(p.CertValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: p.Hosts[0]},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range p.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the webhook's serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key), nil
}

func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			return out
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

func parseKey(data []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(data)
	if blk == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

func encodeKey(k crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err) // only our own ECDSA keys get here
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func encodeCerts(cs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// certFor returns the CA certificate among trust whose public key is key's.
func certFor(trust []*x509.Certificate, key crypto.Signer) *x509.Certificate {
	if key == nil {
		return nil
	}
	i := slices.IndexFunc(trust, func(c *x509.Certificate) bool { return c.IsCA && publicKeyEqual(c.PublicKey, key.Public()) })
	if i < 0 {
		return nil
	}
	return trust[i]
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	ak, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ak.Equal(b)
}
