package main
import ("testing";"github.com/patcheval/patcheval/build/kconfig")
func BenchmarkParse(b *testing.B){ for i:=0;i<b.N;i++ { if _, err := kconfig.Parse("/tmp/h4/linux-source-6.1","powerpc"); err != nil {b.Fatal(err)} } }
