package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documentation's commands, flags and defaults are checked against
// the commands' own flag sets, so that a renamed flag or a changed default
// fails a test instead of leaving the docs wrong.

// repoRoot is the repository, two levels above this package.
const repoRoot = "../.."

// docFiles are the documents whose commands are checked: the README and
// docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// flagSet is the flag set of the command named by words ("relay",
// "failed list"): the flags its setup declares. nil when there is no such
// command (or it has subcommands and words stop before one).
func flagSet(words []string) *flag.FlagSet {
	if len(words) == 0 {
		return nil
	}
	cmd, ok := commands[words[0]]
	if !ok {
		return nil
	}
	if cmd.sub != nil {
		if len(words) < 2 {
			return flag.NewFlagSet("postbox "+words[0], flag.ContinueOnError) // "postbox failed": the list of its subcommands
		}
		if cmd, ok = cmd.sub[words[1]]; !ok {
			return nil
		}
	}
	fs := flag.NewFlagSet("postbox "+strings.Join(words, " "), flag.ContinueOnError)
	cmd.setup(fs)
	return fs
}

// commandWords returns the command and subcommand words at the head of
// args: ["failed", "list"] for "failed list --all".
func commandWords(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	if cmd, ok := commands[args[0]]; ok && cmd.sub != nil && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		return args[:2]
	}
	return args[:1]
}

// docCommand is one command line a document shows.
type docCommand struct {
	where string   // file:line
	args  []string // after "postbox"
}

// value is a number with an optional unit, in defaultText.
const value = `([0-9][0-9.]*(?:ns|us|µs|ms|s|m|h)?(?:[0-9.]+(?:ns|us|µs|ms|s|m|h))*)(?:\s*(days?|hours?|minutes?|seconds?|s\b|ms\b))?`

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`([^`]+)`")
	flagToken  = regexp.MustCompile(`^--?([a-z][a-z0-9-]*)(=.*)?$`)
	// defaultText finds the default the prose gives a flag, right after
	// it: "(30s)", "(default 30s)", "(64 for webhooks, ...)", "(5s: how
	// often ...)", "(7 days)", ", 64 by default", "defaults to 64". A list
	// of values ("(16, 64, 256)") is no default.
	defaultText = regexp.MustCompile("^`?\\s*(?:\\(\\s*(?:default:?\\s+|by default\\s+)?`?" + value + "`?(?:\\)|:|;| for | by default|,\\s*[^0-9\\s])|,?\\s*(?:which\\s+)?defaults?\\s+(?:to|is)\\s+`?" + value + "|,?\\s*`?" + value + "`?\\s+by\\s+default)")
	valueLike   = regexp.MustCompile(`^-?[0-9][0-9.]*(ns|us|µs|ms|s|m|h)?([0-9.]+(ns|us|µs|ms|s|m|h))*$|^(true|false)$`)
)

// commandLine returns the words after "postbox" when line runs postbox
// ("postbox relay ...", "$ postbox ...", "go run ./cmd/postbox demo",
// "DB_DSN=... postbox ..."), and false otherwise.
func commandLine(line string) ([]string, bool) {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	words := shellWords(line)
	for len(words) > 0 && (words[0] == "$" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
		words = words[1:]
	}
	switch {
	case len(words) >= 2 && words[0] == "postbox":
		words = words[1:]
	case len(words) >= 4 && words[0] == "go" && words[1] == "run" && strings.HasSuffix(words[2], "cmd/postbox"):
		words = words[3:]
	default:
		return nil, false
	}
	if strings.HasSuffix(words[0], ":") || strings.ContainsAny(words[0][:1], "<[") {
		return nil, false // output ("postbox demo: 1000 orders ..."), or a placeholder ("postbox <command> --help")
	}
	return words, true
}

// shellWords splits line into words as a shell would for the quotes: a
// quoted string is one word.
func shellWords(line string) []string {
	var (
		words []string
		word  strings.Builder
		quote rune
		in    bool
	)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		default:
			word.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, word.String())
	}
	return words
}

// parseDoc returns the command lines of a Markdown document, in code
// blocks (joining lines continued with a backslash) and in inline code,
// and the inline flags of its prose with the command they are about: the
// last command named before them in their paragraph, or else in their
// section.
func parseDoc(name, text string) (cmds []docCommand, flags []docFlag) {
	var (
		inBlock   bool
		pending   string
		context   []string // the command the prose is about
		paragraph []string // the command named in the current paragraph
	)
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		where := fmt.Sprintf("%s:%d", name, i+1)
		if fence.MatchString(line) {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			pending += line
			if strings.HasSuffix(strings.TrimSpace(line), `\`) {
				pending = strings.TrimSuffix(strings.TrimSpace(pending), `\`) + " "
				continue
			}
			if args, ok := commandLine(pending); ok {
				cmds = append(cmds, docCommand{where, args})
				paragraph = commandWords(args)
				context = paragraph
			}
			pending = ""
			continue
		}
		switch {
		case strings.HasPrefix(line, "#"):
			context, paragraph = nil, nil
		case strings.TrimSpace(line) == "":
			paragraph = nil
		}
		for _, m := range inlineCode.FindAllStringSubmatchIndex(line, -1) {
			code := line[m[2]:m[3]]
			if args, ok := commandLine(code); ok {
				cmds = append(cmds, docCommand{where, args})
				paragraph = commandWords(args)
				context = paragraph
				continue
			}
			words := strings.Fields(code)
			if len(words) == 0 || !flagToken.MatchString(words[0]) || !strings.HasPrefix(words[0], "--") {
				continue
			}
			about := paragraph
			if about == nil {
				about = context
			}
			f := docFlag{where: where, about: about, name: flagToken.FindStringSubmatch(words[0])[1], file: name}
			if d := defaultText.FindStringSubmatch(line[m[1]-1:]); d != nil && len(words) == 1 {
				f.documented = withUnit(strings.TrimRight(d[1]+d[3]+d[5], "."), d[2]+d[4]+d[6])
			}
			flags = append(flags, f)
		}
	}
	return cmds, flags
}

// withUnit writes a number and the unit word after it as a duration
// ("7", "days" gives "168h"); n alone without a unit.
func withUnit(n, unit string) string {
	hours := map[string]string{"day": "24", "days": "24"}
	if h, ok := hours[unit]; ok {
		days, err := strconv.ParseFloat(n, 64)
		hoursPerDay, _ := strconv.ParseFloat(h, 64)
		if err == nil {
			return strconv.FormatFloat(days*hoursPerDay, 'f', -1, 64) + "h"
		}
	}
	switch strings.TrimSuffix(unit, "s") {
	case "hour":
		return n + "h"
	case "minute":
		return n + "m"
	case "second", "":
		if unit != "" {
			return n + "s"
		}
	case "m":
		return n + "ms"
	}
	return n
}

// docFlag is a flag the prose names.
type docFlag struct {
	where, file string
	about       []string // the command it is about; nil: any
	name        string
	documented  string // the default the prose gives it, if any
}

// checkArgs returns why args (a command line after "postbox") names a
// command or a flag that does not exist, or "".
func checkArgs(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[0], "<") || strings.HasPrefix(args[0], "[") {
		return ""
	}
	if args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		return ""
	}
	words := commandWords(args)
	fs := flagSet(words)
	if fs == nil {
		return fmt.Sprintf("no command postbox %s", strings.Join(words, " "))
	}
	for _, a := range args[len(words):] {
		a = strings.Trim(a, "[]()'\"")
		m := flagToken.FindStringSubmatch(a)
		if m == nil || a == "-" || m[1] == "h" || m[1] == "help" {
			continue
		}
		if fs.Lookup(m[1]) == nil {
			return fmt.Sprintf("postbox %s has no flag --%s", strings.Join(words, " "), m[1])
		}
	}
	return ""
}

// computedDefaults are the values a flag whose declared default is 0
// takes, by the sink: --concurrency and --publish-batch of the relay.
func computedDefaults(flagName, file string) []string {
	schemes := []string{"https://h", "nats://h", "amqp://h", "kafka://h"}
	for _, s := range []string{"kafka", "nats", "amqp", "webhook"} {
		if strings.Contains(filepath.Base(file), s) {
			schemes = []string{map[string]string{"kafka": "kafka://h", "nats": "nats://h", "amqp": "amqp://h", "webhook": "https://h"}[s]}
		}
	}
	var out []string
	for _, s := range schemes {
		switch flagName {
		case "concurrency":
			out = append(out, strconv.Itoa(concurrencyDefault(s)))
		case "publish-batch":
			out = append(out, strconv.Itoa(publishBatchDefault(s)))
		}
	}
	return out
}

// sameValue reports whether a documented default is the code's: the same
// duration, number or text.
func sameValue(doc, code string) bool {
	if doc == code {
		return true
	}
	if d1, err := time.ParseDuration(doc); err == nil {
		d2, err := time.ParseDuration(code)
		return err == nil && d1 == d2
	}
	n1, err1 := strconv.ParseFloat(strings.ReplaceAll(doc, ",", ""), 64)
	n2, err2 := strconv.ParseFloat(code, 64)
	return err1 == nil && err2 == nil && n1 == n2
}

// checkFlag returns why a flag of the prose does not exist for the
// command it is about (or for any command, when it is about none), or why
// its documented default differs from the code's, or "".
func checkFlag(f docFlag) string {
	candidates := [][]string{f.about}
	if f.about == nil || flagOf(f.about, f.name) == nil {
		// Prose about no command, or naming another command's flag in a
		// paragraph about one: the flag of any command.
		candidates = allCommands()
	}
	var (
		found bool
		wrong []string
	)
	for _, words := range candidates {
		fl := flagOf(words, f.name)
		if fl == nil {
			continue
		}
		found = true
		if f.documented == "" || !valueLike.MatchString(f.documented) {
			return ""
		}
		want := []string{fl.DefValue}
		if fl.DefValue == "0" {
			if c := computedDefaults(f.name, f.file); len(c) > 0 {
				want = c
			}
		}
		for _, w := range want {
			if sameValue(f.documented, w) {
				return ""
			}
		}
		wrong = append(wrong, fmt.Sprintf("%s (postbox %s)", strings.Join(want, " or "), strings.Join(words, " ")))
	}
	switch {
	case !found && f.about != nil:
		return fmt.Sprintf("--%s: no such flag (of postbox %s or any command)", f.name, strings.Join(f.about, " "))
	case !found:
		return fmt.Sprintf("--%s: no command has this flag", f.name)
	}
	return fmt.Sprintf("--%s: documented default %s, the code's is %s", f.name, f.documented, strings.Join(wrong, ", "))
}

// flagOf is the flag name of the command words, or nil.
func flagOf(words []string, name string) *flag.Flag {
	if fs := flagSet(words); fs != nil {
		return fs.Lookup(name)
	}
	return nil
}

// allCommands lists every runnable command's words.
func allCommands() [][]string {
	var out [][]string
	for name, cmd := range commands {
		if cmd.sub == nil {
			out = append(out, []string{name})
		}
		for sub := range cmd.sub {
			out = append(out, []string{name, sub})
		}
	}
	return out
}

// checkDoc returns the problems of one document.
func checkDoc(name, text string) []string {
	problems, _, _, _ := checkDocCounted(name, text)
	return problems
}

// checkDocCounted returns the problems of one document, and how many
// command lines and prose flags it checked.
func checkDocCounted(name, text string) (problems []string, nCmds, nFlags, nDefaults int) {
	cmds, flags := parseDoc(name, text)
	for _, f := range flags {
		if f.documented != "" && valueLike.MatchString(f.documented) {
			nDefaults++
		}
	}
	for _, c := range cmds {
		if p := checkArgs(c.args); p != "" {
			problems = append(problems, c.where+": "+p)
		}
	}
	for _, f := range flags {
		if p := checkFlag(f); p != "" {
			problems = append(problems, f.where+": "+p)
		}
	}
	return problems, len(cmds), len(flags), nDefaults
}

// Every postbox command line of the README and docs/*.md names a command
// and flags that exist, every flag the prose names exists, and every
// default the prose gives a flag is the code's.
func TestDocsCommandsAndFlagsExist(t *testing.T) {
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, file)
		problems, cmds, flags, defaults := checkDocCounted(rel, string(text))
		for _, p := range problems {
			t.Error(p)
		}
		t.Logf("%s: %d command lines, %d flags in prose, %d of them with a default", rel, cmds, flags, defaults)
	}
}

// The checker finds what it is for: a flag that does not exist, in a code
// block, in inline code and in prose; a command that does not exist; a
// default that differs; and accepts what is right.
func TestDocsCheckerCatchesDrift(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want string // "" for no problem
	}{
		{"```\npostbox relay --db $DB_DSN --no-such-flag 1\n```", "postbox relay has no flag --no-such-flag"},
		{"```\npostbox relay --db $DB_DSN \\\n  --no-such-flag 1\n```", "postbox relay has no flag --no-such-flag"},
		{"Run `postbox status --no-such-flag`.", "postbox status has no flag --no-such-flag"},
		{"Run `postbox frobnicate`.", "no command postbox frobnicate"},
		{"Run `postbox failed frobnicate --all`.", "no command postbox failed frobnicate"},
		{"`postbox relay` takes `--no-such-flag`.", "--no-such-flag: no such flag"},
		{"`postbox relay`: `--lease` (10s) bounds a claim.", "documented default 10s, the code's is 30s (postbox relay)"},
		{"`postbox relay`: `--lease` (30s) bounds a claim.", ""},
		{"`postbox relay`: `--batch` defaults to 64.", "documented default 64, the code's is 2000"},
		{"`--batch` defaults to 2000 (a relay's).", ""},
		{"`postbox relay`: `--lease` (30 s: how long) and `--heartbeat` (5s: a beat).", ""},
		{"`postbox relay`: `--lease` (3 days) bounds a claim.", "documented default 72h, the code's is 30s"},
		{"`postbox relay`: `--concurrency` (16, 64, 256) in turn.", ""},
		{"`postbox relay`: `--timeout` (20 s by default) bounds a publish.", "documented default 20s, the code's is 10s"},
		{"`postbox relay --sink https://...`: `--concurrency` defaults to 64.", ""},
		{"`postbox failed list --group-by error`, `postbox sink setup --sink URL --queue q`, `postbox version`", ""},
		{"```\n$ go run ./cmd/postbox demo --rate 10\nDB_DSN=x postbox migrate\npostbox demo: 10 orders\n```", ""},
		{"```\npostbox chaos --allow-restart 'pg_ctl restart -m fast'\n```", ""},
		{"`postbox relay`: concurrently (`--batch`, 64 by default).", "documented default 64, the code's is 2000"},
	} {
		got := strings.Join(checkDoc("doc.md", c.doc), "\n")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("checkDoc(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
	if got := checkDoc("kafka.md", "`postbox relay`: `--concurrency` defaults to 64."); len(got) == 0 {
		t.Error("kafka.md saying --concurrency defaults to 64 passed; a broker sink's default is 1024")
	}
}

// docs/architecture.md's package table names every package of the module
// (go list ./...), and none that does not exist. A row may name a tree
// with the "dir/..." pattern.
func TestDocsArchitecturePackageTable(t *testing.T) {
	list := exec.Command("go", "list", "./...")
	list.Dir = repoRoot
	out, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/postbox-go/postbox"
	var packages []string
	for _, p := range strings.Fields(string(out)) {
		packages = append(packages, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	text, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := packageTable(string(text))
	if len(named) == 0 {
		t.Fatal("docs/architecture.md has no package table (| package | owns |)")
	}
	covered := func(pkg string) bool {
		for _, n := range named {
			if n == pkg || strings.HasSuffix(n, "/...") && (pkg == strings.TrimSuffix(n, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(n, "..."))) {
				return true
			}
		}
		return false
	}
	for _, p := range packages {
		if !covered(p) {
			t.Errorf("package %q is not in docs/architecture.md's package table", cmp.Or(p, "postbox (root)"))
		}
	}
	for _, n := range named {
		found := false
		for _, p := range packages {
			if p == n || strings.HasSuffix(n, "/...") && strings.HasPrefix(p+"/", strings.TrimSuffix(n, "...")) {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/architecture.md's package table names %q, which is no package", n)
		}
	}
}

// packageTable returns the packages named in the first column of the
// table headed "| package |": each code span, "postbox" (root) as "".
func packageTable(text string) []string {
	var named []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "| package |") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(cells[1], "---") {
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(cells[1], -1) {
			if m[1] == "postbox" {
				named = append(named, "")
				continue
			}
			named = append(named, m[1])
		}
	}
	return named
}
