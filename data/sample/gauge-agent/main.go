// Command gauge-agent reads a tide gauge's serial output and forwards the
// samples to the Tidewater ingest API, buffering them while offline.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"example.com/gauge-agent/internal/buffer"
)

// config holds the command-line settings.
type config struct {
	station  string
	capacity int
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.station, "station", "8443970", "station id reported with each sample")
	flag.IntVar(&c.capacity, "buffer", 4096, "samples kept while the API is unreachable")
	flag.Parse()
	return c
}

// parseLine turns "2024-03-01T12:00:00Z 1.234" into a sample.
func parseLine(station, line string) (buffer.Sample, error) {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return buffer.Sample{}, fmt.Errorf("want 2 fields {time level}, got %d", len(fields))
	}
	taken, err := time.Parse(time.RFC3339, fields[0])
	if err != nil {
		return buffer.Sample{}, err
	}
	level, err := strconv.ParseFloat(fields[1], 64)
	if err != nil {
		return buffer.Sample{}, err
	}
	return buffer.Sample{StationID: station, Taken: taken, Level: level}, nil
}

func main() {
	cfg := parseFlags()
	ring := buffer.NewRing(cfg.capacity)
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		s, err := parseLine(cfg.station, scanner.Text())
		if err != nil {
			log.Printf("skipping line: %v", err)
			continue
		}
		ring.Push(s)
	}
	log.Printf("buffered %d samples (%d dropped)", ring.Len(), ring.Dropped())
}
