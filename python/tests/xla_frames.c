/* xla_frames.c: XLA's side of a call to the core's FFI handler, for test_jax.py on any
 * machine (no JAX needed): call frames built from the layout xla_ffi.h declares, an API whose
 * Stream_Get hands over a given stream (the software driver's, in the tests) and whose
 * Error_Create keeps the error's code and message. Built by the test with the C compiler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xla_ffi.h"

struct sbx_Error {
    int code;
    char message[1024];
};

static void *given_stream;

static struct sbx_Error *error_create(struct sbx_Error_Create_Args *a) {
    struct sbx_Error *e = calloc(1, sizeof *e);
    e->code = a->errc;
    snprintf(e->message, sizeof e->message, "%s", a->message);
    return e;
}

static void error_destroy(struct sbx_Error_Destroy_Args *a) { free(a->error); }

static struct sbx_Error *stream_get(struct sbx_Stream_Get_Args *a) {
    if (given_stream == NULL) {
        struct sbx_Error_Create_Args c = {SBX_STRUCT_SIZE(Error_Create_Args, errc), NULL, "no stream here (xla_frames.c)",
                                          SBX_FAILED_PRECONDITION};
        return error_create(&c);
    }
    a->stream = given_stream;
    return NULL;
}

static const struct sbx_Api api = {
    .struct_size = SBX_STRUCT_SIZE(Api, XLA_FFI_Stream_Get),
    .api_version = {SBX_STRUCT_SIZE(Api_Version, minor_version), NULL, SBX_API_MAJOR, SBX_API_MINOR},
    .XLA_FFI_Error_Create = error_create,
    .XLA_FFI_Error_Destroy = error_destroy,
    .XLA_FFI_Stream_Get = stream_get,
};

typedef struct sbx_Error *handler_fn(struct sbx_CallFrame *);

/* XLA's metadata question: the version and traits the handler states. */
int frames_metadata(handler_fn *handler, int *major, int *minor, unsigned *traits) {
    struct sbx_Metadata m = {SBX_STRUCT_SIZE(Metadata, traits), {SBX_STRUCT_SIZE(Api_Version, minor_version), NULL, -1, -1}, 99};
    struct sbx_Metadata_Extension x = {{SBX_STRUCT_SIZE(Metadata_Extension, metadata), SBX_EXTENSION_METADATA, NULL}, &m};
    struct sbx_CallFrame frame = {SBX_STRUCT_SIZE(CallFrame, attrs), &x.extension_base, &api};
    struct sbx_Error *e = handler(&frame);
    *major = m.api_version.major_version;
    *minor = m.api_version.minor_version;
    *traits = m.traits;
    return e == NULL;
}

/* One call at stage, with the attributes op and token (each int64 where its kind is 0,
 * int32 where 1, left out where 2), on stream (NULL: XLA has none, as on the CPU), with
 * nbuffers operands at the addresses in buffers (4 floats each). 0 if the handler
 * succeeded, else the error's code, its message in message. */
int frames_call(handler_fn *handler, int stage, long long op, int op_kind, long long token, int token_kind,
                void *stream, void **buffers, int nbuffers, char *message, size_t size) {
    enum { MOST = 8 };
    int64_t dims[1] = {4};
    struct sbx_Buffer operands[MOST];
    void *operand_ptrs[MOST];
    int operand_types[MOST];
    for (int i = 0; i < nbuffers && i < MOST; i++) {
        operands[i] = (struct sbx_Buffer){SBX_STRUCT_SIZE(Buffer, dims), NULL, 11 /* F32: the handler reads no dtype */, buffers[i], 1, dims};
        operand_ptrs[i] = &operands[i];
        operand_types[i] = SBX_ARG_BUFFER;
    }
    long long op64 = op, token64 = token;
    int op32 = (int)op, token32 = (int)token;
    struct sbx_Scalar op_scalar = {op_kind == 1 ? 4 /* S32 */ : SBX_S64, op_kind == 1 ? (void *)&op32 : (void *)&op64};
    struct sbx_Scalar token_scalar = {token_kind == 1 ? 4 : SBX_S64, token_kind == 1 ? (void *)&token32 : (void *)&token64};
    struct sbx_ByteSpan op_name = {"op", 2}, token_name = {"token", 5};
    struct sbx_ByteSpan *names[2];
    void *attrs[2];
    int types[2], n = 0;
    if (op_kind != 2) {
        names[n] = &op_name, attrs[n] = &op_scalar, types[n++] = SBX_ATTR_SCALAR;
    }
    if (token_kind != 2) {
        names[n] = &token_name, attrs[n] = &token_scalar, types[n++] = SBX_ATTR_SCALAR;
    }
    struct sbx_CallFrame frame = {SBX_STRUCT_SIZE(CallFrame, attrs), NULL, &api, NULL, stage};
    frame.args = (struct sbx_Args){SBX_STRUCT_SIZE(Args, args), NULL, nbuffers < MOST ? nbuffers : MOST, operand_types,
                                   operand_ptrs};
    frame.attrs = (struct sbx_Attrs){SBX_STRUCT_SIZE(Attrs, attrs), NULL, n, types, names, attrs};
    given_stream = stream;
    struct sbx_Error *e = handler(&frame);
    if (e == NULL)
        return 0;
    snprintf(message, size, "%s", e->message);
    int code = e->code;
    free(e);
    return code;
}
