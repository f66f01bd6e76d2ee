package ops

import (
	"github.com/pylucid/pylucid/core/autograd"
	"github.com/pylucid/pylucid/core/dtype"
	"github.com/pylucid/pylucid/core/tensor"
)

// engineMath gives the autograd engine this package's arithmetic.
type engineMath struct{ c *Context }

func (m engineMath) Add(a, b *tensor.Tensor, record bool) (*tensor.Tensor, error) {
	return Add(m.c.WithGrad(record), a, b)
}

func (m engineMath) Adapt(g *tensor.Tensor, shape []int, dt dtype.Dtype, record bool) (*tensor.Tensor, error) {
	return adapt(m.c.WithGrad(record), g, shape, dt)
}

func (m engineMath) Clone(t *tensor.Tensor, record bool) (*tensor.Tensor, error) {
	return Copy(m.c.WithGrad(record), t)
}

func (m engineMath) OnesLike(t *tensor.Tensor) (*tensor.Tensor, error) {
	return tensor.Full(t.Dtype(), t.Shape(), 1)
}

// EngineMath returns the autograd.Math of context c (nil: Default), for hosts
// that drive autograd.Start themselves.
func EngineMath(c *Context) autograd.Math { return engineMath{ctxOr(c)} }

// Backward accumulates into every leaf's .grad the gradient of roots
// weighted by grads (nil: ones, for one-element roots). Saved tensors are
// freed unless retainGraph; createGraph records the backward pass itself so
// the gradients can be differentiated again.
func Backward(c *Context, roots, grads []*tensor.Tensor, retainGraph, createGraph bool) error {
	_, err := autograd.Backward(roots, grads, autograd.Options{
		RetainGraph: retainGraph || createGraph, CreateGraph: createGraph, Math: EngineMath(c),
	}, nil)
	return err
}

// Grad returns the gradients of outputs with respect to inputs, without
// touching any .grad. retainGraph defaults to createGraph (pass nil);
// with allowUnused an input the outputs do not depend on gets nil.
func Grad(c *Context, outputs, inputs, gradOutputs []*tensor.Tensor, retainGraph *bool, createGraph, allowUnused bool) ([]*tensor.Tensor, error) {
	retain := createGraph
	if retainGraph != nil {
		retain = *retainGraph
	}
	if inputs == nil {
		inputs = []*tensor.Tensor{}
	}
	return autograd.Backward(outputs, gradOutputs, autograd.Options{
		RetainGraph: retain, CreateGraph: createGraph, Inputs: inputs, AllowUnused: allowUnused, Math: EngineMath(c),
	}, nil)
}
