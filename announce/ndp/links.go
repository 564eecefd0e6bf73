package ndp

import (
	"github.com/herald-lb/herald/announce/internal/responder"
	"github.com/herald-lb/herald/announce/netif"
)

// LinksChanged tells the responder about link events (see
// netif.FollowLinks): its listeners on those interfaces are checked at
// once, and one that went down announces again when it is back. The
// responder follows no link events itself; without these calls it checks
// its interfaces once a second.
func (r *Responder) LinksChanged(c netif.Changes) {
	r.e.LinksChanged(responder.LinksChanged{All: c.All, Changed: c.Changed, Down: c.Down})
}
