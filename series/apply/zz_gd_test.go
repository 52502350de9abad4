package apply
import ("testing";"strings";"github.com/bluekeyes/go-gitdiff/gitdiff")
func TestX(t *testing.T){
 for _, d := range []string{
  "--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n",
  "diff --git a//etc/evil b//etc/evil\nnew file mode 100644\n--- /dev/null\n+++ b//etc/evil\n@@ -0,0 +1 @@\n+x\n",
  "diff --git /etc/evil /etc/evil\nnew file mode 100644\n--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n",
 }{
  fs, _, err := gitdiff.Parse(strings.NewReader(d))
  for _, f := range fs { t.Logf("%q %q new=%v", f.OldName, f.NewName, f.IsNew) }
  t.Log(err)
 }
}
