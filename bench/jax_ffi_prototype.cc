// A measurement prototype, not part of the package: pylucid's minimum as an
// XLA FFI handler (forward only, float32, 1-d), so that bench/jax_ffi_prototype.py
// can compare its cost with pylucid.jax's jax.pure_callback path. XLA hands the
// handler its operand and result buffers: pylucid borrows the operands and
// writes the result straight into XLA's buffer (lucid_op_n with an out=), no
// copy either way. The module docstring of python/pylucid/jax.py quotes the
// numbers.
#include <cstdint>

#include "xla/ffi/api/ffi.h"
extern "C" {
#include "lucid.h"
}

namespace ffi = xla::ffi;

static int32_t g_minimum_id = -1;

extern "C" void set_minimum_id(int32_t id) { g_minimum_id = id; }

static ffi::Error MinimumImpl(ffi::Buffer<ffi::F32> a, ffi::Buffer<ffi::F32> b, ffi::ResultBuffer<ffi::F32> y) {
  int64_t n = static_cast<int64_t>(a.element_count());
  int64_t shape[1] = {n}, strides[1] = {1};
  lucid_tensor_info ia, ib;
  if (lucid_tensor_borrow(a.typed_data(), n * 4, LUCID_FLOAT32, 1, shape, strides, 0, 1, 0, &ia))
    return ffi::Error(ffi::ErrorCode::kInternal, "lucid_tensor_borrow failed");
  if (lucid_tensor_borrow(b.typed_data(), n * 4, LUCID_FLOAT32, 1, shape, strides, 0, 1, 0, &ib)) {
    lucid_release(ia.handle);
    return ffi::Error(ffi::ErrorCode::kInternal, "lucid_tensor_borrow failed");
  }
  int64_t ins[2] = {ia.handle, ib.handle};
  lucid_out out = {0, y->typed_data(), LUCID_FLOAT32, 1, shape, strides};
  int64_t meta[LUCID_META_LEN];
  int rc = lucid_op_n(g_minimum_id, ins, 2, nullptr, 0, &out, 1, 0, meta);
  lucid_release(ia.handle);
  lucid_release(ib.handle);
  if (rc) return ffi::Error(ffi::ErrorCode::kInternal, "lucid_op_n failed");
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(PylucidMinimum, MinimumImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
