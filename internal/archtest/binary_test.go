package archtest

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// command is the binary users run.
const command = module + "/cmd/postbox"

// testOnlyModule is franz-go's in-memory Kafka cluster, 3 MB of test code:
// `postbox bench` links it only when built with -tags kfake.
const testOnlyModule = "github.com/twmb/franz-go/pkg/kfake"

// linkedTestKits are the test kits of postboxtest/ the command may link:
// the fault injectors of `postbox chaos` (a TCP proxy) and `postbox demo`
// (a consumer's injected HTTP failures), which import only the standard
// library. Any other kit (a fresh schema per test, broker fixtures, kfake
// through kafkatest) is test code the binary must not carry.
var linkedTestKits = []string{"postboxtest/netfault", "postboxtest/httpfault"}

// The binary users run, built without tags, links no test-only module:
// no kfake, and no test kit of postboxtest/ but the fault injectors its
// chaos and demo commands run.
func TestCommandLinksNoTestOnlyCode(t *testing.T) {
	list := exec.Command("go", "list", "-deps", command)
	list.Dir = repoRoot
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", command, err, stderr.Bytes())
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", command)
	}
	for _, dep := range deps {
		name, ours := rel(dep)
		switch {
		case dep == testOnlyModule || strings.HasPrefix(dep, testOnlyModule+"/"):
			t.Errorf("%s links %s (test-only: only a build with -tags kfake may)", command, dep)
		case ours && within(name, "postboxtest") && !slices.Contains(linkedTestKits, name):
			t.Errorf("%s links the test kit %s (only %v may be)", command, dep, linkedTestKits)
		}
	}
}
