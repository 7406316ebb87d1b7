package bench

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a report was measured. CPUs and Go are SPEC.md's;
// the rest is filled in where the platform tells (Linux's /proc).
type Machine struct {
	CPUs        int    `json:"cpus"`
	Go          string `json:"go"`
	OS          string `json:"os"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	// LoadAverage is the 1-minute load average at the start, a sign of
	// other work sharing the machine.
	LoadAverage float64 `json:"load_average,omitempty"`
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.MemoryBytes = kb * 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadAverage, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	return m
}

// Report is what `shardcounter bench --json` writes: SPEC.md's
// {"machine":{...},"runs":[...]}.
type Report struct {
	Machine Machine `json:"machine"`
	Runs    []Run   `json:"runs"`
}

// NewReport returns a report of runs measured on this machine.
func NewReport(runs []Run) Report {
	return Report{Machine: ThisMachine(), Runs: runs}
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
