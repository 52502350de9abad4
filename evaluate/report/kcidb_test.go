package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The KCIDB v5.3 constraints patcheval's output must meet, transcribed
// from kernelci/kcidb-io kcidb_io/schema/v05_03.py (objects allow no
// additional properties; ids are "<origin>:<anything>"; no nulls).
var kcidbSchema = map[string]struct {
	allowed  []string
	required []string
}{
	"checkouts": {[]string{"_timestamp", "id", "origin", "tree_name", "git_repository_url", "git_commit_hash",
		"git_commit_name", "git_commit_tags", "git_commit_message", "git_repository_branch",
		"git_repository_branch_tip", "patchset_files", "patchset_hash", "message_id", "comment", "start_time",
		"origin_builds_finish_time", "origin_tests_finish_time", "log_url", "log_excerpt", "valid", "misc"},
		[]string{"id", "origin"}},
	"builds": {[]string{"_timestamp", "checkout_id", "id", "origin", "comment", "start_time", "duration",
		"architecture", "command", "compiler", "input_files", "output_files", "config_name", "config_url",
		"log_url", "log_excerpt", "status", "misc"}, []string{"checkout_id", "id", "origin"}},
	"tests": {[]string{"_timestamp", "build_id", "id", "origin", "environment", "path", "comment", "log_url",
		"log_excerpt", "status", "number", "start_time", "duration", "input_files", "output_files", "misc"},
		[]string{"build_id", "id", "origin"}},
}

var (
	originRe   = regexp.MustCompile(`^[a-z0-9_]+$`)
	originIDRe = regexp.MustCompile(`^[a-z0-9_]+:.*$`)
	testPathRe = regexp.MustCompile(`^([a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*)?$`)
	dateTimeRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	sha256Re   = regexp.MustCompile(`^$|^[0-9a-f]{64}$`)
	statusSet  = map[string]bool{"FAIL": true, "ERROR": true, "MISS": true, "PASS": true, "DONE": true, "SKIP": true}
)

func noNulls(t *testing.T, path string, v any) {
	switch x := v.(type) {
	case nil:
		t.Errorf("%s is null", path)
	case map[string]any:
		for k, e := range x {
			noNulls(t, path+"."+k, e)
		}
	case []any:
		for i, e := range x {
			noNulls(t, path+"["+string(rune('0'+i%10))+"]", e)
		}
	}
}

func validateKCIDB(t *testing.T, data []byte) map[string][]map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	noNulls(t, "$", doc)
	v, _ := doc["version"].(map[string]any)
	if v["major"] != 5.0 || v["minor"] != 3.0 {
		t.Errorf("version %v", doc["version"])
	}
	out := map[string][]map[string]any{}
	ids := map[string]map[string]bool{}
	for key := range doc {
		if key != "version" && kcidbSchema[key].allowed == nil {
			t.Errorf("unknown top-level property %q", key)
		}
	}
	for kind, sch := range kcidbSchema {
		allowed := map[string]bool{}
		for _, k := range sch.allowed {
			allowed[k] = true
		}
		ids[kind] = map[string]bool{}
		list, _ := doc[kind].([]any)
		for _, o := range list {
			obj := o.(map[string]any)
			out[kind] = append(out[kind], obj)
			for k := range obj {
				if !allowed[k] {
					t.Errorf("%s: property %q not in the schema", kind, k)
				}
			}
			for _, k := range sch.required {
				if _, ok := obj[k]; !ok {
					t.Errorf("%s %v: required %q missing", kind, obj["id"], k)
				}
			}
			id, _ := obj["id"].(string)
			if !originIDRe.MatchString(id) || !strings.HasPrefix(id, "patcheval:") {
				t.Errorf("%s id %q", kind, id)
			}
			if ids[kind][id] {
				t.Errorf("%s id %q twice", kind, id)
			}
			ids[kind][id] = true
			if o, _ := obj["origin"].(string); !originRe.MatchString(o) || o != "patcheval" {
				t.Errorf("origin %q", o)
			}
			if s, ok := obj["status"].(string); ok && !statusSet[s] {
				t.Errorf("%s status %q", kind, s)
			}
			for _, k := range []string{"start_time", "_timestamp"} {
				if s, ok := obj[k].(string); ok && !dateTimeRe.MatchString(s) {
					t.Errorf("%s %s %q", kind, k, s)
				}
			}
			if m, ok := obj["misc"]; ok {
				if _, isObj := m.(map[string]any); !isObj {
					t.Errorf("%s misc is not an object", kind)
				}
			}
		}
	}
	for _, c := range out["checkouts"] {
		if h, ok := c["git_commit_hash"].(string); ok && !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(h) {
			t.Errorf("git_commit_hash %q", h)
		}
		if h, ok := c["patchset_hash"].(string); ok && !sha256Re.MatchString(h) {
			t.Errorf("patchset_hash %q", h)
		}
		if _, ok := c["valid"].(bool); !ok {
			t.Errorf("checkout valid is not a boolean")
		}
	}
	for _, b := range out["builds"] {
		if !ids["checkouts"][b["checkout_id"].(string)] {
			t.Errorf("build %v: checkout %v missing", b["id"], b["checkout_id"])
		}
		if a, ok := b["architecture"].(string); ok && !regexp.MustCompile(`^[a-z0-9_]*$`).MatchString(a) {
			t.Errorf("architecture %q", a)
		}
		if d, ok := b["duration"]; ok {
			if _, num := d.(float64); !num {
				t.Errorf("duration %v", d)
			}
		}
	}
	for _, tst := range out["tests"] {
		if !ids["builds"][tst["build_id"].(string)] {
			t.Errorf("test %v: build %v missing", tst["id"], tst["build_id"])
		}
		if p, _ := tst["path"].(string); !testPathRe.MatchString(p) {
			t.Errorf("test path %q", p)
		}
		if n, ok := tst["number"].(map[string]any); ok {
			if _, num := n["value"].(float64); !num {
				t.Errorf("number.value %v", n["value"])
			}
			for k := range n {
				if k != "value" && k != "unit" && k != "prefix" {
					t.Errorf("number.%s not in the schema", k)
				}
			}
		}
		if e, ok := tst["environment"].(map[string]any); ok {
			for k := range e {
				if k != "comment" && k != "misc" && k != "compatible" {
					t.Errorf("environment.%s not in the schema", k)
				}
			}
		}
	}
	return out
}

func TestKCIDB(t *testing.T) {
	r := seedReport(t)
	var b bytes.Buffer
	if err := WriteKCIDB(&b, r); err != nil {
		t.Fatal(err)
	}
	out := validateKCIDB(t, b.Bytes())
	if len(out["checkouts"]) != 2 || len(out["builds"]) != 3 {
		t.Fatalf("%d checkouts, %d builds", len(out["checkouts"]), len(out["builds"]))
	}
	// 2 benchmarks x 3 variants x 3 samples + 4 comparisons.
	if len(out["tests"]) != 22 {
		t.Fatalf("%d tests", len(out["tests"]))
	}
	var sample, cmp map[string]any
	for _, tst := range out["tests"] {
		switch tst["path"] {
		case "kill.ns_per_op":
			if sample == nil {
				sample = tst
			}
		case "kill.ns_per_op.vs_voluntary":
			cmp = tst
		}
	}
	if sample == nil || sample["status"] != "DONE" || sample["number"].(map[string]any)["value"] != 983.63054 ||
		sample["number"].(map[string]any)["unit"] != "ns/op" {
		t.Errorf("sample test %v", sample)
	}
	if cmp == nil || cmp["status"] != "FAIL" || cmp["build_id"] != "patcheval:run-20261130-0700:build:voluntary-dyn" {
		t.Errorf("comparison test %v", cmp)
	}
	// The GNU build-ids: the vmlinux's in its build's misc, the one the
	// running kernel showed in each sample's.
	const vmlinuxID = "fa36776b59bf96ada9b36526d3ba1705c7a98183"
	r.Variants[0].Kernel.BuildID = vmlinuxID
	r.Benchmarks[0].Runs[0].BuildID = vmlinuxID
	var withID bytes.Buffer
	if err := WriteKCIDB(&withID, r); err != nil {
		t.Fatal(err)
	}
	idOut := validateKCIDB(t, withID.Bytes())
	if m, _ := idOut["builds"][0]["misc"].(map[string]any); m["vmlinux_build_id"] != vmlinuxID {
		t.Errorf("build misc %v lacks vmlinux_build_id", m)
	}
	if m, _ := idOut["tests"][0]["misc"].(map[string]any); m["running_build_id"] != vmlinuxID {
		t.Errorf("test misc %v lacks running_build_id", m)
	}
	for _, c := range out["checkouts"] {
		if c["id"] == "patcheval:run-20261130-0700:checkout:series" {
			if c["message_id"] != "20261102093000.4121-0-tester@example.org" || len(c["patchset_hash"].(string)) != 64 {
				t.Errorf("series checkout %v", c)
			}
		}
		if c["id"] == "patcheval:run-20261130-0700:checkout:base" && c["patchset_hash"] != "" {
			t.Errorf("base checkout %v", c)
		}
	}
	// Hostile names and a NaN stay within the schema.
	r.Variants[0].Name = "weird name/with:colons"
	r.Arch = "PPC64-LE"
	r.Benchmarks[0].Runs[0].Variant = r.Variants[0].Name
	r.Benchmarks[0].Runs[0].Invalid = true
	b.Reset()
	if err := WriteKCIDB(&b, r); err != nil {
		t.Fatal(err)
	}
	validateKCIDB(t, b.Bytes())
}

func TestPatchsetHash(t *testing.T) {
	// sha256sum a.patch b.patch | cut -c-64 | sha256sum, computed by hand:
	// printf 'a\n' and printf 'b\n' hashed, then the two sums + "\n".
	a, b := sha256Hex("a\n"), sha256Hex("b\n")
	if got, want := patchsetHash([]string{a, b}), sha256Hex(a+"\n"+b+"\n"); got != want {
		t.Fatalf("%s != %s", got, want)
	}
	if patchsetHash(nil) != "" {
		t.Fatal("empty patchset must hash to the empty string")
	}
}

// releaseReport is a release A/B with a revert, as the runner describes
// it (Ref, Onto, Head, Reverts; no samples: the checkouts and builds are
// what is checked). The v6.12.117 and v7.2.13 commits are those of
// Debian's releases as patcheval tree import writes them; the revert
// commit is the fixture's.
func releaseReport() *Report {
	const (
		v612  = "98a2d2cf788c46d28534a164d31842e1e34ded0e"
		v7213 = "00aac70310c336454b20798fde68015ed3a44dd7"
		rev   = "5e1f0a9c3b2d4e6f8a7b9c0d1e2f3a4b5c6d7e8f"
	)
	label := "1/1 rcu: Use the GP kthread to report the quiescent state"
	reverted := Variant{Name: "reverted", Config: []string{"PREEMPT_LAZY=y"},
		Reverted: []string{label}, Onto: v7213, Head: rev,
		Reverts: []RevertCommit{{Label: label, Commit: rev}},
		Tree:    "v7.2.13 (00aac70310c3) with 1 change(s) reverted (5e1f0a9c3b2d, branch patcheval/revert/5e1f0a9c3b2d): " + label}
	full := reverted
	full.Name, full.Cmdline = "reverted@full", "preempt=full"
	return &Report{
		Title: "release-ab", ID: "run-20261207-0800", Generated: gen, Arch: "ppc64le",
		Series: SeriesInfo{Title: "rcu: Use the GP kthread to report the quiescent state", MessageID: "rcu-gp-qs@example.org", Patches: 1},
		Tree: TreeInfo{Name: "Debian linux-source releases", Path: "/var/cache/patcheval/trees/linux-releases.git",
			Base: v7213, BaseName: "v7.2.13"},
		Target: TargetInfo{Kind: "qemu", Deterministic: true},
		Variants: []Variant{
			{Name: "v6.12-voluntary", Config: []string{"PREEMPT_VOLUNTARY=y"}, Ref: "v6.12.117", Onto: v612, Head: v612,
				Tree: "v6.12.117 (98a2d2cf788c)"},
			{Name: "lazy", Config: []string{"PREEMPT_LAZY=y"}},
			reverted, full,
		},
	}
}

// TestKCIDBVariantTrees: a variant with a ref of its own is a checkout
// of that ref's commit (git_commit_name the ref, nothing applied), one
// with reverts a checkout of the commit they were made on with the
// reverts in misc and no patchset_hash (they are commits, not patch
// files), shared by the variants that build the same tree; each build
// points at its tree's checkout and names the ref or the reverts.
func TestKCIDBVariantTrees(t *testing.T) {
	var b bytes.Buffer
	if err := WriteKCIDB(&b, releaseReport()); err != nil {
		t.Fatal(err)
	}
	out := validateKCIDB(t, b.Bytes())
	golden(t, "release.kcidb.json", b.Bytes())
	checkouts := map[string]map[string]any{}
	for _, c := range out["checkouts"] {
		checkouts[c["id"].(string)] = c
	}
	if len(checkouts) != 3 {
		t.Fatalf("%d checkouts, want 3 (base, v6.12.117, v7.2.13 with the revert)", len(checkouts))
	}
	of := map[string]map[string]any{}
	for _, bl := range out["builds"] {
		of[bl["config_name"].(string)] = bl
	}
	old := checkouts[of["v6.12-voluntary"]["checkout_id"].(string)]
	if old["git_commit_hash"] != "98a2d2cf788c46d28534a164d31842e1e34ded0e" || old["git_commit_name"] != "v6.12.117" ||
		old["patchset_hash"] != "" {
		t.Errorf("the v6.12.117 variant's checkout %v", old)
	}
	if m, _ := of["v6.12-voluntary"]["misc"].(map[string]any); m["ref"] != "v6.12.117" {
		t.Errorf("the v6.12.117 build's misc %v lacks the ref", m)
	}
	if base := checkouts[of["lazy"]["checkout_id"].(string)]; base["id"] != "patcheval:run-20261207-0800:checkout:base" ||
		base["git_commit_hash"] != "00aac70310c336454b20798fde68015ed3a44dd7" {
		t.Errorf("the base variant's checkout %v", base)
	}
	rc := checkouts[of["reverted"]["checkout_id"].(string)]
	if of["reverted@full"]["checkout_id"] != rc["id"] {
		t.Errorf("two variants of one reverted tree have two checkouts: %v, %v", rc["id"], of["reverted@full"]["checkout_id"])
	}
	misc, _ := rc["misc"].(map[string]any)
	reverts, _ := misc["reverts"].([]any)
	if rc["git_commit_hash"] != "00aac70310c336454b20798fde68015ed3a44dd7" || len(reverts) != 1 ||
		misc["head"] != "5e1f0a9c3b2d4e6f8a7b9c0d1e2f3a4b5c6d7e8f" || !strings.Contains(rc["comment"].(string), "reverted") {
		t.Errorf("the reverted variant's checkout %v", rc)
	}
	if _, ok := rc["patchset_hash"]; ok {
		t.Errorf("the reverted checkout claims a patchset_hash %q: its reverts are no patch files", rc["patchset_hash"])
	}
	if m, _ := of["reverted"]["misc"].(map[string]any); m["reverted"] == nil {
		t.Errorf("the reverted build's misc %v does not say what it reverts", m)
	}
}
