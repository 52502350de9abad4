//go:build linux

package guest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// selinuxfs is where the agent mounts selinuxfs; the kernel creates the
// mount point only when SELinux is enabled.
const selinuxfs = "/sys/fs/selinux"

// mountSELinuxFS mounts selinuxfs when SELinux is enabled; it reports
// whether selinuxfs is there.
func mountSELinuxFS() (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(selinuxfs, &st); err != nil {
		return false, nil // selinux=0 or a kernel without SECURITY_SELINUX
	}
	if err := syscall.Stat(selinuxfs+"/enforce", &st); err == nil {
		return true, nil // mounted already
	}
	if err := syscall.Mount("selinuxfs", selinuxfs, "selinuxfs", 0, ""); err != nil && err != syscall.EBUSY {
		return true, fmt.Errorf("mount selinuxfs on %s: %w", selinuxfs, err)
	}
	return true, nil
}

// selinuxState is SELinux's state as selinuxfs shows it.
func selinuxState() string {
	var st syscall.Stat_t
	if syscall.Stat(selinuxfs, &st) != nil {
		return SELinuxDisabled
	}
	// Opening the policy fails with EINVAL until one is loaded.
	fd, err := syscall.Open(selinuxfs+"/policy", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err == syscall.EINVAL {
		return SELinuxNoPolicy
	}
	if err == nil {
		syscall.Close(fd)
	}
	b, err := readFile(selinuxfs + "/enforce")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch strings.TrimSpace(string(b)) {
	case "1":
		return SELinuxEnforcing
	case "0":
		return SELinuxPermissive
	}
	return "unknown (enforce " + strings.TrimSpace(string(b)) + ")"
}

// applySELinux loads the plan's policy and sets its mode, or checks that
// SELinux is disabled.
func applySELinux(s *SELinux, noInit bool) error {
	switch s.Mode {
	case SELinuxDisabled, SELinuxEnforcing, SELinuxPermissive:
	default:
		return fmt.Errorf("selinux mode %q: want %s, %s or %s", s.Mode, SELinuxEnforcing, SELinuxPermissive, SELinuxDisabled)
	}
	if noInit && s.Mode != SELinuxDisabled {
		return fmt.Errorf("selinux %s: the agent loads policies only as /init (QEMU), never on a running system", s.Mode)
	}
	var present bool
	if noInit {
		var st syscall.Stat_t
		present = syscall.Stat(selinuxfs, &st) == nil
	} else {
		var err error
		if present, err = mountSELinuxFS(); err != nil {
			return err
		}
	}
	if s.Mode == SELinuxDisabled {
		if present {
			return fmt.Errorf("selinux %s requested but %s exists: SELinux is enabled (the command line needs selinux=0, the kernel SECURITY_SELINUX_BOOTPARAM=y)", s.Mode, selinuxfs)
		}
		return nil
	}
	if !present {
		return fmt.Errorf("selinux %s requested but SELinux is not enabled (no %s): the kernel lacks SECURITY_SELINUX, or its command line has selinux=0, or SELinux is not among the LSMs it starts (its CONFIG_LSM does not list selinux: add security=selinux, or lsm=...,selinux, to the command line)", s.Mode, selinuxfs)
	}
	if len(s.Policy) == 0 {
		return fmt.Errorf("selinux %s requested without a policy to load", s.Mode)
	}
	// The kernel takes the whole policy in one write at offset 0.
	if err := writeOnce(selinuxfs+"/load", s.Policy); err != nil {
		return fmt.Errorf("loading SELinux policy %s (%d bytes): %w", s.PolicyName, len(s.Policy), err)
	}
	want := map[string]string{SELinuxEnforcing: "1", SELinuxPermissive: "0"}[s.Mode]
	if err := writeOnce(selinuxfs+"/enforce", []byte(want)); err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EACCES) {
			err = fmt.Errorf("%w (setting the mode needs SECURITY_SELINUX_DEVELOP=y)", err)
		}
		return fmt.Errorf("writing %s to %s/enforce: %w", want, selinuxfs, err)
	}
	if got := selinuxState(); got != s.Mode {
		return fmt.Errorf("selinux %s requested, selinuxfs shows %s", s.Mode, got)
	}
	return nil
}

// writeOnce writes data in a single write(2) without O_TRUNC, as
// selinuxfs's files want it.
func writeOnce(path string, data []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	n, err := syscall.Write(fd, data)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	if n != len(data) {
		return &os.PathError{Op: "write", Path: path, Err: fmt.Errorf("short write: %d of %d bytes", n, len(data))}
	}
	return nil
}
