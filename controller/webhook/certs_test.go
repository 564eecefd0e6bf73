package webhook

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

var testPolicy = Policy{
	Hosts:        []string{"herald-webhook.herald-system.svc", "127.0.0.1"},
	CAValidity:   300 * 24 * time.Hour,
	CertValidity: 30 * 24 * time.Hour,
	StageFor:     time.Hour,
}

// verify checks that the bundle's serving certificate is trusted by trust
// (PEM) for every host of the policy.
func verify(t *testing.T, p Policy, certPEM, trust []byte, at time.Time) error {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(trust) {
		t.Fatalf("no CA in the trust bundle")
	}
	c := parseCerts(certPEM)
	if len(c) != 1 {
		t.Fatalf("%d serving certificates, want 1", len(c))
	}
	if _, err := c[0].Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return err
	}
	for _, h := range p.Hosts {
		if err := c[0].VerifyHostname(h); err != nil {
			return err
		}
	}
	return nil
}

func mustNext(t *testing.T, p Policy, b Bundle, at time.Time) (Bundle, string) {
	t.Helper()
	out, what, err := p.Next(b, at)
	if err != nil {
		t.Fatal(err)
	}
	return out, what
}

func TestNext(t *testing.T) {
	day := 24 * time.Hour
	fresh, what := mustNext(t, testPolicy, nil, t0)
	if !strings.Contains(what, "new CA") {
		t.Fatalf("empty Secret: %q, want a new CA", what)
	}
	if err := verify(t, testPolicy, fresh[SecretCertField], fresh[SecretCAField], t0); err != nil {
		t.Fatalf("fresh bundle: %v", err)
	}
	other, _ := mustNext(t, testPolicy, nil, t0)
	withHost := testPolicy
	withHost.Hosts = append([]string{"herald-webhook.other.svc"}, testPolicy.Hosts...)

	tests := []struct {
		name   string
		policy Policy
		in     Bundle
		at     time.Time
		// what is a fragment of the change ("": none)
		what    string
		sameCA  bool
		newCert bool
	}{
		{name: "fresh, a day later", in: fresh, at: t0.Add(day), sameCA: true},
		{name: "fresh, just before two thirds of the certificate's life", in: fresh, at: t0.Add(20*day - time.Minute), sameCA: true},
		{name: "certificate with a third of its life left", in: fresh, at: t0.Add(20*day + time.Minute), what: "serving certificate renewed (expires", sameCA: true, newCert: true},
		{name: "a host added", policy: withHost, in: fresh, at: t0.Add(day), what: "does not name herald-webhook.other.svc", sameCA: true, newCert: true},
		{name: "certificate missing", in: without2(fresh, SecretCertField), at: t0.Add(day), what: "serving certificate renewed (missing)", sameCA: true, newCert: true},
		{name: "certificate from another CA", in: with(fresh, SecretCertField, other[SecretCertField], SecretKeyField, other[SecretKeyField]), at: t0.Add(day),
			what: "not signed by the signing CA", sameCA: true, newCert: true},
		{name: "key of another certificate", in: with(fresh, SecretKeyField, other[SecretKeyField]), at: t0.Add(day), what: "key does not match", sameCA: true, newCert: true},
		{name: "CA key missing", in: without2(fresh, SecretCAKeyField), at: t0.Add(day), what: "no usable CA", newCert: true},
		{name: "garbage", in: Bundle{SecretCAField: []byte("x"), SecretCAKeyField: []byte("y")}, at: t0, what: "no usable CA", newCert: true},
		{name: "CA expired", in: fresh, at: t0.Add(301 * day), what: "no usable CA", newCert: true},
		{name: "CA with a third of its life left: next CA staged, nothing else yet", in: fresh, at: t0.Add(201 * day),
			what: "next CA staged", sameCA: false, newCert: true /* the certificate is due as well */},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy
			if p.Hosts == nil {
				p = testPolicy
			}
			out, what := mustNext(t, p, tc.in, tc.at)
			if (tc.what == "") != (what == "") || !strings.Contains(what, tc.what) {
				t.Fatalf("change %q, want %q", what, tc.what)
			}
			if got := string(out[SecretCAKeyField]) == string(tc.in[SecretCAKeyField]); got != (tc.sameCA || tc.what == "next CA staged") {
				t.Errorf("signing CA kept = %v", got)
			}
			if got := string(out[SecretCertField]) != string(tc.in[SecretCertField]); got != tc.newCert {
				t.Errorf("new serving certificate = %v, want %v", got, tc.newCert)
			}
			if err := verify(t, p, out[SecretCertField], out[SecretCAField], tc.at); err != nil {
				t.Errorf("the result does not verify: %v", err)
			}
			if what == "" {
				if again, w := mustNext(t, p, out, tc.at); w != "" || string(again[SecretCertField]) != string(out[SecretCertField]) {
					t.Errorf("not stable: a second pass says %q", w)
				}
			}
		})
	}
}

// TestNextStagesBeforeSigning: a staged CA is trusted for StageFor before it
// signs, and the previous CA stays trusted after.
func TestNextStagesBeforeSigning(t *testing.T) {
	p := testPolicy
	b, _ := mustNext(t, p, nil, t0)
	stagedAt := t0.Add(201 * 24 * time.Hour)
	staged, what := mustNext(t, p, b, stagedAt)
	if !strings.HasPrefix(what, "next CA staged") || len(parseCerts(staged[SecretCAField])) != 2 {
		t.Fatalf("%q, %d CAs: want the next CA staged beside the old one", what, len(parseCerts(staged[SecretCAField])))
	}
	if out, what := mustNext(t, p, staged, stagedAt.Add(p.StageFor-time.Second)); what != "" || string(out[SecretCAKeyField]) != string(b[SecretCAKeyField]) {
		t.Fatalf("before StageFor: %q, want nothing", what)
	}
	out, what := mustNext(t, p, staged, stagedAt.Add(p.StageFor))
	if !strings.HasPrefix(what, "next CA now signs; serving certificate renewed") || string(out[SecretCAKeyField]) != string(staged[SecretNextCAKeyField]) {
		t.Fatalf("after StageFor: %q, want the next CA to sign a new certificate", what)
	}
	if out[SecretNextCAKeyField] != nil || out[SecretStagedAtField] != nil {
		t.Errorf("the staging fields are left: %q", out)
	}
	if err := verify(t, p, staged[SecretCertField], out[SecretCAField], stagedAt.Add(p.StageFor)); err != nil {
		t.Errorf("the old CA's certificate is not trusted any more: %v", err)
	}
	if err := verify(t, p, out[SecretCertField], staged[SecretCAField], stagedAt.Add(p.StageFor)); err != nil {
		t.Errorf("the new certificate is not trusted by the staged bundle: %v", err)
	}
	// The old CA leaves the bundle when it expires.
	last, what := mustNext(t, p, out, t0.Add(300*24*time.Hour+time.Minute))
	if n := len(parseCerts(last[SecretCAField])); n != 1 || !strings.Contains(what, "expired CA dropped") {
		t.Errorf("after the old CA expired: %q, %d CAs", what, n)
	}
}

func with(b Bundle, kv ...any) Bundle {
	out := Bundle{}
	for k, v := range b {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].([]byte)
	}
	return out
}

func without2(b Bundle, key string) Bundle {
	out := with(b)
	delete(out, key)
	return out
}

// TestRotationNeverUntrusted runs the renewal every StageFor over more than
// three CA lifetimes, as every replica does, and checks the promise of the
// rotation: at every step, the certificate a lagging replica still serves is
// trusted by the new bundle, and the new certificate is trusted by the bundle
// the API server had one step before. Every certificate is renewed before it
// expires, and the CA is rotated.
func TestRotationNeverUntrusted(t *testing.T) {
	p := testPolicy
	p.StageFor = 24 * time.Hour // one pass a day: about 1,000 passes
	b, _ := mustNext(t, p, nil, t0)
	var certs, cas, staged int
	for at := t0; at.Before(t0.Add(1000 * 24 * time.Hour)); at = at.Add(p.StageFor) {
		out, what := mustNext(t, p, b, at)
		if err := verify(t, p, b[SecretCertField], out[SecretCAField], at); err != nil {
			t.Fatalf("%s: a replica that has not reloaded serves a certificate the new bundle does not trust (%q): %v", at, what, err)
		}
		if err := verify(t, p, out[SecretCertField], b[SecretCAField], at); err != nil {
			t.Fatalf("%s: the new certificate is not trusted by the bundle of one step before (%q): %v", at, what, err)
		}
		if err := verify(t, p, out[SecretCertField], out[SecretCAField], at.Add(p.StageFor)); err != nil {
			t.Fatalf("%s: the certificate would expire before the next pass: %v", at, err)
		}
		if strings.Contains(what, "serving certificate renewed") {
			certs++
		}
		if strings.Contains(what, "next CA now signs") {
			cas++
		}
		if strings.Contains(what, "next CA staged") {
			staged++
		}
		if strings.Contains(what, "no usable CA") {
			t.Fatalf("%s: started over: %q", at, what)
		}
		if n := len(parseCerts(out[SecretCAField])); n > 2 {
			t.Fatalf("%s: %d CAs in the bundle", at, n)
		}
		b = out
	}
	if cas < 3 || staged != cas || certs < 30 {
		t.Errorf("%d serving certificates, %d CAs staged, %d promoted over 1000 days; want >= 30, >= 3, as many", certs, staged, cas)
	}
	t.Logf("1000 days: %d serving certificates, %d CA rotations", certs, cas)
}
