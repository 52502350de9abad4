// Command agent is patcheval's guest agent: /init of the initramfs that
// the QEMU target boots, or a plain program (--no-init) on a hardware
// target. All of its code lives in package guest; see guest.Main.
package main

import "github.com/patcheval/patcheval/evaluate/guest"

func main() { guest.Main() }
