// Package ops holds pylucid's operators: the OpSchema registry, the apply
// trampoline every differentiable op goes through, and the ops themselves.
//
// # Calling an op
//
// Every op takes a *Context first (nil means Default: the "cpu" backend,
// gradients recorded, autocast off) and returns a new tensor and an error:
//
//	y, err := ops.Minimum(nil, a, b)
//
// Inputs may have any dtype, strides and broadcastable shapes. The results of
// the arithmetic ops and reductions are fresh tensors that never alias an
// input (Cast to the input's own dtype returns the input, and Reshape and
// Expand may return views of it).
//
// The ops: Add, Sub, Mul, Div, Minimum, Maximum (broadcasting binary ops);
// Neg; Sum and Mean (reductions over dims, nil for all); Cast, Expand,
// Reshape and SumToShape (dtype and shape plumbing, all differentiable).
//
// # Dtypes and promotion
//
// The result dtype of a binary op follows docs/dtypes.md (package dtype): bool <
// integers < floats; within a category the wider type wins; float16 with
// bfloat16 gives float32; an integer with a float gives that float. A tensor
// marked as a wrapped number (tensor.WrappedScalar, a host-language scalar)
// is weak: it only lifts the result to a higher category, so
// Minimum(float16 tensor, wrapped 2.0) stays float16 and Minimum(int32
// tensor, wrapped 2.5) gives dtype.Default (float32). Div of integers gives
// dtype.Default. Sum of integers and bools gives int64; float16 and bfloat16
// reductions accumulate in float32.
//
// # Autocast
//
// Context.Autocast (see package amp) switches on mixed precision for one
// call. Each op's schema carries an amp.Policy that decides how its floating
// inputs are cast before promotion: Promote (every op in this package) casts
// them to the widest floating dtype among them, which never produces float64
// unless an input is float64; LowerPrecision casts them (float64 excepted)
// to the autocast dtype; FP32 to float32. With autocast off the policies have
// no effect. Gradients always come back in each input's own dtype.
//
//	st, _ := amp.NewState(dtype.Float16)
//	y, err := ops.Minimum(&ops.Context{GradEnabled: true, Autocast: st}, a16, b32) // float32
//
// # Op specs and the trampolines
//
// Every op is one record, a spec (spec.go), defined in the op's own file
// (minimum.go, arith.go, reduce.go, shape.go): its schema (name, version,
// AMP policy, determinism, kind, arity, attributes), its autograd node's
// name, its dtype rule, its backend kernel, what it saves, its vjp (the
// gradient formula) and a jvp slot for forward mode. Apply-time work common
// to all ops happens in two trampolines. The elementwise one
// (elementwise.go) does type promotion (wrapped numbers are weak), autocast
// by the op's AmpPolicy, the dtype rule, casting inputs to the result dtype,
// NumPy broadcasting, backend dispatch and, when the context records
// gradients and an input requires grad, the node. The reduction one
// (reduce.go) normalises the dims and runs the op's reduce kernel. On
// backward the node runs the op's vjp, then reduces each gradient to its
// input's shape (SumToShape) and casts it to its input's dtype: the one
// place where un-broadcasting happens. docs/adding-an-op.md lists the
// places a new op touches.
//
// # Minimum and maximum
//
// Minimum(a, b) selects a at i iff a_i <= b_i or a_i is NaN (Maximum: >=),
// taking the winner's bits. The gradient goes to the winner: ties and NaN in
// a go to a. The masks come from the saved inputs and partition every index,
// so grad_a + grad_b == grad_out everywhere. PyTorch splits ties 50/50 and
// gives NaN positions the full gradient on both sides; JAX splits ties and
// gives NaN positions 0. Higher-order gradients (create_graph) work: the
// masks are constants of every pass.
//
// # Schemas
//
// Every spec is registered at init; the registry assigns op ids (positions
// in name order). Lookup and Schemas read it, Call runs an op by id with
// attributes (the C ABI's lucid_op), and the C ABI exports the schemas to
// Python as JSON (pylucid.ops.schemas()).
//
// # Autograd
//
// Tensors that require grad (tensor.Tensor.SetRequiresGrad) record nodes as
// ops run. Backward accumulates gradients into the leaves' Grad; Grad returns
// the gradients of outputs with respect to chosen inputs without touching any
// Grad. Hosts that drive the engine step by step (the C ABI, for nodes
// defined in Python) call autograd.Start with EngineMath. Gradient reductions
// are deterministic: the same inputs give the same bits for any thread count.
//
// # Interrupting long ops
//
// A reduction's time follows from its input's element count, which a
// broadcast view makes as large as it likes in no memory; Context.Done lets a
// caller stop one part way (errors.Is(err, ErrInterrupted) then holds):
//
//	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
//	defer cancel()
//	s, err := ops.Sum(&ops.Context{Done: ctx.Done()}, huge, nil, false)
//
// # Errors
//
// Errors are classified with package errs: shapes that do not broadcast,
// bad dims and sizes are Value errors (naming the shapes); unsupported dtypes
// are Type errors; a second backward through a freed graph and other
// failures are Runtime errors. Ops never panic on bad input.
package ops
