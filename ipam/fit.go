package ipam

// fits reports whether h is still a valid assignment for svc.
func (a *Allocator) fits(h *holder, svc *Service, w wanted, s *shareInfo) bool {
	p := h.pool
	req := &svc.Request
	if !p.serves(svc) || (req.Pool != "" && req.Pool != p.name()) {
		return false
	}
	if len(req.Addrs) == 0 && req.Pool == "" && !p.cfg.AutoAssign {
		return false
	}
	for _, r := range req.Addrs {
		if !h.has(r) {
			return false
		}
	}
	n := h.count()
	if p.isNodePool() {
		return n == 0
	}
	if n == 0 || n < w.required || n > w.n {
		return false
	}
	for _, ad := range h.list() {
		if !w.has(famOf(ad)) {
			return false
		}
	}
	// Without a requested address the primary family must be there (a
	// requested secondary-family address may stand alone, and so may the
	// secondary family of a PreferDualStack Service).
	if len(req.Addrs) == 0 && w.required == w.n && !h.addrOf(w.fam[0]).IsValid() {
		return false
	}
	for _, ad := range h.list() {
		if o, _ := a.conflict(ad, s, h.key); o != nil {
			return false
		}
	}
	return true
}
