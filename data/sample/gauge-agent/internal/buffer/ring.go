// Package buffer keeps the most recent gauge samples in memory until the
// agent has uploaded them to the Tidewater ingest API.
package buffer

import (
	"errors"
	"sync"
	"time"
)

// ErrEmpty is returned by Pop when no sample is buffered.
var ErrEmpty = errors.New("buffer: empty")

// Sample is one raw water-level measurement, in metres above the datum.
type Sample struct {
	StationID string
	Taken     time.Time
	Level     float64
}

// Ring is a fixed-size FIFO of samples; when full, the oldest is dropped.
type Ring struct {
	mu      sync.Mutex
	items   []Sample
	head    int
	size    int
	dropped int
}

// NewRing returns an empty ring holding at most capacity samples.
func NewRing(capacity int) *Ring {
	if capacity < 1 {
		capacity = 1
	}
	return &Ring{items: make([]Sample, capacity)}
}

// Push adds a sample, overwriting the oldest one when the ring is full.
func (r *Ring) Push(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tail := (r.head + r.size) % len(r.items)
	r.items[tail] = s
	if r.size == len(r.items) {
		r.head = (r.head + 1) % len(r.items)
		r.dropped++
		return
	}
	r.size++
}

// Pop removes and returns the oldest sample.
func (r *Ring) Pop() (Sample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size == 0 {
		return Sample{}, ErrEmpty
	}
	s := r.items[r.head]
	r.head = (r.head + 1) % len(r.items)
	r.size--
	return s, nil
}

// Len reports how many samples are buffered.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
}

// Dropped reports how many samples were overwritten before upload.
func (r *Ring) Dropped() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
