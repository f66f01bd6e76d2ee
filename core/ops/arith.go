package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// AddBackward: y = a + b; (g, g).
var addOp = define(&spec{
	OpSchema: binarySchema("add", "add", "a + b with broadcasting (bool + bool is logical or).",
		">>> ops.add([1, 2], 0.5)\ntensor([1.5, 2.5])"),
	node: "AddBackward", kernel: backend.Add,
	vjp: binaryVJP(func(c *Context, g, _, _ *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) { return g, g, nil }),
})

// SubBackward: y = a - b; (g, -g).
var subOp = define(&spec{
	OpSchema: binarySchema("sub", "subtract", "a - b with broadcasting.",
		">>> ops.sub([[1.0], [2.0]], [1.0, 2.0])\ntensor([[ 0., -1.],\n        [ 1.,  0.]])"),
	node: "SubBackward", kernel: backend.Sub,
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if d == dtype.Bool {
			return d, errs.Typef("sub: subtraction of two bool tensors is not supported; use logical_xor")
		}
		return d, nil
	},
	vjp: binaryVJP(func(c *Context, g, _, _ *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
		ng, err := Neg(c, g)
		return g, ng, err
	}),
})

// binarySchema is the schema of a broadcasting binary op, NumPy's ufunc
// numpy: version 1, Promote, deterministic.
func binarySchema(name, numpy, doc, example string) OpSchema {
	return OpSchema{Name: name, Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Elementwise, Arity: 2, Outputs: 1, Signature: SigBinary, NumPy: []string{numpy}, Doc: doc, Example: example}
}

// MulBackward: y = a * b; (g·b, g·a).
var mulOp = define(&spec{
	OpSchema: binarySchema("mul", "multiply", "a * b with broadcasting (bool * bool is logical and).",
		">>> ops.mul([1.0, 2.0], [3.0, -1.0])\ntensor([ 3., -2.])"),
	node: "MulBackward", kernel: backend.Mul, saves: savesInputs,
})

// The vjps and jvps call the ops themselves, so they are attached in init
// (a package-level initialiser may not refer to itself).
func init() {
	mulOp.vjp = binaryVJP(mulGrad)
	divOp.vjp = binaryVJP(divGrad)
	addOp.jvp = linearJVP(func(c *Context, x, y *tensor.Tensor) (*tensor.Tensor, error) { return Add(c, x, y) }, false)
	subOp.jvp = linearJVP(func(c *Context, x, y *tensor.Tensor) (*tensor.Tensor, error) { return Sub(c, x, y) }, true)
	mulOp.jvp = mulJVP
	divOp.jvp = divJVP
}

func mulGrad(c *Context, g, a, b *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	ga, err := Mul(c, g, b)
	if err != nil {
		return nil, nil, err
	}
	gb, err := Mul(c, g, a)
	return ga, gb, err
}

// DivBackward: y = a / b (true division: integers give the default float);
// (g / b, -g·a / b²).
var divOp = define(&spec{
	OpSchema: binarySchema("div", "true_divide", "a / b (true division: integers divide as floats) with broadcasting.",
		">>> ops.div([1, 3], 2)\ntensor([0.5, 1.5])"),
	node: "DivBackward", kernel: backend.Div, saves: savesInputs,
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if !d.IsFloat() {
			return dtype.Default, nil
		}
		return d, nil
	},
})

func divGrad(c *Context, g, a, b *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	ga, err := Div(c, g, b)
	if err != nil {
		return nil, nil, err
	}
	bb, err := Mul(c, b, b)
	if err != nil {
		return nil, nil, err
	}
	q, err := Div(c, a, bb)
	if err != nil {
		return nil, nil, err
	}
	gq, err := Mul(c, g, q)
	if err != nil {
		return nil, nil, err
	}
	gb, err := Neg(c, gq)
	return ga, gb, err
}

// Add returns a + b with broadcasting (bool + bool is logical or).
func Add(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, addOp, a, b)
}

// Sub returns a - b with broadcasting (not defined for two bools).
func Sub(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, subOp, a, b)
}

// Mul returns a * b with broadcasting (bool * bool is logical and).
func Mul(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, mulOp, a, b)
}

// Div returns a / b with broadcasting; integer inputs divide as floats.
func Div(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyElementwise(c, divOp, a, b)
}

// NegBackward: y = -a; -g.
var negOp = define(&spec{
	OpSchema: OpSchema{Name: "neg", Version: 1, AmpPolicy: amp.Promote, Deterministic: true,
		Kind: Elementwise, Arity: 1, Outputs: 1, Signature: SigUnary, NumPy: []string{"negative"},
		Doc: "-a.", Example: ">>> ops.neg([1.0, -0.0])\ntensor([-1.,  0.])"},
	node:  "NegBackward",
	unary: unaryKernel(backend.Neg),
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if d == dtype.Bool {
			return d, errs.Typef("neg: negation of a bool tensor is not supported; use logical_not")
		}
		return d, nil
	},
})

func init() {
	negOp.vjp = unaryVJP(func(c *Context, g *tensor.Tensor) (*tensor.Tensor, error) { return Neg(c, g) })
	negOp.jvp = unaryJVP(func(c *Context, t *tensor.Tensor, _ *jvpCall) (*tensor.Tensor, error) { return Neg(c, t) })
}

// Neg returns -a. Bool tensors cannot be negated.
func Neg(c *Context, a *tensor.Tensor) (*tensor.Tensor, error) {
	return applyUnary(c, negOp, a, dtype.Invalid)
}

// mulJVP: d(a·b) = da·b + a·db.
func mulJVP(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var terms []*tensor.Tensor
	if ts[0] != nil {
		t, err := Mul(c, ts[0], k.in[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if ts[1] != nil {
		t, err := Mul(c, k.in[0], ts[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	return sumTerms(c, terms)
}

// divJVP: d(a/b) = da/b - (a/b)·db/b.
func divJVP(c *Context, k *jvpCall, ts []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var terms []*tensor.Tensor
	if ts[0] != nil {
		t, err := Div(c, ts[0], k.in[1])
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if ts[1] != nil {
		q, err := Div(c, ts[1], k.in[1])
		if err != nil {
			return nil, err
		}
		if q, err = Mul(c, k.out[0], q); err != nil {
			return nil, err
		}
		if q, err = Neg(c, q); err != nil {
			return nil, err
		}
		terms = append(terms, q)
	}
	return sumTerms(c, terms)
}
