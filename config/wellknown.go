package config

// The names and keys of the Secrets Herald's roles share, written once: the
// controller writes them, the speakers read them, the cleanup hook deletes
// them, and the flags name their defaults from here.
const (
	// DefaultMemberlistSecret is the name of the Secret (in the install
	// namespace) that holds the speakers' gossip encryption key, when no
	// flag sets it. The controller creates it; the speakers read it.
	DefaultMemberlistSecret = "herald-memberlist"
	// MemberlistKey is the key of that Secret holding the 32-byte gossip
	// key (speaker/members: a key that changes is rotated in without a
	// gossip gap).
	MemberlistKey = "secretkey"

	// DefaultBGPPasswordsSecret is the name of the controller's copy of the
	// BGP peers' TCP MD5 passwords when no flag sets it. The passwords
	// reach the speakers through this one Secret, not through the Secrets
	// the BGPPeers name: a speaker (on every node, on the host network) may
	// read two Secrets by name, the memberlist key and this copy, and
	// nothing else (docs/design-choices.md).
	DefaultBGPPasswordsSecret = "herald-bgp-passwords"
	// BGPPasswordKey is the key of a BGPPeer's passwordSecret that holds
	// the password: the password key of a kubernetes.io/basic-auth Secret
	// (corev1.BasicAuthPasswordKey), the type the Secret must have.
	BGPPasswordKey = "password"
)
