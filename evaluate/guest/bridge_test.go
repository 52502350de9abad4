//go:build linux

package guest

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
)

// TestBridgeLoopIsTheThreadsScript runs the bridge benchmark in a
// network namespace of its own and watches rtnetlink's link and address
// groups there: each loop must do what seed 003's bridge.sh did (brctl
// addbr, ifconfig virbr0 192.0.0.1 up, ifconfig ... down, brctl delbr),
// not only add and delete the bridge. Then it runs the benchmark as the
// agent does outside a guest (RunBench, not PID 1): that one must make a
// network namespace of its own, so the caller's sees nothing.
func TestBridgeLoopIsTheThreadsScript(t *testing.T) {
	// In a namespace of the test's own, on a thread that never goes back
	// to the host's (the benchmark's own ownNetns).
	var o struct {
		res    *Result
		links  []linkEvent
		addrs  [][]byte
		nested *Result
		leaked []linkEvent
	}
	skipped, err := ownNetns(func() (*Result, error) {
		mon, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
		if err != nil {
			return nil, err
		}
		defer syscall.Close(mon)
		if err := syscall.Bind(mon, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK, Groups: rtmgrpLink | rtmgrpIPv4Ifaddr}); err != nil {
			return nil, err
		}
		syscall.SetsockoptInt(mon, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<20)
		if o.res, err = bridge(2); err != nil {
			return nil, err
		}
		if o.links, o.addrs, err = drainRtnetlink(mon); err != nil {
			return nil, err
		}
		if o.nested, err = RunBench(Bench{Name: BenchBridge, Ops: 2}); err != nil {
			return nil, err
		}
		o.leaked, _, err = drainRtnetlink(mon)
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if skipped != nil {
		t.Skip(skipped.Skipped)
	}
	if o.res.Skipped != "" {
		t.Skipf("bridge benchmark skipped: %s", o.res.Skipped)
	}
	if o.res.Iterations != 2 || o.res.NsPerOp <= 0 || o.res.Counters[CounterSysNS] < 0 {
		t.Errorf("result %+v", o.res)
	}
	var ups, dels int
	for _, l := range o.links {
		switch {
		case l.typ == syscall.RTM_DELLINK:
			dels++
		case l.flags&syscall.IFF_UP != 0:
			ups++
		}
	}
	// The probe before the timed loop adds and deletes once more.
	if dels != 3 || ups < 2 {
		t.Errorf("link events %+v: want 3 deletions and the bridge up in each of 2 loops (ifconfig ... up)", o.links)
	}
	if len(o.addrs) != 2 {
		t.Errorf("addresses added: %v, want 192.0.0.1 once per loop (ifconfig virbr0 192.0.0.1)", o.addrs)
	}
	for _, a := range o.addrs {
		if string(a) != string(bridgeAddr[:]) {
			t.Errorf("address %v, want %v", a, bridgeAddr)
		}
	}
	if o.nested.Skipped != "" || o.nested.Iterations != 2 {
		t.Errorf("RunBench %s outside a guest: %+v, want it run in a network namespace of its own", BenchBridge, o.nested)
	}
	if len(o.leaked) != 0 {
		t.Errorf("RunBench %s configured the caller's network namespace: %+v", BenchBridge, o.leaked)
	}
}

type linkEvent struct {
	typ   uint16
	flags uint32
}

// drainRtnetlink reads every message waiting on monitor socket fd: link
// events and the local addresses of RTM_NEWADDR.
func drainRtnetlink(fd int) ([]linkEvent, [][]byte, error) {
	var links []linkEvent
	var addrs [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, syscall.MSG_DONTWAIT)
		if errors.Is(err, syscall.EAGAIN) {
			return links, addrs, nil
		}
		if err != nil {
			return nil, nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.RTM_NEWLINK, syscall.RTM_DELLINK:
				if len(m.Data) >= syscall.SizeofIfInfomsg {
					links = append(links, linkEvent{m.Header.Type, binary.NativeEndian.Uint32(m.Data[8:])})
				}
			case syscall.RTM_NEWADDR:
				attrs, err := syscall.ParseNetlinkRouteAttr(&m)
				if err != nil {
					return nil, nil, err
				}
				for _, a := range attrs {
					if a.Attr.Type == syscall.IFA_LOCAL {
						addrs = append(addrs, append([]byte{}, a.Value...)) // buf is read into again
					}
				}
			}
		}
	}
}

// RTMGRP_LINK and RTMGRP_IPV4_IFADDR (linux/rtnetlink.h).
const (
	rtmgrpLink       = 0x1
	rtmgrpIPv4Ifaddr = 0x10
)
