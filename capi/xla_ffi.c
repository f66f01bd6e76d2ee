// pylucid's XLA FFI handler: one C function, written against XLA's stable
// FFI C ABI (xla_ffi_api.h, XLA's own header, vendored: neither a compiler
// nor jaxlib headers are needed where the wheel is installed). XLA hands it
// the custom call's operand and result buffers; the op runs on them through
// lucid_op_lent: pylucid reads XLA's operands and writes into XLA's result
// buffers, no copy either way. docs/interop.md ("JAX") lists the attributes
// python/pylucid/jax.py gives each call.
//
// Nothing here aborts: every failure, from a call frame of an FFI version
// this file does not know to a pylucid error, returns an XLA_FFI_Error with
// a message, which JAX raises as a Python exception.
#include <stdio.h>
#include <string.h>

#include "lucid.h"
#include "xla_ffi_api.h"

// The most operands and results of a family op (lucid_op_lent's bounds).
enum { FFI_MAX_IN = 4, FFI_MAX_OUT = 4, FFI_MAX_ATTRS = LUCID_MAX_DIMS + 2 };

static XLA_FFI_Error *ffi_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *msg) {
    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.message = msg;
    args.errc = code;
    return api->XLA_FFI_Error_Create(&args);
}

static int32_t lucid_dtype_of(XLA_FFI_DataType t) {
    switch (t) {
    case XLA_FFI_DataType_PRED: return LUCID_BOOL;
    case XLA_FFI_DataType_U8: return LUCID_UINT8;
    case XLA_FFI_DataType_S8: return LUCID_INT8;
    case XLA_FFI_DataType_S16: return LUCID_INT16;
    case XLA_FFI_DataType_S32: return LUCID_INT32;
    case XLA_FFI_DataType_S64: return LUCID_INT64;
    case XLA_FFI_DataType_F16: return LUCID_FLOAT16;
    case XLA_FFI_DataType_BF16: return LUCID_BFLOAT16;
    case XLA_FFI_DataType_F32: return LUCID_FLOAT32;
    case XLA_FFI_DataType_F64: return LUCID_FLOAT64;
    default: return -1;
    }
}

// A buffer as a lucid_out entry of lent memory, row-major (XLA's default
// layout for custom calls, which jax.ffi.ffi_call asks for).
static int lend(const XLA_FFI_Buffer *b, lucid_out *e, int64_t *strides, char *msg, size_t n, const char *what,
                int64_t i) {
    if (b->struct_size < XLA_FFI_Buffer_STRUCT_SIZE) {
        snprintf(msg, n, "pylucid: XLA passed %s %lld as a buffer struct of %zu bytes (needs %d): "
                 "this jaxlib's FFI is not supported", what, (long long)i, b->struct_size,
                 (int)XLA_FFI_Buffer_STRUCT_SIZE);
        return -1;
    }
    int32_t dt = lucid_dtype_of(b->dtype);
    if (dt < 0) {
        snprintf(msg, n, "pylucid: %s %lld has XLA dtype %d, which pylucid does not support", what, (long long)i,
                 (int)b->dtype);
        return -1;
    }
    if (b->rank < 0 || b->rank > LUCID_MAX_DIMS) {
        snprintf(msg, n, "pylucid: %s %lld has rank %lld (at most %d)", what, (long long)i, (long long)b->rank,
                 LUCID_MAX_DIMS);
        return -1;
    }
    int64_t s = 1;
    for (int64_t d = b->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= b->dims[d];
    }
    e->handle = 0;
    e->data = b->data;
    e->dtype = dt;
    e->ndim = (int32_t)b->rank;
    e->shape = b->dims;
    e->strides = strides;
    return 0;
}

static int name_is(const XLA_FFI_ByteSpan *name, const char *want) {
    size_t n = strlen(want);
    return name->len == n && memcmp(name->ptr, want, n) == 0;
}

static int scalar_i64(XLA_FFI_AttrType type, void *attr, int64_t *v) {
    if (type != XLA_FFI_AttrType_SCALAR) return -1;
    XLA_FFI_Scalar *s = (XLA_FFI_Scalar *)attr;
    switch (s->dtype) {
    case XLA_FFI_DataType_S64: *v = *(int64_t *)s->value; return 0;
    case XLA_FFI_DataType_S32: *v = *(int32_t *)s->value; return 0;
    default: return -1;
    }
}

// The handler's attributes, decoded.
typedef struct {
    const char *op;
    size_t op_len;
    int64_t version, winners, present, n_attrs;
    int64_t attrs[FFI_MAX_ATTRS];
} call_attrs;

static int decode_attrs(const XLA_FFI_Attrs *a, call_attrs *c, char *msg, size_t n) {
    memset(c, 0, sizeof *c);
    c->version = -1;
    c->present = -1;
    for (int64_t i = 0; i < a->size; i++) {
        const XLA_FFI_ByteSpan *name = a->names[i];
        int bad = 0;
        if (name_is(name, "op")) {
            if (a->types[i] != XLA_FFI_AttrType_STRING) {
                bad = 1;
            } else {
                const XLA_FFI_ByteSpan *s = (const XLA_FFI_ByteSpan *)a->attrs[i];
                c->op = s->ptr;
                c->op_len = s->len;
            }
        } else if (name_is(name, "version")) {
            bad = scalar_i64(a->types[i], a->attrs[i], &c->version);
        } else if (name_is(name, "winners")) {
            bad = scalar_i64(a->types[i], a->attrs[i], &c->winners);
        } else if (name_is(name, "present")) {
            bad = scalar_i64(a->types[i], a->attrs[i], &c->present);
        } else if (name_is(name, "attrs")) {
            const XLA_FFI_Array *arr = (const XLA_FFI_Array *)a->attrs[i];
            if (a->types[i] != XLA_FFI_AttrType_ARRAY || arr->dtype != XLA_FFI_DataType_S64 ||
                arr->size > FFI_MAX_ATTRS) {
                bad = 1;
            } else {
                c->n_attrs = (int64_t)arr->size;
                memcpy(c->attrs, arr->data, arr->size * sizeof(int64_t));
            }
        } else {
            snprintf(msg, n, "pylucid: unknown custom-call attribute '%.*s'", (int)name->len, name->ptr);
            return -1;
        }
        if (bad) {
            snprintf(msg, n, "pylucid: custom-call attribute '%.*s' has the wrong type", (int)name->len, name->ptr);
            return -1;
        }
    }
    if (c->op == NULL || c->version < 0) {
        snprintf(msg, n, "pylucid: a custom call needs the attributes 'op' and 'version'");
        return -1;
    }
    return 0;
}

static XLA_FFI_Error *metadata(XLA_FFI_CallFrame *frame) {
    XLA_FFI_Metadata_Extension *ext = (XLA_FFI_Metadata_Extension *)frame->extension_start;
    if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
        ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE) {
        return ffi_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                         "pylucid: this jaxlib's FFI metadata structs are older than pylucid's handler supports");
    }
    XLA_FFI_Api_Version v = {XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
    ext->metadata->api_version = v;
    ext->metadata->traits = 0;
    if (ext->metadata->struct_size >= sizeof(XLA_FFI_Metadata)) {
        ext->metadata->state_type_id.type_id = 0; // stateless
    }
    return NULL;
}

static XLA_FFI_Error *handle(XLA_FFI_CallFrame *frame) {
    char msg[1024];
    const XLA_FFI_Api *api = frame->api;
    if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) {
        snprintf(msg, sizeof msg, "pylucid: XLA's FFI call frame has %zu bytes, pylucid's handler needs %d: "
                 "this jaxlib is older than pylucid supports", frame->struct_size, (int)XLA_FFI_CallFrame_STRUCT_SIZE);
        return ffi_error(api, XLA_FFI_Error_Code_UNIMPLEMENTED, msg);
    }
    if (api->api_version.major_version != XLA_FFI_API_MAJOR) {
        snprintf(msg, sizeof msg, "pylucid: this jaxlib's XLA FFI API is version %d.%d; pylucid's handler is "
                 "built for %d.x", api->api_version.major_version, api->api_version.minor_version,
                 XLA_FFI_API_MAJOR);
        return ffi_error(api, XLA_FFI_Error_Code_UNIMPLEMENTED, msg);
    }
    if (frame->extension_start != NULL && frame->extension_start->type == XLA_FFI_Extension_Metadata) {
        return metadata(frame);
    }
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) {
        return NULL; // no state to instantiate, prepare or initialize
    }
    call_attrs ca;
    if (decode_attrs(&frame->attrs, &ca, msg, sizeof msg) != 0) {
        return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }
    int32_t id = -1, version = -1, arity = 0;
    if (lucid_op_lookup(ca.op, ca.op_len, &id, &version, &arity) != 0) {
        lucid_errmsg(msg, sizeof msg);
        return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }
    if (version != ca.version) {
        snprintf(msg, sizeof msg, "pylucid: the custom call asks for %.*s version %lld; this pylucid has version %d "
                 "(export the function again with this pylucid)", (int)ca.op_len, ca.op, (long long)ca.version,
                 (int)version);
        return ffi_error(api, XLA_FFI_Error_Code_FAILED_PRECONDITION, msg);
    }
    // The operands: a slot whose bit is clear in present is absent (clamp's
    // missing bound); the buffers fill the present slots in order.
    int64_t nargs = frame->args.size, nrets = frame->rets.size;
    int n_in = 0;
    lucid_out in[FFI_MAX_IN], out[FFI_MAX_OUT];
    int64_t in_strides[FFI_MAX_IN][LUCID_MAX_DIMS], out_strides[FFI_MAX_OUT][LUCID_MAX_DIMS];
    int64_t present = ca.present < 0 ? (((int64_t)1 << nargs) - 1) : ca.present;
    int64_t next = 0;
    if (arity < 1 || arity > FFI_MAX_IN) {
        return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "pylucid: this op cannot be a custom call");
    }
    for (int slot = 0; slot < arity; slot++, n_in++) {
        if (!((present >> slot) & 1)) {
            memset(&in[slot], 0, sizeof in[slot]);
            in[slot].dtype = -1;
            continue;
        }
        if (next >= nargs || frame->args.types[next] != XLA_FFI_ArgType_BUFFER) {
            return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "pylucid: the custom call's operands do "
                             "not match its 'present' attribute");
        }
        if (lend((const XLA_FFI_Buffer *)frame->args.args[next], &in[slot], in_strides[slot], msg, sizeof msg,
                 "operand", next) != 0) {
            return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
        }
        next++;
    }
    if (next != nargs || nrets < 1 || nrets > FFI_MAX_OUT) {
        snprintf(msg, sizeof msg, "pylucid: %.*s got %lld operands and %lld results, which its attributes do not "
                 "describe", (int)ca.op_len, ca.op, (long long)nargs, (long long)nrets);
        return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }
    for (int64_t i = 0; i < nrets; i++) {
        if (frame->rets.types[i] != XLA_FFI_RetType_BUFFER ||
            lend((const XLA_FFI_Buffer *)frame->rets.rets[i], &out[i], out_strides[i], msg, sizeof msg, "result",
                 i) != 0) {
            return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
        }
    }
    if (lucid_op_lent(id, (int32_t)ca.winners, in, n_in, ca.attrs, (int32_t)ca.n_attrs, out, (int32_t)nrets) != 0) {
        lucid_errmsg(msg, sizeof msg);
        return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }
    return NULL;
}

void *lucid_xla_ffi_handler(void) { return (void *)&handle; }
