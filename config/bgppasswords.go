package config

// The BGP peers' TCP MD5 passwords reach the speakers through one Secret the
// controller writes, not through the Secrets the BGPPeers name: a speaker
// (on every node, on the host network) may read two Secrets by name, the
// memberlist key and this copy, and nothing else (docs/design-choices.md).
const (
	// DefaultBGPPasswordsSecret is the copy's name when no flag sets it.
	DefaultBGPPasswordsSecret = "herald-bgp-passwords"
	// BGPPasswordKey is the key of a BGPPeer's passwordSecret that holds
	// the password: the password key of a kubernetes.io/basic-auth Secret
	// (corev1.BasicAuthPasswordKey), the type the Secret must have.
	BGPPasswordKey = "password"
)
