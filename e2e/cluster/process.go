package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane component started by this package.
type process struct {
	name    string
	bin     string
	args    []string
	env     []string // nil: this process's environment
	logPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log for %s: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a terminal's Ctrl-C reaches only us and we
	// stop the component in order; and killed if this process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs. Safe to call twice.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the process at once with SIGKILL, as a crash would.
func (p *process) kill() {
	if p.cmd == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// logTail returns the last lines of the process's log, for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return fmt.Sprintf("last lines of %s:\n%s", filepath.Base(p.logPath), bytes.Join(lines, []byte("\n")))
}
