package main
import ("testing";"github.com/patcheval/patcheval/build/kconfig")
func rc(t *testing.T, p string) kconfig.Config { c, err := kconfig.ReadConfig(p); if err != nil {t.Fatal(err)}; return c}
func TestP(t *testing.T){
  kc,err:=kconfig.Parse("/tmp/h4/linux-source-6.1","powerpc"); if err!=nil {t.Fatal(err)}
  for _, p := range kconfig.Verify(kc, rc(t,"/tmp/h4/c-vol/.config"), rc(t, "/tmp/h4/frag.config")) { t.Log(p); for _, r := range p.Rules { t.Log("   ", r) } }
  for _, p := range kconfig.Verify(kc, rc(t,"/tmp/h4/c-voldyn/.config"), map[string]string{"CONFIG_PREEMPT_DYNAMIC":"y"}) { t.Log(p); for _, r := range p.Rules { t.Log("   ", r) } }
  final := rc(t,"/tmp/h4/c-vol/.config")
  for n, v := range final { s := kc.Symbols[n]; if !s.Defined() { t.Errorf("%s undefined", n); continue }
    _ = v }
}
