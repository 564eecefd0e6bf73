package config

// The BGP peers' TCP MD5 passwords reach the speakers through one Secret the
// controller writes, not through the Secrets the BGPPeers name: a speaker
// (on every node, on the host network) may read two Secrets by name, the
// memberlist key and this copy, and nothing else (docs/design-choices.md).
const (
	// DefaultBGPPasswordsSecret is the copy's name when no flag sets it.
	DefaultBGPPasswordsSecret = "herald-bgp-passwords"
	// BGPPasswordKey is the key of a BGPPeer's passwordSecret that holds
	// the password.
	BGPPasswordKey = "password"
	// BGPPasswordSecretType is the type a BGPPeer's passwordSecret must
	// have (kubernetes.io/basic-auth, as MetalLB documents it).
	BGPPasswordSecretType = "kubernetes.io/basic-auth"
)
