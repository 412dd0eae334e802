package sandbox

// Since returns copies of the deliveries recorded after the first n (oldest first), so a
// watcher can follow the record without rescanning it.
func (r *Recorder) Since(n int) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n >= len(r.all) {
		return nil
	}
	return append([]Delivery(nil), r.all[max(n, 0):]...)
}
