package filter

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"

	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// guardedMatches replaces CEL's matches (s.matches(p) and matches(s, p),
// whose pattern Compile requires to be a constant) by one that compiles
// the pattern once and refuses, before running it, a match whose cost alone
// would go past CostLimit. CEL charges a call once it has returned, and a
// regular expression runs in time proportional to the text's length times
// the compiled pattern's size: charged afterwards, a hostile payload's
// megabyte string would run its course first.
//
// The cost is CEL's (text length in characters + 1) × 0.1 × (pattern
// length) × 0.25, where the pattern's length is at least the number of
// instructions it compiles to, so that a short pattern with large
// repetitions (`[a-z]{1000}`) is charged for the work it does.
var guardedMatches = []*interpreter.RegexOptimization{
	{Function: overloads.Matches, OverloadID: overloads.MatchesString, RegexIndex: 1, Factory: guardedMatchCall},
	{Function: overloads.Matches, OverloadID: overloads.Matches, RegexIndex: 1, Factory: guardedMatchCall},
}

// guardedMatchCall is the RegexOptimization factory of guardedMatches.
func guardedMatchCall(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	size := patternSize(pattern)
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(values ...ref.Val) ref.Val {
		if len(values) != 2 {
			return types.NoSuchOverloadErr()
		}
		text, ok := values[0].Value().(string)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		chars := utf8.RuneCountInString(text)
		charge := float64(chars+1) * cost.StringTraversalCostFactor * float64(size) * cost.RegexStringLengthCostFactor
		if charge > CostLimit {
			return types.WrapErr(&regexCostError{chars: chars, size: size})
		}
		return types.Bool(re.MatchString(text))
	}), nil
}

// patternSize is the larger of a pattern's length in characters and the
// number of instructions it compiles to.
func patternSize(pattern string) int {
	size := utf8.RuneCountInString(pattern)
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return size
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return size
	}
	return max(size, len(prog.Inst))
}

// regexCostError is a match refused by guardedMatches. It matches
// ErrCostLimit.
type regexCostError struct{ chars, size int }

func (e *regexCostError) Error() string {
	return fmt.Sprintf("%s: matches on %d characters with a pattern of size %d (limit %d)", ErrCostLimit, e.chars, e.size, CostLimit)
}

// Is reports whether target is ErrCostLimit.
func (e *regexCostError) Is(target error) bool { return target == ErrCostLimit }
