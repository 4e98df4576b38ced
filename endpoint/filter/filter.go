package filter

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

const (
	// MaxExpressionLength is the longest filter expression, in bytes.
	MaxExpressionLength = 4096

	// CostLimit is the most one evaluation may cost in CEL's cost units:
	// about one per operation and per ten bytes a string function reads, so
	// that payload.items.exists(i, i.sku == "A") costs about 7 per element.
	// A typical filter costs under 20; the limit lets a comprehension visit
	// some 1,400 elements, and stops an evaluation after about a millisecond
	// of work, with ErrCostLimit.
	CostLimit = 10_000

	// maxErrorMessage bounds the length of an evaluation error's message,
	// some of which quote a value from the payload.
	maxErrorMessage = 200
)

var (
	// ErrCostLimit is matched (errors.Is) by Match's error when an
	// evaluation went past CostLimit.
	ErrCostLimit = errors.New("cost limit exceeded")

	// ErrPayload is matched (errors.Is) by Match's error when the filter
	// reached a payload that could not be decoded: over MaxPayloadBytes,
	// nested deeper than MaxPayloadDepth, or not valid JSON.
	ErrPayload = errors.New("payload not decodable")
)

// Filter is a compiled filter expression. It is safe for concurrent use.
type Filter struct {
	expr string
	ast  *cel.Ast
	prg  cel.Program
}

// CompileError is why an expression was refused: a syntax error, a
// reference to an undeclared variable or function, a type error, or a bound
// the expression breaks. Line and Column (both from 1) locate the error in
// the expression; both are 0 for errors about the whole expression (empty,
// too long, too costly).
type CompileError struct {
	Line, Column int
	// Msg is one line, fit to print after "filter: 1:13: ".
	Msg string
}

// Error is "filter: LINE:COLUMN: MSG", or "filter: MSG" without a position.
func (e *CompileError) Error() string {
	if e.Line == 0 {
		return "filter: " + e.Msg
	}
	return fmt.Sprintf("filter: %d:%d: %s", e.Line, e.Column, e.Msg)
}

// environment is the one CEL environment every filter compiles in: the
// variables of the package documentation, the standard library and optional
// values, nothing else.
var environment = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("event_type", cel.StringType),
		cel.Variable("aggregate_type", cel.StringType),
		cel.Variable("aggregate_id", cel.StringType),
		cel.Variable("id", cel.StringType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("payload", cel.DynType),
		cel.OptionalTypes(),
		cel.ParserExpressionSizeLimit(MaxExpressionLength),
		cel.ASTValidators(
			cel.ValidateRegexLiterals(),
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
		),
	)
})

// Compile parses and type-checks expr. It refuses, with a *CompileError:
// an empty expression, one over MaxExpressionLength bytes or not UTF-8; a
// syntax, reference or type error (a constant regex, duration or timestamp
// that does not parse included); a call of matches whose pattern is not a
// constant string; a type other than bool or dyn (an expression of type
// dyn, such as payload.flag, must evaluate to a bool, or Match reports an
// error); and an expression that CEL's cost estimate says goes past
// CostLimit on every event, or on some whatever their headers and payload.
func Compile(expr string) (*Filter, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, &CompileError{Msg: "expression is empty"}
	}
	if len(expr) > MaxExpressionLength {
		return nil, &CompileError{Msg: fmt.Sprintf("expression is %d bytes, over the limit of %d", len(expr), MaxExpressionLength)}
	}
	if !utf8.ValidString(expr) {
		return nil, &CompileError{Msg: "expression is not valid UTF-8"}
	}
	env, err := environment()
	if err != nil {
		return nil, fmt.Errorf("filter: CEL environment: %w", err)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, issuesError(iss.Errors())
	}
	if t := checked.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		line, col := position(checked, checked.NativeRep().Expr().ID())
		return nil, &CompileError{Line: line, Column: col, Msg: fmt.Sprintf("expression has type %s, want bool", t)}
	}
	if err := checkPatterns(checked); err != nil {
		return nil, err
	}
	if err := checkCost(env, checked); err != nil {
		return nil, err
	}
	prg, err := env.Program(checked,
		cel.CostLimit(CostLimit),
		cel.EvalOptions(cel.OptOptimize),
		cel.OptimizeRegex(guardedMatches...),
	)
	if err != nil {
		return nil, &CompileError{Msg: oneLine(err.Error())}
	}
	return &Filter{expr: expr, ast: checked, prg: prg}, nil
}

// Check reports whether expr compiles, with Compile's error: for validating
// a filter before it is stored.
func Check(expr string) error {
	_, err := Compile(expr)
	return err
}

// String returns the expression as it was compiled.
func (f *Filter) String() string { return f.expr }

// Match evaluates the filter on the event of in. An error means the
// evaluation failed (a missing key or header, a type mismatch, ErrCostLimit,
// ErrPayload, a result that is not a bool): the caller treats it as no match,
// and counts and logs it. The error's message is one line of at most a few
// hundred bytes, prefixed with the position in the expression where CEL
// tells it.
func (f *Filter) Match(in *Input) (bool, error) {
	out, _, err := f.prg.Eval(&in.vars)
	if err != nil {
		return false, f.evalError(err)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("filter: result is %s, want bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// evalError turns a CEL evaluation error into Match's error: ErrCostLimit
// and ErrPayload kept for errors.Is, any other message cut to one short line,
// with the position of the failing expression where CEL names it.
func (f *Filter) evalError(err error) error {
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return fmt.Errorf("filter: %w (limit %d)", ErrCostLimit, CostLimit)
	}
	prefix := "filter: "
	var celErr *types.Err
	if errors.As(err, &celErr) && celErr.NodeID() != 0 {
		if line, col := position(f.ast, celErr.NodeID()); line > 0 {
			prefix = fmt.Sprintf("filter: %d:%d: ", line, col)
		}
	}
	var payloadErr *payloadError
	if errors.As(err, &payloadErr) {
		return fmt.Errorf("%s%w", prefix, payloadErr)
	}
	var regexErr *regexCostError
	if errors.As(err, &regexErr) {
		return fmt.Errorf("%s%w", prefix, regexErr)
	}
	return errors.New(prefix + truncate(oneLine(err.Error()), maxErrorMessage))
}

// checkPatterns refuses a call of matches whose pattern is not a constant:
// a pattern taken from the payload would let producers choose the regular
// expression, whose compilation and matching CEL charges only once done.
func checkPatterns(checked *cel.Ast) error {
	calls := ast.MatchDescendants(ast.NavigateAST(checked.NativeRep()), ast.FunctionMatcher(overloads.Matches))
	for _, call := range calls {
		args := call.AsCall().Args()
		pattern := args[len(args)-1] // s.matches(p) and matches(s, p)
		if pattern.Kind() != ast.LiteralKind {
			line, col := position(checked, pattern.ID())
			return &CompileError{Line: line, Column: col, Msg: "the pattern of matches must be a constant string"}
		}
	}
	return nil
}

// checkCost refuses an expression that CEL's estimate says will cost more
// than CostLimit: whatever the event, when its maximum is known (it depends
// on no header's or payload's size), or on every event, when its minimum is
// over the limit.
func checkCost(env *cel.Env, checked *cel.Ast) error {
	est, err := env.EstimateCost(checked, noHints{})
	if err != nil {
		return &CompileError{Msg: "estimating cost: " + oneLine(err.Error())}
	}
	switch {
	case est.Min > CostLimit:
		return &CompileError{Msg: fmt.Sprintf("estimated cost is at least %d, over the limit of %d", est.Min, CostLimit)}
	case est.Max > CostLimit && est.Max != math.MaxUint64:
		return &CompileError{Msg: fmt.Sprintf("estimated cost is up to %d, over the limit of %d", est.Max, CostLimit)}
	}
	return nil
}

// noHints is the cost estimator that knows nothing beyond CEL's own model:
// the sizes of headers and payload are unknown, so an estimate's minimum is
// what every evaluation costs at least.
type noHints struct{}

func (noHints) EstimateSize(cost.AstNode) *cost.SizeEstimate { return nil }

func (noHints) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// issuesError is the first of CEL's compile errors as a *CompileError.
func issuesError(errs []*common.Error) error {
	first := errs[0]
	msg := oneLine(first.Message)
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	ce := &CompileError{Msg: msg}
	if loc := first.Location; loc != nil && loc.Line() > 0 {
		ce.Line, ce.Column = loc.Line(), loc.Column()+1
	}
	return ce
}

// position is the line and column (from 1) where the expression with id
// starts, or 0, 0 where the AST does not tell.
func position(checked *cel.Ast, id int64) (line, col int) {
	loc := checked.NativeRep().SourceInfo().GetStartLocation(id)
	if loc.Line() <= 0 {
		return 0, 0
	}
	return loc.Line(), loc.Column() + 1
}

// oneLine replaces line breaks and other control characters with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
