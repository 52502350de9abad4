// Package kconfig reads a kernel tree's own Kconfig files and explains
// final configurations with them.
//
// Parse reads srcDir/Kconfig and everything it sources for one SRCARCH
// (config, menuconfig, choice, menu, if, comment, select, imply, default,
// range, depends on, help, macros such as $(SRCARCH); macros only the real
// Kconfig can evaluate, like $(cc-option,...), stay as unknown-valued
// tokens). Every Property records its file:line and source text.
//
// ReadConfig/ParseConfig read a .config. Verify checks that each requested
// symbol holds its requested value after `make olddefconfig` and says why
// not (symbol missing from the tree, unmet `depends on`, a choice, a
// select, a range). Diff is the confound report: every symbol that differs
// between two final configs, split into requested and derived, with the
// Kconfig rules (default-if, select, imply, depends on, choice) that made
// each derived symbol change; DiffTrees does the same across a base and a
// patched tree and also names the Kconfig lines the patch added or
// removed. The final configs themselves always come
// from the kernel's own scripts/kconfig; this package never computes one.
package kconfig
