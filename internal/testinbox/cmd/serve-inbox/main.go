// Command serve-inbox serves mbox files through a real public-inbox-httpd
// on loopback, for benchmarks and demos:
//
//	go run ./internal/testinbox/cmd/serve-inbox -listen 127.0.0.1:8080 thread.mbox...
//
// It prints the base URL (then the b4 environment and an example) and
// serves until interrupted; the inbox lives in a temporary directory that is
// removed on exit.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/patcheval/patcheval/internal/testinbox"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	inbox := flag.String("inbox", "test", "inbox name")
	noAll := flag.Bool("no-all", false, "no \"all\" extindex (/all/<msgid>/ answers 404)")
	bulk := flag.Bool("bulk", false, "import in one process (public-inbox-mda's delivery path) instead of one public-inbox-mda per message")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: serve-inbox [-listen ADDR] [-inbox NAME] [-no-all] [-bulk] FILE.mbox...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	s, err := testinbox.New(testinbox.Options{Listen: *listen, Inbox: *inbox, NoAll: *noAll, Bulk: *bulk}, flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve-inbox:", err)
		os.Exit(3)
	}
	fmt.Println(s.URL)
	fmt.Fprintf(os.Stderr, "serving inbox %q at %s/%s/ (data in %s)\n", s.Inbox, s.URL, s.Inbox, s.Dir)
	fmt.Fprintf(os.Stderr, "b4 environment: %v\n", s.B4Env("/tmp/b4-cache"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-sig:
	case <-done:
		fmt.Fprintln(os.Stderr, "serve-inbox: public-inbox-httpd exited")
	}
	s.Close()
}
