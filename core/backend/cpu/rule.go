package cpu

import "github.com/pylucid/pylucid/core/backend"

// Selection rules as types. The selection kernels (minimum/maximum forward,
// Route, Select) are generic over a rule type R, one per backend.Rule, so
// the rule is a constant inside each kernel: its branches fold away and the
// predicate inlines into the loop, with no per-element test of the rule and
// no indirect call.
//
// Go has no constant type parameters, so an array's length stands in for
// one: the type of rule r is [r]struct{}. Array types of distinct lengths
// have distinct GC shapes, so each gets its own instantiation, in which
// len(R{}) is a compile-time constant.
type (
	ruleMin  [backend.RuleMin]struct{}
	ruleMax  [backend.RuleMax]struct{}
	ruleFMin [backend.RuleFMin]struct{}
	ruleFMax [backend.RuleFMax]struct{}
)

// rule is the set of rule types; adding a backend.Rule adds one type here,
// one above and one line to the kernel tables' init (selection.go, argreduce.go).
type rule interface {
	ruleMin | ruleMax | ruleFMin | ruleFMax
}

// ruleOf returns the backend.Rule of rule type R (a constant once
// instantiated). The predicates (wins here, wins32, wins64 and takesHalf in
// simd_amd64.go) spell it out as backend.Rule(len(k)) instead: a generic
// call inside generic code loads a sub-dictionary, and that load would stay
// in their callers' inner loops.
func ruleOf[R rule]() backend.Rule {
	var r R
	return backend.Rule(len(r))
}

// wins is the selection rule on one pair, the only scalar form of it in
// this package: whether a keeps its place against b under rule R (see
// backend.Rule and docs/semantics.md). For a minimum, a wins iff a <= b or a
// is NaN; for fmin iff a <= b or b is NaN; maximum and fmax compare with >=.
// On integers x != x is false and folds away. float16 and bfloat16 use it
// on values widened exactly to float32.
//
// A reduction folding a running value w over x_k keeps w iff wins[R](w, x_k).
func wins[R rule, T native](a, b T) bool {
	var k R // the rule is the length of its type: a constant (rule.go)
	r := backend.Rule(len(k))
	var better bool
	if r.Greater() {
		better = a >= b
	} else {
		better = a <= b
	}
	if r.IgnoresNaN() {
		return better || b != b
	}
	return better || a != a
}
