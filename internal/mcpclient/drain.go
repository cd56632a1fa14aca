package mcpclient

import "time"

// retire marks u as replaced or removed: it takes no new request (one
// that finds it so is sent to the server that replaced it, if any), and
// the requests it runs may finish (drain).
func (u *upstream) retire() {
	u.mu.Lock()
	u.retired = true
	u.mu.Unlock()
}

// drain waits until the requests running on u's session (tool calls,
// prompts, resource reads) have ended, so that stopping u cuts none of
// them off. It returns early when the session is no longer ready (what
// runs on it ends anyway), when the Manager closes or hurries, or after
// timeout: the requests still running then are cut off by the stop.
func (m *Manager) drain(u *upstream) {
	timeout := m.opts.DrainTimeout
	if timeout <= 0 {
		return
	}
	idle, running := u.requests.idle()
	if running == 0 {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	u.log.Info().Int("requests", running).Dur("timeout", timeout).Msg("letting the requests in flight finish before the server stops")
	for {
		u.mu.Lock()
		ready, changed := u.state == StateReady, u.changed
		u.mu.Unlock()
		if !ready {
			return
		}
		select {
		case <-idle:
			return
		case <-changed:
		case <-m.closing.Done():
			return
		case <-m.stopping.Done():
			return
		case <-t.C:
			_, running = u.requests.idle()
			u.log.Warn().Int("requests", running).Dur("timeout", timeout).Msg("requests still in flight when the server stops: they are cut off")
			return
		}
	}
}
