package archtest

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the repository, two levels above this package.
const repoRoot = "../.."

// module is the module's path; packages are named relative to it, the
// root package "" (written `postbox` in the docs).
const module = "github.com/postbox-go/postbox"

// pkg is one package of the module and what it imports of the module.
type pkg struct {
	// imports are the module's packages its own files import.
	imports []string
	// testImports are those its tests import besides (in-package and
	// external tests), itself left out.
	testImports []string
}

// graph is the module's import graph, by package.
type graph map[string]*pkg

// loadGraph returns the module's import graph, read once by the tests
// that need it.
func loadGraph(t *testing.T) graph {
	t.Helper()
	g, err := listGraph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// listGraph reads the module's packages and their imports from go list.
var listGraph = sync.OnceValues(func() (graph, error) {
	list := exec.Command("go", "list", "-f",
		"{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}",
		module+"/...")
	list.Dir = repoRoot
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) != 3 {
			return nil, fmt.Errorf("go list: unexpected line %q", sc.Text())
		}
		name, _ := rel(fields[0])
		g[name] = &pkg{
			imports:     ofModule(fields[1]),
			testImports: slices.DeleteFunc(ofModule(fields[2]), func(imp string) bool { return imp == name }),
		}
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("go list listed no package")
	}
	return g, nil
})

// rel names path relative to the module; ok is false for a path outside
// it.
func rel(path string) (name string, ok bool) {
	if path == module {
		return "", true
	}
	name, ok = strings.CutPrefix(path, module+"/")
	return name, ok
}

// ofModule returns the module's packages among the space-separated import
// paths, sorted, without duplicates.
func ofModule(paths string) []string {
	var names []string
	for _, p := range strings.Fields(paths) {
		if name, ok := rel(p); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// floors gives each package its floor: 0 for one that imports none of the
// module's packages, else one above the highest of those it imports.
// Tests' imports do not count: a test may stand above what it tests.
func floors(g graph) map[string]int {
	floor := map[string]int{}
	var of func(name string) int
	of = func(name string) int {
		if f, ok := floor[name]; ok {
			return f
		}
		f := 0
		for _, imp := range g[name].imports {
			f = max(f, of(imp)+1)
		}
		floor[name] = f
		return f
	}
	for name := range g {
		of(name)
	}
	return floor
}

// display is how the docs write a package's name.
func display(name string) string {
	if name == "" {
		return "postbox"
	}
	return name
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	floorsHead = "| floor | packages |"
)

// documentedFloors reads the floors table of an architecture document:
// the table headed "| floor | packages |", whose rows give a floor and the
// packages on it as code spans (`postbox` for the root package).
func documentedFloors(text string) (map[string]int, error) {
	documented := map[string]int{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if !in {
			in = strings.TrimSpace(line) == floorsHead
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) != 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		floor, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			return nil, fmt.Errorf("floors table: %q is no floor", strings.TrimSpace(cells[1]))
		}
		for _, m := range inlineCode.FindAllStringSubmatch(cells[2], -1) {
			name := m[1]
			if name == "postbox" {
				name = ""
			}
			if f, dup := documented[name]; dup {
				return nil, fmt.Errorf("floors table: `%s` is on floors %d and %d", m[1], f, floor)
			}
			documented[name] = floor
		}
	}
	if !in {
		return nil, fmt.Errorf("no floors table (a table headed %q)", floorsHead)
	}
	if len(documented) == 0 {
		return nil, fmt.Errorf("the floors table names no package")
	}
	return documented, nil
}

// checkFloors compares the floors the imports give with those documented:
// one problem per package that is missing, misplaced or no package.
func checkFloors(computed, documented map[string]int) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(computed)) {
		d, ok := documented[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("`%s` (floor %d) is not in the floors table", display(name), computed[name]))
		case d != computed[name]:
			problems = append(problems, fmt.Sprintf("`%s` is documented on floor %d, its imports put it on floor %d", display(name), d, computed[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := computed[name]; !ok {
			problems = append(problems, fmt.Sprintf("the floors table names `%s`, which is no package", display(name)))
		}
	}
	return problems
}

// floorsTable is the floors table as the imports make it, for a failure
// message to show.
func floorsTable(computed map[string]int) string {
	byFloor := map[int][]string{}
	for _, name := range slices.Sorted(maps.Keys(computed)) {
		f := computed[name]
		byFloor[f] = append(byFloor[f], "`"+display(name)+"`")
	}
	var b strings.Builder
	b.WriteString(floorsHead + "\n|---|---|\n")
	for _, f := range slices.Sorted(maps.Keys(byFloor)) {
		fmt.Fprintf(&b, "| %d | %s |\n", f, strings.Join(byFloor[f], ", "))
	}
	return b.String()
}

// docs/architecture.md's floors table puts every package of the module on
// the floor its imports give it, and names no other: a package added
// without a line, or an import that moves a package to another floor,
// fails here until the table is brought up to date (the failure shows the
// table the imports make).
func TestArchitectureDocPutsEveryPackageOnItsFloor(t *testing.T) {
	computed := floors(loadGraph(t))
	text, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented, err := documentedFloors(string(text))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	if problems := checkFloors(computed, documented); len(problems) > 0 {
		t.Errorf("docs/architecture.md's floors table is not the module's:\n%s\n\nthe imports make it:\n\n%s",
			strings.Join(problems, "\n"), floorsTable(computed))
	}
}

// The check itself fails on each way the table can be wrong, and reads the
// table it writes.
func TestCheckFloorsFindsEveryDifference(t *testing.T) {
	computed := map[string]int{"": 0, "store": 1, "relay": 2}
	table := floorsTable(computed)
	documented, err := documentedFloors("# Floors\n\n" + table + "\nafter the table: `sink` is not read\n")
	if err != nil {
		t.Fatal(err)
	}
	if problems := checkFloors(computed, documented); len(problems) > 0 {
		t.Fatalf("the table floorsTable writes:\n%s\nfails: %q", table, problems)
	}
	for _, c := range []struct {
		name, doc, want string
	}{
		{"package without a line", "| 0 | `postbox` |\n| 1 | `store` |", "`relay` (floor 2) is not in the floors table"},
		{"import that lifts a package", "| 0 | `postbox` |\n| 1 | `store`, `relay` |", "`relay` is documented on floor 1, its imports put it on floor 2"},
		{"root package misplaced", "| 1 | `postbox`, `store` |\n| 2 | `relay` |", "`postbox` is documented on floor 1, its imports put it on floor 0"},
		{"package that is gone", "| 0 | `postbox` |\n| 1 | `store` |\n| 2 | `relay`, `endpoint/guard` |", "the floors table names `endpoint/guard`, which is no package"},
	} {
		documented, err := documentedFloors(floorsHead + "\n|---|---|\n" + c.doc + "\n")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := checkFloors(computed, documented); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	for doc, want := range map[string]string{
		"# no table\n": "no floors table",
		floorsHead + "\n|---|---|\n| one | `x` |\n":            `"one" is no floor`,
		floorsHead + "\n|---|---|\n| 0 | `x` |\n| 1 | `x` |\n": "`x` is on floors 0 and 1",
		floorsHead + "\n|---|---|\n| 0 | x |\n":                "names no package",
	} {
		if _, err := documentedFloors(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("documentedFloors(%q) = %v, want an error with %q", doc, err, want)
		}
	}
}

// within reports whether name is dir's package or below it.
func within(name, dir string) bool {
	return dir == "" || name == dir || strings.HasPrefix(name, dir+"/")
}

// head is the package that heads the folder name lives in, seen from dir
// (a folder above name): the shallowest package on the way down from dir
// to name, name itself when no folder on the way is a package.
func (g graph) head(dir, name string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(name, dir), "/")
	parts := strings.Split(rest, "/")
	for i := range parts {
		h := strings.Join(parts[:i+1], "/")
		if dir != "" {
			h = dir + "/" + h
		}
		if _, ok := g[h]; ok {
			return h
		}
	}
	return name
}

// common is the deepest folder both a and b are within.
func common(a, b string) string {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	return strings.Join(as[:n], "/")
}

// runsBackUp reports whether from's import of to runs back up a folder:
// seen from the folder both are within, the head of to's folder stands on
// the floor of the head of from's, or above. A package's own subfolders
// are below it, and its parent folders' packages are what it builds on,
// so imports along one line of folders never run back up.
func runsBackUp(g graph, floor map[string]int, from, to string) bool {
	if within(from, to) || within(to, from) {
		return false
	}
	dir := common(from, to)
	return floor[g.head(dir, to)] >= floor[g.head(dir, from)]
}

// edge is one import: from's own files, or its tests when test is set,
// import to.
type edge struct {
	from, to string
	test     bool
}

func (e edge) String() string {
	if e.test {
		return fmt.Sprintf("%s (its tests) imports %s", display(e.from), display(e.to))
	}
	return fmt.Sprintf("%s imports %s", display(e.from), display(e.to))
}

// debts are the imports known to break a rule below, each waiting for the
// change that moves what it imports. A test fails on a broken rule that is
// not listed here, and on a listed debt that is paid (the import is gone),
// so that the list only shrinks.
var debts = map[string][]edge{}

// settle fails t for each edge found that is not a debt of rule, and for
// each debt of rule that was not found.
func settle(t *testing.T, rule, broken string, found []edge) {
	t.Helper()
	for _, e := range found {
		if !slices.Contains(debts[rule], e) {
			t.Errorf("%s: %s", e, broken)
		}
	}
	for _, e := range debts[rule] {
		if !slices.Contains(found, e) {
			t.Errorf("%s no longer: delete it from the debts of %q", e, rule)
		}
	}
}

// No package imports from a folder that is not below its own: seen from
// the folder both are within, the head package of the imported folder
// stands below the head of the importer's. A package in sink/ importing
// one in endpoint/, whose head imports the sinks, fails; so do siblings
// on one floor that import each other (stores and sinks). Tests' imports
// are not held to it: a test may stand above what it tests.
func TestNoImportRunsBackUp(t *testing.T) {
	g := loadGraph(t)
	floor := floors(g)
	var found []edge
	for _, name := range slices.Sorted(maps.Keys(g)) {
		for _, imp := range g[name].imports {
			if runsBackUp(g, floor, name, imp) {
				found = append(found, edge{from: name, to: imp})
			}
		}
	}
	settle(t, "folders", "it runs back up a folder: move the imported package below the importer's folder", found)
}

// The consumer side (package inbox and its consumers) imports nothing of
// the producer side (the sinks, the relay, the endpoints): the two ends
// meet in the wire format of package postbox, not in each other's code.
// Their tests may use the producer side to send what they consume.
func TestConsumerSideImportsNoProducerSide(t *testing.T) {
	g := loadGraph(t)
	var found []edge
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if !within(name, "inbox") {
			continue
		}
		for _, imp := range g[name].imports {
			if within(imp, "sink") || within(imp, "relay") || within(imp, "endpoint") {
				found = append(found, edge{from: name, to: imp})
			}
		}
	}
	settle(t, "sides", "the consumer side imports the producer side", found)
}

// The module's internal/ folder holds only leaf helpers: each of its
// packages imports none of the module's, so it stands on floor 0 and any
// package may use it. The applications (postbox demo, bench, chaos) and
// the command's database opener live under cmd/postbox/internal/, where Go
// lets only the command import them.
func TestInternalHoldsOnlyLeafHelpers(t *testing.T) {
	g := loadGraph(t)
	var found []edge
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if within(name, "internal") {
			found = append(found, edges(name, g[name].imports, false)...)
		}
	}
	settle(t, "leaves", "a package under internal/ imports the module: it is no leaf helper, move it up (an application under cmd/postbox/internal/, a test kit under postboxtest/)", found)
}

// The test kits under postboxtest/ are for tests: no library package
// imports one from its own files. The command's applications may (postbox
// chaos injects its faults with netfault and httpfault), and the kits
// build on each other.
func TestLibrariesImportNoTestKit(t *testing.T) {
	g := loadGraph(t)
	var found []edge
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if within(name, "cmd") || within(name, "postboxtest") {
			continue
		}
		for _, e := range edges(name, g[name].imports, false) {
			if within(e.to, "postboxtest") {
				found = append(found, e)
			}
		}
	}
	settle(t, "kits", "a library imports a test kit", found)
}

// edges are from's imports of each of to.
func edges(from string, to []string, test bool) []edge {
	var es []edge
	for _, imp := range to {
		es = append(es, edge{from: from, to: imp, test: test})
	}
	return es
}

// The folder rule on the house as it was: the SSRF guard in endpoint/,
// imported by the webhook sink, ran back up; under sink/webhook/ it does
// not. Folders that are no package (internal/) are looked through.
func TestRunsBackUpOnTheGuardsMove(t *testing.T) {
	before := graph{
		"":               {},
		"sink":           {imports: []string{""}},
		"sink/webhook":   {imports: []string{"", "endpoint/guard", "sink"}},
		"endpoint":       {imports: []string{"endpoint/guard", "sink", "sink/webhook"}},
		"endpoint/guard": {},
		"internal/a":     {},
		"internal/b":     {imports: []string{"internal/a"}},
	}
	after := graph{
		"":                   {},
		"sink":               {imports: []string{""}},
		"sink/webhook":       {imports: []string{"", "sink", "sink/webhook/guard"}},
		"sink/webhook/guard": {},
		"endpoint":           {imports: []string{"sink", "sink/webhook", "sink/webhook/guard"}},
		"internal/a":         {},
		"internal/b":         {imports: []string{"internal/a"}},
	}
	for _, c := range []struct {
		g        graph
		from, to string
		want     bool
	}{
		{before, "sink/webhook", "endpoint/guard", true},
		{before, "endpoint", "endpoint/guard", false},
		{before, "endpoint", "sink/webhook", false},
		{before, "sink/webhook", "sink", false},
		{after, "sink/webhook", "sink/webhook/guard", false},
		{after, "endpoint", "sink/webhook/guard", false},
		{after, "internal/b", "internal/a", false},
		{after, "internal/a", "internal/b", true},
	} {
		if got := runsBackUp(c.g, floors(c.g), c.from, c.to); got != c.want {
			t.Errorf("runsBackUp(%s -> %s) = %v, want %v", display(c.from), display(c.to), got, c.want)
		}
	}
}
