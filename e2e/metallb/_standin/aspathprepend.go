// Stand-in for the AS-path-prepend declarations that MetalLB v0.16.2 compiles against in
// github.com/metallb/frr-k8s/api/v1beta1 v0.0.27, a version the Go module proxy refuses to serve.
//
// e2e/metallb/build.sh copies this file into a copy of frr-k8s v0.0.26's api/v1beta1 (the newest version the proxy
// serves) and adds one field to Advertise and one line to its DeepCopyInto that use it. Written for Herald's lab; it
// is not frr-k8s code. Only MetalLB's frr-k8s BGP mode (METALLB_BGP_TYPE=frr-k8s) reads these values; the native
// BGP mode and layer 2 mode never do. This directory starts with "_" so that the go tool ignores it.

package v1beta1

// AsPathPrependPrefixes is a list of prefixes advertised with the local AS number prepended AsPathPrepend times.
type AsPathPrependPrefixes struct {
	// Prefixes is the list of prefixes the prepend applies to.
	Prefixes []string `json:"prefixes,omitempty"`
	// AsPathPrepend is how many times the local AS number is prepended.
	AsPathPrepend uint8 `json:"asPathPrepend,omitempty"`
}

// DeepCopyInto copies the receiver into out. in must be non-nil.
func (in *AsPathPrependPrefixes) DeepCopyInto(out *AsPathPrependPrefixes) {
	*out = *in
	if in.Prefixes != nil {
		out.Prefixes = make([]string, len(in.Prefixes))
		copy(out.Prefixes, in.Prefixes)
	}
}

// DeepCopy copies the receiver into a new AsPathPrependPrefixes.
func (in *AsPathPrependPrefixes) DeepCopy() *AsPathPrependPrefixes {
	if in == nil {
		return nil
	}
	out := new(AsPathPrependPrefixes)
	in.DeepCopyInto(out)
	return out
}

// heraldStandinCopyAsPathPrepend deep-copies Advertise.PrefixesWithAsPathPrepend (called from the line build.sh
// adds to Advertise.DeepCopyInto).
func heraldStandinCopyAsPathPrepend(in []AsPathPrependPrefixes) []AsPathPrependPrefixes {
	if in == nil {
		return nil
	}
	out := make([]AsPathPrependPrefixes, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
