// Giving memory back to the system after a burst, which JavaScript cannot do itself:
//   releasePages(view): madvise(MADV_DONTNEED) over the whole pages of a Uint8Array. The
//     router's preprocessing memories are WebAssembly shared memories that V8 never frees
//     once another thread has seen them; after a burst their pages are released (they read
//     as zeros and are faulted in again when the next image uses them).
//   collectAllGarbage(): V8's LowMemoryNotification on the calling thread's isolate: every full
//     collection it takes until nothing more is freed (false where V8's symbols are not found).
//   trimHeap(): glibc's malloc_trim(0): the freed request and image buffers that malloc keeps
//     for reuse (mmtc raises its trim threshold for speed) go back to the kernel once idle.
// Optional: the router runs without it and its memory is then bounded, not returned.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <node_api.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
static napi_value trim(napi_env env, napi_callback_info info) {
  napi_value out; napi_get_boolean(env, malloc_trim(0) == 1, &out); return out;
}
static napi_value release(napi_env env, napi_callback_info info) {
  size_t argc = 1; napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_typedarray_type type; size_t length; void* data; napi_value ab; size_t offset;
  if (argc < 1 || napi_get_typedarray_info(env, argv[0], &type, &length, &data, &ab, &offset) != napi_ok || type != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "expected a Uint8Array"); return NULL;
  }
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = ((uintptr_t)data + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t end = ((uintptr_t)data + length) & ~(uintptr_t)(page - 1);
  double released = 0;
  if (end > start && madvise((void*)start, end - start, MADV_DONTNEED) == 0) released = (double)(end - start);
  napi_value out; napi_create_double(env, released, &out); return out;
}
/* V8's v8::Isolate::GetCurrent() and Isolate::LowMemoryNotification(), found in the running
   process at the first call (Node's and Electron's binaries export them) rather than linked:
   the helper stays a plain C Node-API module, and where they are not found collectAllGarbage()
   answers false and the router runs its ordinary collection instead. After 128 concurrent
   clients, gc({type: 'major'}) once a second for 10 s left 2.5-3.7 GiB of dead request buffers
   resident; this collection (the one a heap snapshot runs) frees them at once
   (docs/performance.md, "Memory after a burst"). Called on the main thread, inside a Node-API
   callback, where the current isolate is the caller's. */
typedef void* (*isolate_get_current)(void);
typedef void (*isolate_low_memory)(void* isolate);
static napi_value collect(napi_env env, napi_callback_info info) {
  static isolate_get_current get_current;
  static isolate_low_memory low_memory;
  if (!get_current || !low_memory) {
    get_current = (isolate_get_current)dlsym(RTLD_DEFAULT, "_ZN2v87Isolate10GetCurrentEv");
    low_memory = (isolate_low_memory)dlsym(RTLD_DEFAULT, "_ZN2v87Isolate21LowMemoryNotificationEv");
  }
  void* isolate = get_current && low_memory ? get_current() : NULL;
  if (isolate) low_memory(isolate);
  napi_value out; napi_get_boolean(env, isolate != NULL, &out); return out;
}
static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "collectAllGarbage", NAPI_AUTO_LENGTH, collect, NULL, &fn); napi_set_named_property(env, exports, "collectAllGarbage", fn);
  napi_create_function(env, "trimHeap", NAPI_AUTO_LENGTH, trim, NULL, &fn); napi_set_named_property(env, exports, "trimHeap", fn);
  napi_create_function(env, "releasePages", NAPI_AUTO_LENGTH, release, NULL, &fn); napi_set_named_property(env, exports, "releasePages", fn);
  return exports;
}
NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
