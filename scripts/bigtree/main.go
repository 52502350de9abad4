// Command bigtree writes a `git fast-import` stream that grows a kernel
// tree into a repository with the shape of a maintainer's linux.git:
// N commits on top of a base commit (the imported 6.1 tree), most of them
// touching one or two files of the real tree's directories with a small
// edit, on topic branches merged into a first-parent mainline; release
// tags every so often (v6.2-rc1 ... v6.2, annotated, each on a "Linux
// 6.2-rcN" commit that bumps the Makefile, like the real ones) and
// stable-style tags (v6.2.1, ...) on dead-end stable branches. bench/bigtree.sh
// runs it, repacks the result like kernel.org and caches it.
//
//	bigtree -repo linux-6.1.git -base v6.1-debian -commits 1000000 |
//		git --git-dir=big.git fast-import --done
//
// The stream is written as it is generated: memory holds the file list,
// every file's edit history (a few bytes per edit) and a bounded cache of
// current file contents, never the history itself. Original blobs are read
// from -repo with one `git cat-file --batch`. The output depends only on
// the flags and the base tree (fixed seed, identities and dates), so the
// same flags give the same commits.
//
// Files named by -exclude (and the Makefile, which the release commits
// own) are never edited, so a backport made against the base (the seed
// series) still applies on every generated tag.
package main

import (
	"bufio"
	"bytes"
	"container/list"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"
)

type options struct {
	repo, base      string
	commits         int
	releases        int
	stable          int
	topics          int
	seed            uint64
	maxSize         int
	cacheMiB        int
	exclude         map[string]bool
	start           time.Time
	progressEvery   int
	hotPercent      int
	hotFilesPercent int
}

func main() {
	var o options
	var exclude, start string
	flag.StringVar(&o.repo, "repo", "", "git directory holding the base commit (required)")
	flag.StringVar(&o.base, "base", "v6.1-debian", "base revision the history grows from")
	flag.IntVar(&o.commits, "commits", 1000000, "commits to generate (merges, release and stable commits included)")
	flag.IntVar(&o.releases, "releases", 100, "mainline releases (each: 7 release candidates and the release, one tag each)")
	flag.IntVar(&o.stable, "stable", 12, "stable tags per release (vX.Y.1 ...)")
	flag.IntVar(&o.topics, "topics", 4, "topic branches in flight at once")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed")
	flag.IntVar(&o.maxSize, "max-size", 64<<10, "only files up to this size (bytes) are edited")
	flag.IntVar(&o.cacheMiB, "cache-mib", 512, "bound of the cache of current file contents")
	flag.StringVar(&exclude, "exclude", "", "comma-separated paths never edited")
	flag.StringVar(&start, "start", "2022-12-12T00:00:00Z", "date of the first generated commit (RFC 3339); one minute per commit after")
	flag.IntVar(&o.progressEvery, "progress", 50000, "report progress on stderr every this many commits (0: never)")
	flag.IntVar(&o.hotPercent, "hot", 70, "percent of edits that go to the hot files")
	flag.IntVar(&o.hotFilesPercent, "hot-files", 10, "percent of the files that are hot")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: bigtree -repo GITDIR [-base REV] [-commits N] | git fast-import --done")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || o.repo == "" {
		flag.Usage()
		os.Exit(2)
	}
	t, err := time.Parse(time.RFC3339, start)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bigtree: -start %q: %v\n", start, err)
		os.Exit(2)
	}
	o.start = t
	o.exclude = map[string]bool{"Makefile": true}
	for _, p := range strings.Split(exclude, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.exclude[p] = true
		}
	}
	if o.commits < o.releases*8*2 || o.releases < 1 || o.stable < 0 || o.topics < 1 {
		fmt.Fprintf(os.Stderr, "bigtree: -commits %d is too few for %d releases (at least %d), or a count is negative\n",
			o.commits, o.releases, o.releases*16)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	g, err := newGen(o, w)
	if err == nil {
		err = g.run()
		g.close()
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bigtree: %v\n", err)
		os.Exit(1)
	}
}

// edit is one inserted line: at line pos (clamped to the file's length)
// the line naming commit id.
type edit struct {
	pos uint32
	id  uint32
}

type file struct {
	path   string
	mode   string
	blob   string
	size   int
	dir    int
	edits  []edit
	owner  int // topic slot editing it, -1 for none
	last   int // commit sequence of the last change that reached mainline
	binary bool
}

type topic struct {
	slot    int
	name    string
	fork    int // mainline sequence it forked at
	forkTip string
	tip     string // mark (":N") of the last commit, "" before the first
	want    int
	done    int
	files   map[int]int // file -> blob mark of its latest version
	order   []int
	subsys  string
}

type gen struct {
	o     options
	w     *bufio.Writer
	rng   *rand.Rand
	cat   *catFile
	files []file
	dirs  [][]int
	hot   []int
	all   []int

	makefile []byte
	baseHash string

	mark    int
	seq     int // commits emitted
	master  string
	topics  []*topic
	nTopics int
	cache   *contentCache

	tagsDone, tagsTotal int
	mainlineBudget      int
	stablePerTag        int
	started             time.Time
	authors             []string
}

func newGen(o options, w *bufio.Writer) (*gen, error) {
	g := &gen{o: o, w: w, rng: rand.New(rand.NewPCG(o.seed, 0x6b65726e656c)), started: time.Now(),
		cache: newContentCache(o.cacheMiB << 20)}
	out, err := exec.Command("git", "--git-dir="+o.repo, "rev-parse", "--verify", o.base+"^{commit}").Output()
	if err != nil {
		return nil, fmt.Errorf("base %s in %s: %v", o.base, o.repo, err)
	}
	g.baseHash = strings.TrimSpace(string(out))
	if err := g.listFiles(); err != nil {
		return nil, err
	}
	if g.cat, err = newCatFile(o.repo); err != nil {
		return nil, err
	}
	for i := 0; i < 2000; i++ {
		g.authors = append(g.authors, fmt.Sprintf("Developer %04d <dev%04d@example.org>", i, i))
	}
	g.tagsTotal = o.releases * 8
	// Stable commits: a few per stable tag, the last one the "Linux x.y.z"
	// commit; they count towards -commits.
	g.stablePerTag = min(5, max(1, o.commits/(o.releases*max(o.stable, 1)*20)))
	g.mainlineBudget = o.commits - o.releases*o.stable*g.stablePerTag
	return g, nil
}

func (g *gen) close() {
	if g.cat != nil {
		g.cat.close()
	}
}

func (g *gen) listFiles() error {
	cmd := exec.Command("git", "--git-dir="+g.o.repo, "ls-tree", "-r", "-z", "--long", g.baseHash)
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ls-tree %s: %v", g.o.base, err)
	}
	dirIdx := map[string]int{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, p, ok := strings.Cut(string(rec), "\t")
		if !ok {
			return fmt.Errorf("ls-tree: bad line %q", rec)
		}
		fs := strings.Fields(meta)
		if len(fs) != 4 {
			return fmt.Errorf("ls-tree: bad line %q", rec)
		}
		if p == "Makefile" {
			if g.makefile, err = exec.Command("git", "--git-dir="+g.o.repo, "cat-file", "blob", fs[2]).Output(); err != nil {
				return fmt.Errorf("read Makefile: %v", err)
			}
		}
		if fs[1] != "blob" || (fs[0] != "100644" && fs[0] != "100755") || g.o.exclude[p] {
			continue
		}
		size, _ := strconv.Atoi(fs[3])
		if size == 0 || size > g.o.maxSize || strings.ContainsAny(p, "\"\\\n") {
			continue
		}
		d := path.Dir(p)
		di, ok := dirIdx[d]
		if !ok {
			di = len(g.dirs)
			dirIdx[d] = di
			g.dirs = append(g.dirs, nil)
		}
		g.dirs[di] = append(g.dirs[di], len(g.files))
		g.files = append(g.files, file{path: p, mode: fs[0], blob: fs[2], size: size, dir: di, owner: -1, last: -1})
	}
	if g.makefile == nil || !bytes.Contains(g.makefile, []byte("\nPATCHLEVEL = ")) {
		return fmt.Errorf("the base tree has no top-level Makefile with PATCHLEVEL")
	}
	if len(g.files) < 100 {
		return fmt.Errorf("the base tree has only %d editable files", len(g.files))
	}
	for i := range g.files {
		g.all = append(g.all, i)
	}
	// Hot files: a fixed random subset gets most edits, as in real
	// history (and gives the repack long delta chains).
	perm := g.rng.Perm(len(g.files))
	n := max(1, len(g.files)*g.o.hotFilesPercent/100)
	g.hot = perm[:n]
	return nil
}

func (g *gen) nextMark() string {
	g.mark++
	return ":" + strconv.Itoa(g.mark)
}

func (g *gen) when() string {
	return strconv.FormatInt(g.o.start.Unix()+int64(g.seq)*60, 10) + " +0000"
}

func subsystem(p string) string {
	parts := strings.Split(path.Dir(p), "/")
	switch {
	case parts[0] == ".":
		return "treewide"
	case len(parts) >= 2 && (parts[0] == "drivers" || parts[0] == "arch" || parts[0] == "fs" || parts[0] == "net" || parts[0] == "sound"):
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// content returns the current (mainline or topic) content of file i.
func (g *gen) content(i int) ([]byte, error) {
	f := &g.files[i]
	if b, ok := g.cache.get(i, len(f.edits)); ok {
		return b, nil
	}
	orig, err := g.cat.blob(f.blob)
	if err != nil {
		return nil, err
	}
	b := orig
	for _, e := range f.edits {
		b = insertLine(b, e)
	}
	g.cache.put(i, len(f.edits), b)
	return b, nil
}

func editLine(id uint32) string {
	return fmt.Sprintf("\t/* scale: change %d */\n", id)
}

// insertLine inserts e's line before line e.pos (after the last line when
// the file is shorter). b is not modified.
func insertLine(b []byte, e edit) []byte {
	off := 0
	for n := uint32(0); n < e.pos && off < len(b); n++ {
		j := bytes.IndexByte(b[off:], '\n')
		if j < 0 {
			off = len(b)
			break
		}
		off += j + 1
	}
	line := editLine(e.id)
	out := make([]byte, 0, len(b)+len(line)+1)
	out = append(out, b[:off]...)
	if off == len(b) && off > 0 && b[off-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, line...)
	return append(out, b[off:]...)
}

// editFile applies one new edit to file i and writes the blob; it
// returns the blob's mark.
func (g *gen) editFile(i int) (string, error) {
	cur, err := g.content(i)
	if err != nil {
		return "", err
	}
	lines := bytes.Count(cur, []byte{'\n'})
	e := edit{pos: uint32(g.rng.IntN(lines + 1)), id: uint32(g.seq)}
	f := &g.files[i]
	f.edits = append(f.edits, e)
	b := insertLine(cur, e)
	g.cache.put(i, len(f.edits), b)
	return g.writeBlob(b)
}

func (g *gen) writeBlob(b []byte) (string, error) {
	m := g.nextMark()
	fmt.Fprintf(g.w, "blob\nmark %s\ndata %d\n", m, len(b))
	g.w.Write(b)
	_, err := g.w.WriteString("\n")
	return m, err
}

// pick returns a random editable file that ok accepts, or -1.
func (g *gen) pick(ok func(i int) bool) int {
	for try := 0; try < 200; try++ {
		set := g.all
		if g.rng.IntN(100) < g.o.hotPercent {
			set = g.hot
		}
		i := set[g.rng.IntN(len(set))]
		if g.files[i].binary || !ok(i) {
			continue
		}
		b, err := g.content(i)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			g.files[i].binary = true
			continue
		}
		return i
	}
	return -1
}

// pickNear returns another file in i's directory that ok accepts, or -1.
func (g *gen) pickNear(i int, ok func(int) bool) int {
	d := g.dirs[g.files[i].dir]
	for try := 0; try < 8 && len(d) > 1; try++ {
		j := d[g.rng.IntN(len(d))]
		if j != i && !g.files[j].binary && ok(j) {
			return j
		}
	}
	return -1
}

// howMany is the number of files a commit touches: mostly one or two.
func (g *gen) howMany() int {
	switch r := g.rng.IntN(100); {
	case r < 70:
		return 1
	case r < 95:
		return 2
	default:
		return 3 + g.rng.IntN(6)
	}
}

func (g *gen) commitHeader(ref, mark, author, msg string) {
	fmt.Fprintf(g.w, "commit %s\nmark %s\nauthor %s %s\ncommitter %s %s\ndata %d\n%s\n",
		ref, mark, author, g.when(), "Maintainer <maintainer@example.org>", g.when(), len(msg), msg)
}

func (g *gen) author() string { return g.authors[g.rng.IntN(len(g.authors))] }

func (g *gen) message(subsys, what string, author string) string {
	return fmt.Sprintf("%s: %s\n\nA generated change of linux.git's shape (change %d).\n\nSigned-off-by: %s\nLink: https://lore.kernel.org/r/scale-%d@example.org\n",
		subsys, what, g.seq, author, g.seq)
}

var verbs = []string{"fix a race in the error path", "drop a redundant check", "use the new helper",
	"add a missing barrier", "fix an off-by-one", "clarify a comment", "handle a NULL return",
	"simplify the loop", "avoid a sleeping allocation", "annotate a data race"}

func (g *gen) progress() {
	if g.o.progressEvery > 0 && g.seq%g.o.progressEvery == 0 {
		fmt.Fprintf(os.Stderr, "bigtree: %d/%d commits, %d tags, %s\n", g.seq, g.o.commits, g.tagsDone,
			time.Since(g.started).Round(time.Second))
	}
}

// directCommit is a commit straight on mainline.
func (g *gen) directCommit() error {
	free := func(i int) bool { return g.files[i].owner < 0 }
	first := g.pick(free)
	if first < 0 {
		return errors.New("no free file left to edit")
	}
	set := []int{first}
	for n := g.howMany(); len(set) < n; {
		j := g.pickNear(first, free)
		if j < 0 || contains(set, j) {
			break
		}
		set = append(set, j)
	}
	var ms []string
	for _, i := range set {
		m, err := g.editFile(i)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	a := g.author()
	mark := g.nextMark()
	g.commitHeader("refs/heads/master", mark, a, g.message(subsystem(g.files[first].path), verbs[g.rng.IntN(len(verbs))], a))
	g.from(g.master)
	for k, i := range set {
		fmt.Fprintf(g.w, "M %s %s %s\n", g.files[i].mode, ms[k], g.files[i].path)
		g.files[i].last = g.seq
	}
	g.w.WriteString("\n")
	g.master = mark
	g.seq++
	g.progress()
	return nil
}

func (g *gen) from(m string) {
	if m == "" {
		fmt.Fprintf(g.w, "from %s\n", g.baseHash)
	} else {
		fmt.Fprintf(g.w, "from %s\n", m)
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (g *gen) startTopic(slot int) *topic {
	g.nTopics++
	t := &topic{slot: slot, fork: g.seq, forkTip: g.master, files: map[int]int{},
		want: 1 + min(60, int(g.rng.ExpFloat64()*11))}
	t.name = fmt.Sprintf("topic-%d", g.nTopics)
	return t
}

// topicCommit adds one commit to topic t.
func (g *gen) topicCommit(t *topic) error {
	ok := func(i int) bool {
		f := &g.files[i]
		return f.owner == t.slot || (f.owner < 0 && f.last < t.fork)
	}
	first := -1
	if len(t.order) > 0 && g.rng.IntN(100) < 40 {
		first = t.order[g.rng.IntN(len(t.order))]
	} else {
		first = g.pick(ok)
	}
	if first < 0 {
		return errors.New("no file left for a topic to edit")
	}
	if t.subsys == "" {
		t.subsys = subsystem(g.files[first].path)
	}
	set := []int{first}
	for n := g.howMany(); len(set) < n; {
		j := g.pickNear(first, ok)
		if j < 0 || contains(set, j) {
			break
		}
		set = append(set, j)
	}
	var ms []string
	for _, i := range set {
		m, err := g.editFile(i)
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if g.files[i].owner < 0 {
			g.files[i].owner = t.slot
			t.order = append(t.order, i)
		}
		n, _ := strconv.Atoi(m[1:])
		t.files[i] = n
	}
	a := g.author()
	mark := g.nextMark()
	ref := fmt.Sprintf("refs/heads/gen/topic%d", t.slot)
	g.commitHeader(ref, mark, a, g.message(subsystem(g.files[first].path), verbs[g.rng.IntN(len(verbs))], a))
	if t.tip == "" {
		g.from(t.forkTip)
	}
	for k, i := range set {
		fmt.Fprintf(g.w, "M %s %s %s\n", g.files[i].mode, ms[k], g.files[i].path)
	}
	g.w.WriteString("\n")
	t.tip = mark
	t.done++
	g.seq++
	g.progress()
	return nil
}

// mergeTopic merges t into mainline (first parent: mainline).
func (g *gen) mergeTopic(t *topic) {
	mark := g.nextMark()
	msg := fmt.Sprintf("Merge branch '%s' of git://git.example.org/pub/scm/linux/kernel/git/%s\n\nPull %s updates (%d commits).\n",
		t.name, strings.ReplaceAll(t.subsys, "/", "-"), t.subsys, t.done)
	g.commitHeader("refs/heads/master", mark, "Maintainer <maintainer@example.org>", msg)
	g.from(g.master)
	fmt.Fprintf(g.w, "merge %s\n", t.tip)
	for _, i := range t.order {
		fmt.Fprintf(g.w, "M %s :%d %s\n", g.files[i].mode, t.files[i], g.files[i].path)
		g.files[i].owner = -1
		g.files[i].last = g.seq
	}
	g.w.WriteString("\n")
	g.master = mark
	g.seq++
	g.progress()
}

// version names release r's tag k (0..6 release candidates, 7 the release).
func version(r int) (major, minor int) {
	m := 2 + r
	return 6 + m/20, m % 20
}

func (g *gen) makefileFor(major, minor, sub int, extra string) []byte {
	var out []string
	for _, l := range strings.SplitAfter(string(g.makefile), "\n") {
		switch {
		case strings.HasPrefix(l, "VERSION = "):
			l = fmt.Sprintf("VERSION = %d\n", major)
		case strings.HasPrefix(l, "PATCHLEVEL = "):
			l = fmt.Sprintf("PATCHLEVEL = %d\n", minor)
		case strings.HasPrefix(l, "SUBLEVEL = "):
			l = fmt.Sprintf("SUBLEVEL = %d\n", sub)
		case strings.HasPrefix(l, "EXTRAVERSION ="):
			if extra == "" {
				l = "EXTRAVERSION =\n"
			} else {
				l = "EXTRAVERSION = " + extra + "\n"
			}
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, ""))
}

// releaseCommit makes the "Linux X.Y[-rcN]" commit on ref (after parent)
// and its annotated tag.
func (g *gen) releaseCommit(ref, parent, tag string, makefile []byte) (string, error) {
	bm, err := g.writeBlob(makefile)
	if err != nil {
		return "", err
	}
	mark := g.nextMark()
	title := "Linux " + strings.TrimPrefix(tag, "v")
	g.commitHeader(ref, mark, "Linus Torvalds <torvalds@linux-foundation.org>", title+"\n")
	g.from(parent)
	fmt.Fprintf(g.w, "M 100644 %s Makefile\n\n", bm)
	msg := title + "\n"
	fmt.Fprintf(g.w, "tag %s\nfrom %s\ntagger Linus Torvalds <torvalds@linux-foundation.org> %s\ndata %d\n%s\n",
		tag, mark, g.when(), len(msg), msg)
	g.seq++
	g.tagsDone++
	g.progress()
	return mark, nil
}

// tag makes mainline tag j (and, after a release, its stable branch).
func (g *gen) tag(j int) error {
	r, k := j/8, j%8
	major, minor := version(r)
	name := fmt.Sprintf("v%d.%d", major, minor)
	extra := ""
	if k < 7 {
		extra = fmt.Sprintf("-rc%d", k+1)
	}
	mark, err := g.releaseCommit("refs/heads/master", g.master, name+extra, g.makefileFor(major, minor, 0, extra))
	if err != nil {
		return err
	}
	g.master = mark
	if k < 7 {
		return nil
	}
	// The stable branch: a few fixes per stable release, each release
	// a "Linux X.Y.Z" commit; files edited here only (an overlay on the
	// release's contents), never by mainline's edit history.
	overlay := map[int][]byte{}
	tip := mark
	for s := 1; s <= g.o.stable; s++ {
		for c := 0; c < g.stablePerTag-1; c++ {
			i := g.pick(func(i int) bool { return g.files[i].owner < 0 })
			if i < 0 {
				return errors.New("no file left for a stable fix")
			}
			cur, ok := overlay[i]
			if !ok {
				if cur, err = g.content(i); err != nil {
					return err
				}
			}
			lines := bytes.Count(cur, []byte{'\n'})
			b := insertLine(cur, edit{pos: uint32(g.rng.IntN(lines + 1)), id: uint32(g.seq)})
			overlay[i] = b
			bm, err := g.writeBlob(b)
			if err != nil {
				return err
			}
			a := g.author()
			m := g.nextMark()
			msg := g.message(subsystem(g.files[i].path), verbs[g.rng.IntN(len(verbs))], a)
			msg += fmt.Sprintf("\n[ upstream commit %d ]\n", g.rng.Int64N(1<<40))
			g.commitHeader("refs/heads/gen/stable", m, a, msg)
			g.from(tip)
			fmt.Fprintf(g.w, "M %s %s %s\n\n", g.files[i].mode, bm, g.files[i].path)
			tip = m
			g.seq++
			g.progress()
		}
		m, err := g.releaseCommit("refs/heads/gen/stable", tip, fmt.Sprintf("v%d.%d.%d", major, minor, s), g.makefileFor(major, minor, s, ""))
		if err != nil {
			return err
		}
		tip = m
	}
	return nil
}

func (g *gen) run() error {
	g.topics = make([]*topic, g.o.topics)
	for s := range g.topics {
		g.topics[s] = g.startTopic(s)
	}
	mainline := 0 // commits counted against the mainline budget
	for j := 0; j < g.tagsTotal; j++ {
		due := (j + 1) * g.mainlineBudget / g.tagsTotal
		for mainline < due-1 {
			before := g.seq
			if g.rng.IntN(100) < 10 {
				if err := g.directCommit(); err != nil {
					return err
				}
			} else {
				t := g.topics[g.rng.IntN(len(g.topics))]
				if t.done >= t.want {
					g.mergeTopic(t)
					g.topics[t.slot] = g.startTopic(t.slot)
				} else if err := g.topicCommit(t); err != nil {
					return err
				}
			}
			mainline += g.seq - before
		}
		if j == g.tagsTotal-1 {
			// Everything in flight lands before the last release.
			for _, t := range g.topics {
				if t.done > 0 {
					g.mergeTopic(t)
					mainline++
				}
			}
		}
		before := g.seq
		if err := g.tag(j); err != nil {
			return err
		}
		mainline += 1
		_ = before
	}
	fmt.Fprintf(g.w, "reset refs/heads/master\nfrom %s\n\n", g.master)
	fmt.Fprintf(os.Stderr, "bigtree: %d commits, %d mainline tags, %d stable tags, %d topics, %s\n",
		g.seq, g.tagsTotal, g.o.releases*g.o.stable, g.nTopics, time.Since(g.started).Round(time.Second))
	_, err := g.w.WriteString("done\n")
	return err
}

// catFile reads blobs with one `git cat-file --batch`.
type catFile struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func newCatFile(repo string) (*catFile, error) {
	cmd := exec.Command("git", "--git-dir="+repo, "cat-file", "--batch")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &catFile{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
}

func (c *catFile) blob(h string) ([]byte, error) {
	if _, err := io.WriteString(c.in, h+"\n"); err != nil {
		return nil, err
	}
	hdr, err := c.out.ReadString('\n')
	if err != nil {
		return nil, err
	}
	fs := strings.Fields(hdr)
	if len(fs) != 3 || fs[1] != "blob" {
		return nil, fmt.Errorf("cat-file %s: %q", h, strings.TrimSpace(hdr))
	}
	n, err := strconv.Atoi(fs[2])
	if err != nil {
		return nil, fmt.Errorf("cat-file %s: %q", h, hdr)
	}
	b := make([]byte, n+1)
	if _, err := io.ReadFull(c.out, b); err != nil {
		return nil, err
	}
	return b[:n], nil
}

func (c *catFile) close() {
	c.in.Close()
	c.cmd.Wait()
}

// contentCache is a byte-bounded LRU of file contents by (file, edits).
type contentCache struct {
	max, size int
	ll        *list.List
	items     map[int]*list.Element
}

type cached struct {
	file, version int
	b             []byte
}

func newContentCache(max int) *contentCache {
	return &contentCache{max: max, ll: list.New(), items: map[int]*list.Element{}}
}

func (c *contentCache) get(file, version int) ([]byte, bool) {
	e, ok := c.items[file]
	if !ok || e.Value.(*cached).version != version {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cached).b, true
}

func (c *contentCache) put(file, version int, b []byte) {
	if e, ok := c.items[file]; ok {
		it := e.Value.(*cached)
		c.size += len(b) - len(it.b)
		it.version, it.b = version, b
		c.ll.MoveToFront(e)
	} else {
		c.items[file] = c.ll.PushFront(&cached{file, version, b})
		c.size += len(b)
	}
	for c.size > c.max && c.ll.Len() > 1 {
		e := c.ll.Back()
		it := e.Value.(*cached)
		c.ll.Remove(e)
		delete(c.items, it.file)
		c.size -= len(it.b)
	}
}
