package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// chartLimits is how the Helm chart bounds courier's memory: Go's soft
// limit (GOMEMLIMIT, value goMemLimit) under the container's hard limit
// (resources.limits.memory), as charts/courier/values.yaml sets them.
type chartLimits struct {
	GoMemLimit string `json:"goMemLimit"`
	LimitBytes int64  `json:"memoryLimitBytes"`
}

// readChartLimits reads the two values from the chart's values.yaml: the
// top-level goMemLimit and the memory under resources.limits.
func readChartLimits(path string) (chartLimits, error) {
	f, err := os.Open(path)
	if err != nil {
		return chartLimits{}, err
	}
	defer f.Close()
	var l chartLimits
	var block []string // the keys of the enclosing mappings, by indentation
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := (len(line) - len(strings.TrimLeft(line, " "))) / 2
		key, value, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		value, _, _ = strings.Cut(value, "#")
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		block = append(block[:min(indent, len(block))], key)
		switch strings.Join(block, ".") {
		case "goMemLimit":
			l.GoMemLimit = value
		case "resources.limits.memory":
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return l, fmt.Errorf("%s: resources.limits.memory %q: %w", path, value, err)
			}
			l.LimitBytes = q.Value()
		}
	}
	if err := sc.Err(); err != nil {
		return l, err
	}
	if l.GoMemLimit == "" || l.LimitBytes == 0 {
		return l, fmt.Errorf("%s: no goMemLimit and resources.limits.memory (found %+v)", path, l)
	}
	return l, nil
}

// memCgroup is a memory cgroup limited as a container's: courier runs in it
// as a pod would, so the kernel OOM-kills it where a node would.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes the cgroup name with a hard memory limit and no swap,
// under cgroup v2 where it is mounted with the memory controller, else under
// v1's memory hierarchy.
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	g := &memCgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
	files := [][2]string{{"memory.max", fmt.Sprint(limit)}, {"memory.swap.max", "0"}}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err != nil || !strings.Contains(string(b), "memory") {
		g = &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
		files = [][2]string{{"memory.limit_in_bytes", fmt.Sprint(limit)}, {"memory.memsw.limit_in_bytes", fmt.Sprint(limit)}}
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w (run as root on a machine with a writable cgroup hierarchy)", err)
	}
	for _, f := range files {
		err := os.WriteFile(filepath.Join(g.dir, f[0]), []byte(f[1]), 0o644)
		if errors.Is(err, os.ErrNotExist) && strings.Contains(f[0], "sw") {
			continue // no swap accounting: no swap to limit
		}
		if err != nil {
			g.remove()
			return nil, fmt.Errorf("memory cgroup: %s: %w", f[0], err)
		}
	}
	return g, nil
}

// wrap returns the command line that runs argv inside the cgroup: a shell
// that moves itself into it, then execs argv (same PID).
func (g *memCgroup) wrap(argv []string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(g.dir, "cgroup.procs")}, argv...)
}

// oomKills is how many processes the kernel killed in the cgroup for
// running out of memory.
func (g *memCgroup) oomKills() int {
	file := "memory.oom_control"
	if g.v2 {
		file = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(g.dir, file))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// peak is the cgroup's highest memory use (RSS and the page cache its
// processes caused), in bytes.
func (g *memCgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if g.v2 {
		file = "memory.peak"
	}
	b, _ := os.ReadFile(filepath.Join(g.dir, file))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func (g *memCgroup) remove() { _ = os.Remove(g.dir) }
