// Package testlab is an emulated lab host for tests: a QEMU x86_64
// machine (TCG) on this host, booted from a kernel built with Fragment
// and an initramfs holding Debian's OpenSSH server, kexec-tools and a
// static busybox (evaluate/guest/userland: x86_64 is the host's own
// Debian architecture), reached over a forwarded loopback port
// (hostfwd=tcp:127.0.0.1:PORT-:22). Its host key and root's authorized
// key are made here, so a test knows them. RestartHook is a shell command
// that power-cycles the machine (kills QEMU and boots it again from the
// lab kernel): the ssh target's boot hook, what IPMI is to a real lab.
// Console is the serial console's log, what a console server keeps; NMI
// injects a non-maskable interrupt through QEMU's QMP socket, what a
// BMC's diagnostic interrupt (ipmitool chassis power diag) does.
package testlab

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/guest/initramfs"
	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Fragment is the config fragment (over tinyconfig and the x86_64-q35
// boot config) of every kernel the lab boots: networking for sshd, kexec.
//
//go:embed lab-x86_64.config
var Fragment []byte

// Cmdline is the lab kernel's command line: serial console, the address
// QEMU's user network expects, and a reboot (QEMU exits: -no-reboot) on
// panic, so a kernel that does not come back is a machine that is gone.
const Cmdline = "console=ttyS0 panic=-1 rdinit=/init ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off"

// Host is a running lab machine.
type Host struct {
	Dir        string
	URL        string // ssh://root@127.0.0.1:PORT
	Identity   string // root's private key
	KnownHosts string // the machine's host key, as known_hosts
	Initrd     string // the initramfs (also what kexec boots with)
	Console    string // the serial console, appended across boots
	// RestartHook power-cycles the machine: QEMU killed and started again
	// from the lab kernel (a shell command, e.g. a boot hook).
	RestartHook string
	pidFile     string
	qmp         string // QEMU's QMP socket
}

// SSHOptions are the ssh -o options that reach the machine with its
// known host key only.
func (h *Host) SSHOptions() []string {
	return []string{"StrictHostKeyChecking=yes", "UserKnownHostsFile=" + h.KnownHosts, "IdentitiesOnly=yes", "LogLevel=ERROR"}
}

// Options shape a lab machine other than the default (a kernel built with
// Fragment: its e1000 driver and ip= configure the network).
type Options struct {
	Kernel string
	// NIC is QEMU's network card model (default e1000).
	NIC string
	// Modules are kernel modules (host paths) /init loads in this order
	// before configuring eth0 itself: a distribution kernel whose NIC
	// driver is a module (virtio_net).
	Modules []string
}

// Start boots the lab machine from kernel (a bzImage built with Fragment)
// and waits until its sshd answers; the machine is killed when the test
// ends.
func Start(t testing.TB, kernel string) *Host {
	t.Helper()
	return StartWith(t, Options{Kernel: kernel})
}

// StartWith is Start with Options.
func StartWith(t testing.TB, o Options) *Host {
	t.Helper()
	kernel := o.Kernel
	if o.NIC == "" {
		o.NIC = "e1000"
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 is needed (apt-get install qemu-system-x86)")
	}
	dir := t.TempDir()
	h := &Host{Dir: dir, Console: filepath.Join(dir, "console.log"), pidFile: filepath.Join(dir, "qemu.pid"), qmp: filepath.Join(dir, "qmp.sock")}
	h.Identity, h.KnownHosts = filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	port := freePort(t)
	h.URL = fmt.Sprintf("ssh://root@127.0.0.1:%d", port)
	hostKey := filepath.Join(dir, "host_key")
	for _, k := range []string{h.Identity, hostKey} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, _ := os.ReadFile(hostKey + ".pub")
	os.WriteFile(h.KnownHosts, []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, pub)), 0o600)
	h.Initrd = filepath.Join(dir, "initrd.cpio")
	if err := writeInitramfs(h.Initrd, h.Identity+".pub", hostKey, o.Modules); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "restart.sh")
	qemu := []string{"qemu-system-x86_64", "-M", "q35", "-m", "768", "-smp", "1", "-accel", "tcg", "-display", "none",
		"-no-reboot", "-kernel", kernel, "-initrd", h.Initrd, "-append", Cmdline,
		"-nic", fmt.Sprintf("user,model=%s,hostfwd=tcp:127.0.0.1:%d-:22", o.NIC, port),
		"-chardev", "file,id=con,path=" + h.Console + ",append=on", "-serial", "chardev:con",
		"-qmp", "unix:" + h.qmp + ",server=on,wait=off",
		"-daemonize", "-pidfile", h.pidFile}
	var quoted []string
	for _, a := range qemu {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
# Power-cycle the lab machine: kill QEMU, boot it again from the lab kernel.
p=$(cat %[1]s 2>/dev/null) && kill "$p" 2>/dev/null && while kill -0 "$p" 2>/dev/null; do sleep 0.2; done
echo "=== lab: power on ($PATCHEVAL_REASON) ===" >> %[2]s
exec %[3]s
`, h.pidFile, h.Console, strings.Join(quoted, " "))), 0o755)
	h.RestartHook = script
	t.Cleanup(h.Kill)
	if out, err := exec.Command("sh", script).CombinedOutput(); err != nil {
		t.Fatalf("starting the lab machine: %v\n%s", err, out)
	}
	if err := h.WaitSSH(10 * time.Minute); err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, h.ConsoleTail(40))
	}
	return h
}

// Kill stops QEMU at once (the machine is lost).
func (h *Host) Kill() {
	b, err := os.ReadFile(h.pidFile)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
}

// NMI injects a non-maskable interrupt into the running machine (QMP
// inject-nmi). A kernel booted with unknown_nmi_panic panics on it.
func (h *Host) NMI() error {
	c, err := net.DialTimeout("unix", h.qmp, 10*time.Second)
	if err != nil {
		return fmt.Errorf("lab machine QMP: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(c)
	if _, err := rd.ReadString('\n'); err != nil { // the greeting
		return fmt.Errorf("lab machine QMP greeting: %w", err)
	}
	for _, cmd := range []string{"qmp_capabilities", "inject-nmi"} {
		if _, err := fmt.Fprintf(c, "{\"execute\": %q}\n", cmd); err != nil {
			return err
		}
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return fmt.Errorf("lab machine QMP %s: %w", cmd, err)
			}
			var r struct {
				Return *json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(line), &r) != nil || (r.Return == nil && r.Error == nil) {
				continue // an event
			}
			if r.Error != nil {
				return fmt.Errorf("lab machine QMP %s: %s", cmd, r.Error.Desc)
			}
			break
		}
	}
	return nil
}

// ConsoleTail is the last n lines of the serial console.
func (h *Host) ConsoleTail(n int) string {
	b, _ := os.ReadFile(h.Console)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// SSH runs a command on the machine.
func (h *Host) SSH(ctx context.Context, command string) ([]byte, error) {
	port := strings.TrimPrefix(h.URL, "ssh://root@127.0.0.1:")
	args := []string{"-p", port, "-i", h.Identity, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}
	for _, o := range h.SSHOptions() {
		args = append(args, "-o", o)
	}
	return exec.CommandContext(ctx, "ssh", append(args, "root@127.0.0.1", "--", command)...).CombinedOutput()
}

// WaitSSH waits for the machine's sshd.
func (h *Host) WaitSSH(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := h.SSH(ctx, "true")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab machine %s: no ssh within %v: %v: %s", h.URL, wait, err, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// initScript is the lab's /init: pseudo file systems, busybox's
// commands, loopback, sshd in the foreground of a reaping PID 1.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run/sshd /var/empty /usr/bin /usr/sbin /sbin /root
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm 2>/dev/null
ifconfig lo 127.0.0.1 up
for m in /lab-modules/*.ko; do [ -f "$m" ] && insmod "$m"; done
if ! ifconfig eth0 2>/dev/null | grep -q "inet addr"; then
	ifconfig eth0 10.0.2.15 netmask 255.255.255.0 up && route add default gw 10.0.2.2
fi
chmod 700 /root /root/.ssh
echo "lab: up $(uname -r) $(cat /proc/cmdline)" > /dev/console
/usr/sbin/sshd -D -e -f /etc/ssh/sshd_config > /dev/console 2>&1 &
while :; do wait; sleep 1; done
`

const sshdConfig = `Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile /root/.ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
`

// writeInitramfs writes the lab's initramfs: its own files, then the
// userland archive (sshd, kexec, busybox and their libraries).
func writeInitramfs(path, authorizedKey, hostKey string, modules []string) error {
	u, err := userland.Build(context.Background(), "x86_64", []string{"sshd", "kexec", "busybox"}, cacheDir(), os.Stderr)
	if err != nil {
		return err
	}
	land, err := os.ReadFile(u.Archive)
	if err != nil {
		return err
	}
	auth, err := os.ReadFile(authorizedKey)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(hostKey)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	cw := initramfs.NewWriter(&b)
	for _, d := range []string{"dev", "proc", "sys", "tmp", "etc", "etc/ssh", "root", "root/.ssh", "run", "run/sshd", "var", "var/empty"} {
		cw.Dir(d)
	}
	cw.CharDev("dev/console", 0o600, 5, 1)
	cw.File("init", 0o755, []byte(initScript))
	cw.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/bin/false\n"))
	cw.File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	cw.File("etc/ssh/sshd_config", 0o644, []byte(sshdConfig))
	cw.File("etc/ssh/ssh_host_ed25519_key", 0o600, key)
	cw.File("root/.ssh/authorized_keys", 0o600, auth)
	if len(modules) > 0 {
		cw.Dir("lab-modules")
	}
	for i, m := range modules {
		data, err := os.ReadFile(m)
		if err != nil {
			return err
		}
		cw.File(fmt.Sprintf("lab-modules/%02d-%s", i, filepath.Base(m)), 0o644, data)
	}
	if err := cw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, append(b.Bytes(), land...), 0o644)
}

func cacheDir() string {
	if d := os.Getenv("PATCHEVAL_CACHE_DIR"); d != "" {
		return d
	}
	return xdg.CacheDir()
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
