package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var testEnv = []string{"PATH=/usr/bin:/bin"}

func start(t *testing.T, script string) (*Proc, string) {
	t.Helper()
	dir := t.TempDir()
	p, err := StartProc(ProcSpec{Argv: []string{"sh", "-c", script}, Env: testEnv, Dir: dir, Log: filepath.Join(dir, "c.log")})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

func TestExitCodes(t *testing.T) {
	for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "kill -9 $$": 137} {
		p, _ := start(t, script)
		if got := p.Wait().ExitCode; got != want {
			t.Errorf("%q: exit %d, want %d", script, got, want)
		}
	}
}

func TestOutputToLogAndCwd(t *testing.T) {
	p, dir := start(t, "echo out; echo err >&2; pwd; echo $PATH")
	p.Wait()
	log, _ := os.ReadFile(filepath.Join(dir, "c.log"))
	for _, want := range []string{"out\n", "err\n", dir + "\n", "/usr/bin:/bin\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log %q lacks %q", log, want)
		}
	}
}

func TestStartError(t *testing.T) {
	dir := t.TempDir()
	for _, argv := range [][]string{{"no-such-program-xyz"}, {"./missing.sh"}, nil} {
		_, err := StartProc(ProcSpec{Argv: argv, Env: testEnv, Dir: dir, Log: filepath.Join(dir, "c.log")})
		var se *StartError
		if !errors.As(err, &se) {
			t.Errorf("%v: err = %v, want a StartError", argv, err)
		}
	}
}

type signals struct {
	mu  sync.Mutex
	got []string
	at  []time.Time
}

func (s *signals) record(sig string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, sig)
	s.at = append(s.at, time.Now())
}

func TestSigtermHonouredWithinGrace(t *testing.T) {
	// traps SIGTERM, takes 0.5 s to clean up, exits 0
	p, dir := start(t, `trap 'sleep 0.5; echo cleaned > marker; exit 0' TERM; while :; do sleep 0.1; done`)
	time.Sleep(300 * time.Millisecond) // let the shell install its trap
	var s signals
	t0 := time.Now()
	p.Stop(5*time.Second, s.record)
	res := p.Wait()
	if res.ExitCode != 0 || time.Since(t0) > 4*time.Second {
		t.Fatalf("exit %d after %s, want 0 well within the grace", res.ExitCode, time.Since(t0))
	}
	if m, _ := os.ReadFile(filepath.Join(dir, "marker")); string(m) != "cleaned\n" {
		t.Fatalf("marker %q: the trap did not run", m)
	}
	if strings.Join(s.got, ",") != "SIGTERM" {
		t.Fatalf("signals %v, want only SIGTERM", s.got)
	}
}

func TestSigkillAfterGrace(t *testing.T) {
	p, _ := start(t, `trap '' TERM; while :; do sleep 0.1; done`)
	time.Sleep(300 * time.Millisecond)
	var s signals
	t0 := time.Now()
	p.Stop(1500*time.Millisecond, s.record)
	p.Stop(10*time.Second, s.record) // a later, longer grace never delays the SIGKILL
	res := p.Wait()
	took := time.Since(t0)
	if res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Fatalf("exit %d signal %q, want 137 SIGKILL", res.ExitCode, res.Signal)
	}
	if took < 1400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("killed after %s, want about the 1.5 s grace", took)
	}
	if strings.Join(s.got, ",") != "SIGTERM,SIGKILL" || s.at[1].Sub(s.at[0]) < 1400*time.Millisecond {
		t.Fatalf("signals %v at %v", s.got, s.at)
	}
}

func TestGraceZeroKillsAtOnce(t *testing.T) {
	p, _ := start(t, `trap '' TERM; sleep 30 & wait`)
	var s signals
	t0 := time.Now()
	p.Stop(0, s.record)
	res := p.Wait()
	if res.ExitCode != 137 || time.Since(t0) > 2*time.Second || strings.Join(s.got, ",") != "SIGKILL" {
		t.Fatalf("exit %d after %s, signals %v", res.ExitCode, time.Since(t0), s.got)
	}
}

func TestShorterGraceMovesKillForward(t *testing.T) {
	p, _ := start(t, `trap '' TERM; while :; do sleep 0.1; done`)
	time.Sleep(300 * time.Millisecond)
	var s signals
	t0 := time.Now()
	p.Stop(30*time.Second, s.record)
	p.Stop(0, s.record) // force delete after a graceful one
	p.Wait()
	if time.Since(t0) > 2*time.Second || strings.Join(s.got, ",") != "SIGTERM,SIGKILL" {
		t.Fatalf("after %s signals %v", time.Since(t0), s.got)
	}
}

func TestGroupChildrenSignalled(t *testing.T) {
	// SIGTERM goes to the whole group: the child gets it too (the parent waits for it, as an init would)
	p, dir := start(t, `sh -c 'trap "echo child-term > child; exit 0" TERM; while :; do sleep 0.1; done' & trap 'wait' TERM; wait`)
	time.Sleep(300 * time.Millisecond)
	var s signals
	p.Stop(3*time.Second, s.record)
	p.Wait()
	time.Sleep(200 * time.Millisecond)
	if m, _ := os.ReadFile(filepath.Join(dir, "child")); string(m) != "child-term\n" {
		t.Fatalf("child marker %q", m)
	}
}
