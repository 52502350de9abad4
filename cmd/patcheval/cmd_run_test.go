package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunFlags(t *testing.T) {
	v, err := parseKernelFlag("full=/k/vmlinux,arch=ppc64le,cmdline=selinux=0 enforcing=0,preempt=full")
	if err != nil || v.Kernel.Variant != "full" || v.Kernel.Image != "/k/vmlinux" || v.Kernel.Cmdline != "selinux=0 enforcing=0" || v.Preempt != "full" {
		t.Fatalf("%+v %v", v, err)
	}
	for _, bad := range []string{"novariant", "=x", "a=/k,arch=mips", "a=/k,colour=red"} {
		if _, err := parseKernelFlag(bad); err == nil {
			t.Errorf("--kernel %q accepted", bad)
		}
	}
	bs, err := parseBenches("kill,getppid:1000,rcu:50,stress-ng-kill:5")
	if err != nil || len(bs) != 4 || bs[1].Ops != 1000 || bs[2].Calls != 50 || bs[3].Seconds != 5 {
		t.Fatalf("%+v %v", bs, err)
	}
	for _, bad := range []string{"", "nope", "kill:x", "kill:-1"} {
		if _, err := parseBenches(bad); err == nil {
			t.Errorf("--bench %q accepted", bad)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"run", "--bench", "kill"}); code != 2 || !strings.Contains(errb.String(), "--kernel") {
		t.Errorf("run without --kernel: code %d, %s", code, errb.String())
	}
}
