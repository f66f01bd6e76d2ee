package ops

import (
	"github.com/pylucid/pylucid/core/amp"
	"github.com/pylucid/pylucid/core/backend"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/errs"
	"github.com/pylucid/pylucid/core/tensor"
)

// AddBackward: y = a + b; (g, g).
var addSpec = &binarySpec{
	schema: Register(OpSchema{Name: "add", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "AddBackward", kernel: backend.Add,
	grad: func(c *Context, g, _, _ *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) { return g, g, nil },
}

// SubBackward: y = a - b; (g, -g).
var subSpec = &binarySpec{
	schema: Register(OpSchema{Name: "sub", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "SubBackward", kernel: backend.Sub,
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if d == dtype.Bool {
			return d, errs.Typef("sub: subtraction of two bool tensors is not supported; use logical_xor")
		}
		return d, nil
	},
	grad: func(c *Context, g, _, _ *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
		ng, err := Neg(c, g)
		return g, ng, err
	},
}

// MulBackward: y = a * b; (g·b, g·a).
var mulSpec = &binarySpec{
	schema: Register(OpSchema{Name: "mul", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "MulBackward", kernel: backend.Mul, saves: true,
}

// The formulas of mul and div call Mul and Div, so they are attached in init
// (a package-level initialiser may not refer to itself).
func init() {
	mulSpec.grad = mulGrad
	divSpec.grad = divGrad
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
var divSpec = &binarySpec{
	schema: Register(OpSchema{Name: "div", Version: 1, AmpPolicy: amp.Promote, Deterministic: true}),
	node:   "DivBackward", kernel: backend.Div, saves: true,
	dtype: func(d dtype.Dtype) (dtype.Dtype, error) {
		if !d.IsFloat() {
			return dtype.Default, nil
		}
		return d, nil
	},
}

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
	return applyBinary(c, addSpec, a, b)
}

// Sub returns a - b with broadcasting (not defined for two bools).
func Sub(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyBinary(c, subSpec, a, b)
}

// Mul returns a * b with broadcasting (bool * bool is logical and).
func Mul(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyBinary(c, mulSpec, a, b)
}

// Div returns a / b with broadcasting; integer inputs divide as floats.
func Div(c *Context, a, b *tensor.Tensor) (*tensor.Tensor, error) {
	return applyBinary(c, divSpec, a, b)
}

var negSchema = Register(OpSchema{Name: "neg", Version: 1, AmpPolicy: amp.Promote, Deterministic: true})

// Neg returns -a (NegBackward: -g). Bool tensors cannot be negated.
func Neg(c *Context, a *tensor.Tensor) (*tensor.Tensor, error) {
	c = ctxOr(c)
	if err := checkInputs(negSchema.Name, a); err != nil {
		return nil, err
	}
	if a.Dtype() == dtype.Bool {
		return nil, errs.Typef("neg: negation of a bool tensor is not supported; use logical_not")
	}
	out, err := tensor.Empty(a.Dtype(), a.ShapeRef())
	if err != nil {
		return nil, err
	}
	if err := c.Backend.Unary(backend.Neg, out, a); err != nil {
		return nil, err
	}
	record(c, "NegBackward", []*tensor.Tensor{a}, []*tensor.Tensor{out}, nil,
		func(c *Context, _ *node, grads, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if grads[0] == nil {
				return []*tensor.Tensor{nil}, nil
			}
			g, err := Neg(c, grads[0])
			return []*tensor.Tensor{g}, err
		})
	return out, nil
}
