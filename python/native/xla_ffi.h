/*
 * xla_ffi.h: what the core reads and writes of XLA's FFI, the C ABI JAX documents for a
 * foreign handler (xla/ffi/api/c_api.h, shipped in jaxlib/include), declared once, here.
 *
 * Each struct is a list of its fields in order, F(struct, type, field) (F##_UNREAD for a
 * slot the core never reads, whose name XLA has changed); the struct is defined from it,
 * and with SBX_HOLD (the header of jaxlib included first) every field's offset and size,
 * and every constant, is held to XLA's own at compile time:
 * test_jax.py::test_what_the_handler_reads_of_xla_is_held_to_jaxlibs_header compiles this
 * file so against the jaxlib installed, and fails where one has moved. A struct is declared
 * up to the last field the core touches (XLA's may go on); one held by value in another is
 * declared whole. Nothing else of XLA's is read: no C++ and no XLA header at build time.
 *
 * SBX_API_MAJOR/MINOR is the version the handler states when XLA asks (the metadata
 * extension, at registration): XLA refuses a handler of another major version, or of a
 * newer minor than its own, with a clear error, so a JAX this was not written for fails
 * at streambridge.jax's import (a RuntimeError saying so), never in a call.
 */
#ifndef STREAMBRIDGE_XLA_FFI_H
#define STREAMBRIDGE_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

#define SBX_API_MAJOR 0
#define SBX_API_MINOR 1

/* The constants the core uses: (ours, XLA's name, value). */
#define SBX_CONSTANTS(C)                                                                   \
    C(SBX_EXTENSION_METADATA, XLA_FFI_Extension_Metadata, 1)                               \
    C(SBX_STAGE_INSTANTIATE, XLA_FFI_ExecutionStage_INSTANTIATE, 0)                        \
    C(SBX_STAGE_EXECUTE, XLA_FFI_ExecutionStage_EXECUTE, 3)                                \
    C(SBX_ATTR_SCALAR, XLA_FFI_AttrType_SCALAR, 3)                                         \
    C(SBX_ARG_BUFFER, XLA_FFI_ArgType_BUFFER, 1)                                           \
    C(SBX_S64, XLA_FFI_DataType_S64, 5)                                                    \
    C(SBX_INVALID_ARGUMENT, XLA_FFI_Error_Code_INVALID_ARGUMENT, 3)                        \
    C(SBX_FAILED_PRECONDITION, XLA_FFI_Error_Code_FAILED_PRECONDITION, 9)                  \
    C(SBX_UNIMPLEMENTED, XLA_FFI_Error_Code_UNIMPLEMENTED, 12)                             \
    C(SBX_INTERNAL, XLA_FFI_Error_Code_INTERNAL, 13)                                       \
    C(SBX_COMMAND_BUFFER_COMPATIBLE, XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE, 1)

struct sbx_Error; /* XLA's, opaque */
struct sbx_ExecutionContext;
struct sbx_Api;
struct sbx_Error_Create_Args;
struct sbx_Error_Destroy_Args;
struct sbx_Stream_Get_Args;
typedef struct sbx_Error *sbx_Error_Create(struct sbx_Error_Create_Args *);
typedef void sbx_Error_Destroy(struct sbx_Error_Destroy_Args *);
typedef struct sbx_Error *sbx_Stream_Get(struct sbx_Stream_Get_Args *);

/* The structs, in an order where each names only those before it by value. */
#define SBX_STRUCTS(S)                                                                     \
    S(Extension_Base, SBX_EXTENSION_BASE)                                                  \
    S(Api_Version, SBX_API_VERSION)                                                        \
    S(Metadata, SBX_METADATA)                                                              \
    S(Metadata_Extension, SBX_METADATA_EXTENSION)                                          \
    S(Error_Create_Args, SBX_ERROR_CREATE_ARGS)                                            \
    S(Error_Destroy_Args, SBX_ERROR_DESTROY_ARGS)                                          \
    S(Stream_Get_Args, SBX_STREAM_GET_ARGS)                                                \
    S(ByteSpan, SBX_BYTESPAN)                                                              \
    S(Scalar, SBX_SCALAR)                                                                  \
    S(Buffer, SBX_BUFFER)                                                                  \
    S(Args, SBX_ARGS)                                                                      \
    S(Rets, SBX_RETS)                                                                      \
    S(Attrs, SBX_ATTRS)                                                                    \
    S(CallFrame, SBX_CALLFRAME)                                                            \
    S(Api, SBX_API)

#define SBX_EXTENSION_BASE(F, s)                                                           \
    F(s, size_t, struct_size) F(s, int, type) F(s, struct sbx_Extension_Base *, next)
#define SBX_API_VERSION(F, s)                                                              \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, int, major_version) F(s, int, minor_version)
#define SBX_METADATA(F, s)                                                                 \
    F(s, size_t, struct_size) F(s, struct sbx_Api_Version, api_version) F(s, uint32_t, traits)
#define SBX_METADATA_EXTENSION(F, s)                                                       \
    F(s, struct sbx_Extension_Base, extension_base) F(s, struct sbx_Metadata *, metadata)
#define SBX_ERROR_CREATE_ARGS(F, s)                                                        \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, const char *, message) F(s, int, errc)
#define SBX_ERROR_DESTROY_ARGS(F, s)                                                       \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, struct sbx_Error *, error)
#define SBX_STREAM_GET_ARGS(F, s)                                                          \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, struct sbx_ExecutionContext *, ctx) F(s, void *, stream)
#define SBX_BYTESPAN(F, s) F(s, const char *, ptr) F(s, size_t, len)
#define SBX_SCALAR(F, s) F(s, int, dtype) F(s, void *, value)
#define SBX_BUFFER(F, s)                                                                   \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, int, dtype) F(s, void *, data) F(s, int64_t, rank) F(s, int64_t *, dims)
#define SBX_ARGS(F, s)                                                                     \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, int64_t, size) F(s, int *, types) F(s, void **, args)
#define SBX_RETS(F, s)                                                                     \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, int64_t, size) F(s, int *, types) F(s, void **, rets)
#define SBX_ATTRS(F, s)                                                                    \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, int64_t, size) F(s, int *, types) F(s, struct sbx_ByteSpan **, names) F(s, void **, attrs)
#define SBX_CALLFRAME(F, s)                                                                \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, const struct sbx_Api *, api) F(s, struct sbx_ExecutionContext *, ctx)             \
    F(s, int, stage) F(s, struct sbx_Args, args) F(s, struct sbx_Rets, rets)               \
    F(s, struct sbx_Attrs, attrs)
#define SBX_API(F, s)                                                                      \
    F(s, size_t, struct_size) F(s, struct sbx_Extension_Base *, extension_start)           \
    F(s, struct sbx_Api_Version, api_version) F(s, const void *, internal_api)             \
    F(s, sbx_Error_Create *, XLA_FFI_Error_Create)                                         \
    F##_UNREAD(s, const void *, error_get_message) /* Error_GetDetails from API 0.4 */       \
    F(s, sbx_Error_Destroy *, XLA_FFI_Error_Destroy)                                       \
    F##_UNREAD(s, const void *, handler_register)                                          \
    F(s, sbx_Stream_Get *, XLA_FFI_Stream_Get)

#define SBX_MEMBER(s, type, field) type field;
#define SBX_MEMBER_UNREAD SBX_MEMBER /* a slot the core never reads: its place kept, its name not XLA's */
#define SBX_DEFINE(s, FIELDS) struct sbx_##s { FIELDS(SBX_MEMBER, s) };
SBX_STRUCTS(SBX_DEFINE)
#undef SBX_DEFINE

#define SBX_ENUMERATOR(ours, theirs, value) ours = value,
enum { SBX_CONSTANTS(SBX_ENUMERATOR) };
#undef SBX_ENUMERATOR

/* A struct's size as XLA counts it (XLA_FFI_STRUCT_SIZE): up to the end of its last field,
 * the one named. */
#define SBX_STRUCT_SIZE(s, last) (offsetof(struct sbx_##s, last) + sizeof(((struct sbx_##s *)0)->last))

#ifdef SBX_HOLD /* after xla/ffi/api/c_api.h: every field and constant above is XLA's */
#define SBX_HOLD_FIELD(s, type, field)                                                     \
    _Static_assert(offsetof(struct sbx_##s, field) == offsetof(XLA_FFI_##s, field),        \
                   "XLA_FFI_" #s "." #field " has moved");                                 \
    _Static_assert(sizeof(((struct sbx_##s *)0)->field) == sizeof(((XLA_FFI_##s *)0)->field), \
                   "XLA_FFI_" #s "." #field " has another size");
#define SBX_HOLD_FIELD_UNREAD(s, type, field) /* held by the offsets of the fields after it */
#if XLA_FFI_API_MINOR >= 4 /* API 0.4 renamed the extensions' base, its layout the same */
typedef XLA_FFI_InternalExtension XLA_FFI_Extension_Base;
#endif
#define SBX_HOLD_STRUCT(s, FIELDS) FIELDS(SBX_HOLD_FIELD, s)
SBX_STRUCTS(SBX_HOLD_STRUCT)
#define SBX_HOLD_CONSTANT(ours, theirs, value) _Static_assert((int)ours == (int)(theirs), #theirs " is not " #value);
SBX_CONSTANTS(SBX_HOLD_CONSTANT)
_Static_assert(SBX_API_MAJOR == XLA_FFI_API_MAJOR && SBX_API_MINOR <= XLA_FFI_API_MINOR,
               "the handler states an API version this XLA does not take");
#endif

#endif
