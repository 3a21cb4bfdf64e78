// The interface between memsight._linehook and a native counter reader: a
// shared library that reads an allocator's statistics into an int64 array
// without creating Python objects. memsight builds one against the installed
// torch's headers (counters.cpp beside this file); tests build fakes.
//
// The library exports one C function, memsight_counters(), returning a
// pointer to a static table that lives as long as the library is loaded.
#pragma once

#include <stdint.h>

#define MEMSIGHT_COUNTERS_ABI 1

#ifdef __cplusplus
extern "C" {
#endif

struct memsight_counters {
  int32_t abi;               // MEMSIGHT_COUNTERS_ABI
  int32_t count;             // how many counters a read fills
  const char* const* names;  // their names, as torch.cuda.memory_stats() flattens them
  // Fills out[0..count) with the counters of `device`. Returns 0, or -1 with
  // a message of at most err_len bytes (NUL included) in err.
  int (*read)(int device, int64_t* out, char* err, int err_len);
  // Resets the peak and the accumulated (allocated/freed) counters of `device`.
  int (*reset)(int device, char* err, int err_len);
};

typedef const struct memsight_counters* (*memsight_counters_fn)(void);

#ifdef __cplusplus
}
#endif
