package gittree

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// hashObject writes a raw commit with git hash-object (headers git
// commit does not write: gpgsig, mergetag, encoding, extra headers).
func hashObject(t *testing.T, dir, body string) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "-t", "commit", "-w", "--literally", "--stdin")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestReadCommitDecodesLikeGoGit compares ReadCommit with go-git's
// decoder on every commit of a repository with a merge, a root commit,
// commits with gpgsig, mergetag, encoding and unknown headers, one
// without a message, and packed and loose commits.
func TestReadCommitDecodesLikeGoGit(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(dir, "f"), []byte(fmt.Sprint(i)), 0o644)
		gitT(t, dir, "add", "f")
		gitT(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d\n\nbody line\nLink: https://example.org/%d", i, i))
	}
	gitT(t, dir, "checkout", "-q", "-b", "topic", "HEAD~1")
	os.WriteFile(filepath.Join(dir, "g"), []byte("g"), 0o644)
	gitT(t, dir, "add", "g")
	gitT(t, dir, "commit", "-q", "-m", "topic")
	gitT(t, dir, "checkout", "-q", "main")
	gitT(t, dir, "merge", "-q", "--no-ff", "-m", "Merge topic", "topic")
	gitT(t, dir, "repack", "-adq")
	tree := gitT(t, dir, "rev-parse", "HEAD^{tree}")
	head := gitT(t, dir, "rev-parse", "HEAD")
	sig := "A U Thor <a@example.org> 1700000000 +0530"
	raw := []string{
		"tree " + tree + "\nparent " + head + "\nauthor " + sig + "\ncommitter " + sig +
			"\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n\nsigned\n\nbody\n",
		"tree " + tree + "\nparent " + head + "\nparent " + head + "\nauthor " + sig + "\ncommitter C <c@example.org> 1700000001 -0800" +
			"\nmergetag object " + head + "\n type commit\n tag v1\nencoding ISO-8859-1\nx-extra one\n  two\n\nmerge with tag\n",
		"tree " + tree + "\nauthor " + sig + "\ncommitter " + sig + "\n",
		"tree " + tree + "\nauthor " + sig + "\ncommitter " + sig + "\n\n",
		"tree " + tree + "\ncommitter " + sig + "\nauthor " + sig + "\n\nswapped order\n",
	}
	hashes := strings.Fields(gitT(t, dir, "rev-list", "--all"))
	for _, b := range raw {
		hashes = append(hashes, hashObject(t, dir, b))
	}
	_, st, _, err := Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, hs := range hashes {
		h := plumbing.NewHash(hs)
		want, err := object.GetCommit(st, h)
		if err != nil {
			t.Fatalf("go-git: %s: %v", hs, err)
		}
		got, err := st.ReadCommit(h)
		if err != nil {
			t.Fatalf("ReadCommit(%s): %v", hs, err)
		}
		if got.Hash != want.Hash || got.TreeHash != want.TreeHash || !reflect.DeepEqual(got.ParentHashes, want.ParentHashes) ||
			got.Message != want.Message || !sameSig(got.Author, want.Author) || !sameSig(got.Committer, want.Committer) {
			t.Errorf("%s:\nReadCommit %+v\ngo-git     %+v", hs, got, want)
		}
	}
	if _, err := st.ReadCommit(plumbing.NewHash(tree)); err == nil || !strings.Contains(err.Error(), "not a commit") {
		t.Errorf("ReadCommit(a tree) = %v, want a not-a-commit error", err)
	}
	bad := hashObject(t, dir, "parent "+head+"\ntree "+tree+"\n\nno tree first\n")
	if _, err := st.ReadCommit(plumbing.NewHash(bad)); err == nil {
		t.Errorf("ReadCommit(commit without a leading tree) succeeded")
	}
}

func sameSig(a, b object.Signature) bool {
	_, ao := a.When.Zone()
	_, bo := b.When.Zone()
	return a.Name == b.Name && a.Email == b.Email && a.When.Equal(b.When) && ao == bo
}

// TestReferenceFindsPackedAndLooseRefs resolves every ref of a repository
// with packed refs (peeled tag lines among them), a loose ref that
// overrides a packed one, and names that prefix others, through Storage
// and compares with git.
func TestReferenceFindsPackedAndLooseRefs(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	for i := 0; i < 3; i++ {
		os.WriteFile(filepath.Join(dir, "f"), []byte(fmt.Sprint(i)), 0o644)
		gitT(t, dir, "add", "f")
		gitT(t, dir, "commit", "-q", "-m", fmt.Sprint(i))
		gitT(t, dir, "tag", "-a", "-m", "t", fmt.Sprintf("v1.%d", i))
		gitT(t, dir, "tag", fmt.Sprintf("v1.%d-light", i))
	}
	gitT(t, dir, "tag", "v1.1-rc1", "HEAD~2")
	gitT(t, dir, "branch", "v1.1", "HEAD~1") // refs/heads/v1.1 beside refs/tags/v1.1
	gitT(t, dir, "pack-refs", "--all")
	gitT(t, dir, "update-ref", "refs/tags/v1.2-light", "HEAD~2") // loose now overrides the packed one
	gitT(t, dir, "update-ref", "refs/heads/loose-only", "HEAD~1")
	r, st, _, err := Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := gitT(t, dir, "for-each-ref", "--format=%(objectname) %(refname)")
	for _, l := range strings.Split(out, "\n") {
		want, name, _ := strings.Cut(l, " ")
		ref, err := st.Reference(plumbing.ReferenceName(name))
		if err != nil || ref.Hash().String() != want {
			t.Errorf("Reference(%s) = %v, %v; git: %s", name, ref, err, want)
		}
	}
	// v1.1 is a tag and a branch: the tag wins, as in git.
	for rev, full := range map[string]string{"v1.1": "refs/tags/v1.1", "v1.1-rc1": "", "v1.2-light": "", "tags/v1.0": "",
		"heads/v1.1": "", "main": "", "loose-only": ""} {
		if full == "" {
			full = rev
		}
		want := gitT(t, dir, "rev-parse", full+"^{commit}")
		h, err := r.ResolveRevision(plumbing.Revision(rev))
		if err != nil || h.String() != want {
			t.Errorf("ResolveRevision(%s) = %v, %v; git: %s", rev, h, err, want)
		}
	}
	for _, name := range []string{"refs/tags/v1", "refs/tags/v1.1-", "refs/tags/v1.1-rc", "tags/v1.1", "refs/heads"} {
		if ref, err := st.Reference(plumbing.ReferenceName(name)); err != plumbing.ErrReferenceNotFound {
			t.Errorf("Reference(%s) = %v, %v; want not found", name, ref, err)
		}
	}
}
