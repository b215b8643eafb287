// tlaloc's own declarations of the subset of the PJRT C API that the pjrt lane calls. Written
// from the facts in shared/notes/pjrt-c-api-facts.md (layouts of the public header at PJRT API
// 0.105, LP64); the offsets are checked below with static_assert and the plugin's reported
// version and PJRT_Api size are checked at load time (plugin.cpp).
//
// Rules of the ABI (PJRT C API): every argument struct starts with {size_t struct_size;
// void* extension_start}; struct_size must be >= the plugin's idea of the struct, so tlaloc
// declares the newest layout it knows; every call returns a PJRT_Error* (null = success) that
// the caller destroys; plugin-owned handles are opaque.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tlaloc::runtime::pjrt::capi {

// Opaque plugin-side objects.
struct Error;
struct Client;
struct Device;
struct Event;
struct Buffer;
struct Executable;
struct LoadedExecutable;

// The API major.minor that tlaloc's layouts were written for, and the oldest plugin it accepts:
// the PJRT_Api function-pointer order used here was checked identical from 0.81 to 0.105.
inline constexpr int kMajor = 0;
inline constexpr int kNewestKnownMinor = 105;
inline constexpr int kMinMinor = 81;

struct Header {
  size_t struct_size;
  void* extension_start;
};

struct Version {
  size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
};

// PJRT_Api: a header, the version, then function pointers (index i at byte 40 + 8 i).
struct Api {
  size_t struct_size;
  void* extension_start;
  Version pjrt_api_version;
  void* functions[1];  // really struct_size / 8 - 5 entries; read through fn_index below
};
inline constexpr size_t kApiFunctionsOffset = 40;

// Indices of the functions tlaloc calls in PJRT_Api's pointer table.
enum FnIndex : int {
  kErrorDestroy = 0,
  kErrorMessage = 1,
  kErrorGetCode = 2,
  kPluginInitialize = 3,
  kEventDestroy = 5,
  kEventIsReady = 6,
  kEventAwait = 8,
  kClientCreate = 10,
  kClientDestroy = 11,
  kClientPlatformName = 12,
  kClientPlatformVersion = 14,
  kClientAddressableDevices = 16,
  kClientCompile = 20,
  kClientBufferFromHostBuffer = 22,
  kExecutableDestroy = 40,
  kExecutableNumOutputs = 44,
  kLoadedExecutableDestroy = 50,
  kLoadedExecutableGetExecutable = 51,
  kLoadedExecutableExecute = 55,
  kBufferDestroy = 58,
  kBufferToHostBuffer = 70,
  kBufferReadyEvent = 72,
  kLastFnUsed = kBufferReadyEvent,
};

// PJRT_Error_Code (absl status codes).
enum ErrorCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kNotFound = 5,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

// PJRT_Buffer_Type values (not xla::PrimitiveType's numbering).
enum BufferType : int {
  kPred = 1,
  kS32 = 4,
  kU32 = 8,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
};

enum NamedValueType : int { kString = 0, kInt64 = 1, kInt64List = 2, kFloat = 3, kBool = 4 };

struct NamedValue {
  size_t struct_size;
  void* extension_start;
  const char* name;
  size_t name_size;
  NamedValueType type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;  // 32-bit
    bool bool_value;
  };
  size_t value_size;  // string length, list length, or 1
};

struct ErrorDestroyArgs {
  size_t struct_size;
  void* extension_start;
  Error* error;
};
struct ErrorMessageArgs {
  size_t struct_size;
  void* extension_start;
  const Error* error;
  const char* message;  // out, lives as long as the error
  size_t message_size;
};
struct ErrorGetCodeArgs {
  size_t struct_size;
  void* extension_start;
  const Error* error;
  ErrorCode code;  // out
};
struct PluginInitializeArgs {
  size_t struct_size;
  void* extension_start;
};
struct EventArgs {  // PJRT_Event_Destroy_Args, PJRT_Event_Await_Args
  size_t struct_size;
  void* extension_start;
  Event* event;
};
struct EventIsReadyArgs {
  size_t struct_size;
  void* extension_start;
  Event* event;
  bool is_ready;  // out
};
struct ClientCreateArgs {
  size_t struct_size;
  void* extension_start;
  const NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};
struct ClientDestroyArgs {
  size_t struct_size;
  void* extension_start;
  Client* client;
};
struct ClientStringArgs {  // PJRT_Client_PlatformName_Args, PJRT_Client_PlatformVersion_Args
  size_t struct_size;
  void* extension_start;
  Client* client;
  const char* value;  // out, owned by the client
  size_t value_size;
};
struct ClientAddressableDevicesArgs {
  size_t struct_size;
  void* extension_start;
  Client* client;
  Device* const* devices;  // out, owned by the client
  size_t num_devices;
};
struct Program {
  size_t struct_size;
  void* extension_start;
  char* code;
  size_t code_size;
  const char* format;  // "mlir"
  size_t format_size;
};
struct ClientCompileArgs {
  size_t struct_size;
  void* extension_start;
  Client* client;
  const Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  LoadedExecutable* executable;  // out
};
struct ClientBufferFromHostBufferArgs {
  size_t struct_size;
  void* extension_start;
  Client* client;
  const void* data;
  BufferType type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // null: dense row-major
  size_t num_byte_strides;
  int host_buffer_semantics;  // 0: kImmutableOnlyDuringCall
  Device* device;
  void* memory;
  void* device_layout;
  Event* done_with_host_buffer;  // out
  Buffer* buffer;                // out
};
struct ExecuteOptions {
  size_t struct_size;
  void* extension_start;
  void* send_callbacks;
  void* recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  void* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  void* multi_slice_config;
};
struct LoadedExecutableExecuteArgs {
  size_t struct_size;
  void* extension_start;
  LoadedExecutable* executable;
  ExecuteOptions* options;
  Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  Buffer** const* output_lists;  // [num_devices][num_outputs], filled by the plugin
  Event** device_complete_events;
  Device* execute_device;
};
struct ExecutableArgs {  // PJRT_Executable_Destroy_Args
  size_t struct_size;
  void* extension_start;
  Executable* executable;
};
struct LoadedExecutableArgs {  // PJRT_LoadedExecutable_Destroy_Args
  size_t struct_size;
  void* extension_start;
  LoadedExecutable* executable;
};
struct LoadedExecutableGetExecutableArgs {
  size_t struct_size;
  void* extension_start;
  LoadedExecutable* loaded_executable;
  Executable* executable;  // out; destroy with PJRT_Executable_Destroy
};
struct ExecutableNumOutputsArgs {
  size_t struct_size;
  void* extension_start;
  Executable* executable;
  size_t num_outputs;  // out
};
struct BufferArgs {  // PJRT_Buffer_Destroy_Args
  size_t struct_size;
  void* extension_start;
  Buffer* buffer;
};
struct BufferToHostBufferArgs {
  size_t struct_size;
  void* extension_start;
  Buffer* src;
  void* host_layout;
  void* dst;
  size_t dst_size;
  Event* event;  // out
};
struct BufferReadyEventArgs {
  size_t struct_size;
  void* extension_start;
  Buffer* buffer;
  Event* event;  // out
};

// Every function but PJRT_Error_Destroy / PJRT_Error_Message returns an Error* (null: success).
template <typename Args>
using Fn = Error* (*)(Args*);
using ErrorDestroyFn = void (*)(ErrorDestroyArgs*);
using ErrorMessageFn = void (*)(ErrorMessageArgs*);
using GetPjrtApiFn = const Api* (*)();

// Layout checks against the facts notes (LP64).
static_assert(sizeof(void*) == 8, "tlaloc's PJRT declarations assume LP64");
static_assert(offsetof(Api, functions) == kApiFunctionsOffset);
static_assert(offsetof(NamedValue, type) == 32 && offsetof(NamedValue, int64_value) == 40 &&
              sizeof(NamedValue) == 56);
static_assert(offsetof(ErrorMessageArgs, message_size) == 32);
static_assert(offsetof(ErrorGetCodeArgs, code) == 24);
static_assert(offsetof(EventIsReadyArgs, is_ready) == 24 && sizeof(EventIsReadyArgs) == 32);
static_assert(offsetof(ClientCreateArgs, client) == 64 && sizeof(ClientCreateArgs) == 88);
static_assert(sizeof(Program) == 48);
static_assert(offsetof(ClientCompileArgs, executable) == 48 && sizeof(ClientCompileArgs) == 56);
static_assert(offsetof(ClientBufferFromHostBufferArgs, type) == 32 &&
              offsetof(ClientBufferFromHostBufferArgs, host_buffer_semantics) == 72 &&
              offsetof(ClientBufferFromHostBufferArgs, done_with_host_buffer) == 104 &&
              sizeof(ClientBufferFromHostBufferArgs) == 120);
static_assert(offsetof(ExecuteOptions, non_donatable_input_indices) == 56 &&
              offsetof(ExecuteOptions, call_location) == 80 && sizeof(ExecuteOptions) == 120);
static_assert(offsetof(LoadedExecutableExecuteArgs, output_lists) == 56 &&
              sizeof(LoadedExecutableExecuteArgs) == 80);
static_assert(sizeof(BufferToHostBufferArgs) == 56);

}  // namespace tlaloc::runtime::pjrt::capi
