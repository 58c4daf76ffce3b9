package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainer/trainer/checkpoint"
)

// The test binary doubles as the trainer: with TRAINER_TEST_AS_MAIN=1 it runs main's command line
// instead of the tests, so a test can start a real trainer process and kill it.
func TestMain(m *testing.M) {
	if os.Getenv("TRAINER_TEST_AS_MAIN") == "1" {
		if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("trainer: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKilledProcessResumes SIGKILLs a training process (no chance to clean up) once it has written
// checkpoints, then resumes in a second process: the resume starts from the newest complete
// checkpoint and finishes the run with the same final weights as an uninterrupted run.
func TestKilledProcessResumes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		cfg := filepath.Join(dir, name+".yaml")
		body := "name: " + name + "\nnet:\n  name: linear\nsteps: 1000\ndata:\n  batch_size: 16\n  eval_batch_size: 5000\n" +
			"checkpoint:\n  every_steps: 10\n  keep: 2\nlog:\n  every_steps: 10\nrun_dir: " + filepath.Join(dir, "runs") + "\n"
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	trainerCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "TRAINER_TEST_AS_MAIN=1", "GOMLX_NO_AUTO_INSTALL=1")
		return cmd
	}
	killed := write("killed")
	child := trainerCmd("run", killed, "--no-progress")
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	ckptDir := filepath.Join(dir, "runs", "killed", "checkpoints")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if paths, _ := checkpoint.List(ckptDir); len(paths) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			child.Process.Kill()
			t.Fatalf("no checkpoints after 2 minutes:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if child.ProcessState.Success() {
		t.Fatalf("the run finished before it was killed:\n%s", out.String())
	}
	resume := trainerCmd("run", killed, "--no-progress", "--resume")
	resumeOut, err := resume.CombinedOutput()
	if err != nil || !strings.Contains(string(resumeOut), "done in") {
		t.Fatalf("resume after SIGKILL: %v\n%s", err, resumeOut)
	}
	// The killed process's lock was taken over, and said so.
	if want := "taking over the lock of pid " + strconv.Itoa(child.Process.Pid); !strings.Contains(string(resumeOut), want) {
		t.Errorf("resume after SIGKILL does not say %q:\n%s", want, resumeOut)
	}
	whole := write("whole")
	if b, err := trainerCmd("run", whole, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, b)
	}
	a, errA := checkpoint.Load(filepath.Join(dir, "runs", "killed", "checkpoints", "ckpt-000001000.tckpt"))
	b, errB := checkpoint.Load(filepath.Join(dir, "runs", "whole", "checkpoints", "ckpt-000001000.tckpt"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	for name, ta := range a.Tensors {
		tb, ok := b.Tensors[name]
		var x, y []byte
		ta.ConstBytes(func(d []byte) { x = append(x, d...) })
		if ok {
			tb.ConstBytes(func(d []byte) { y = append(y, d...) })
		}
		if !ok || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the killed-and-resumed run and the uninterrupted one", name)
		}
	}
}
